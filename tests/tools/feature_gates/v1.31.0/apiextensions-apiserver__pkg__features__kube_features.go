	CRDValidationRatcheting featuregate.Feature = "CRDValidationRatcheting"
	CustomResourceFieldSelectors featuregate.Feature = "CustomResourceFieldSelectors"
