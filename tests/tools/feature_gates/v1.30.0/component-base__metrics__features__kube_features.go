	ComponentSLIs featuregate.Feature = "ComponentSLIs"
