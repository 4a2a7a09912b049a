	ComponentSLIs featuregate.Feature = "ComponentSLIs"
		ComponentSLIs: {
			{Version: version.MustParse("1.32"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
