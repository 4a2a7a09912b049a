	CRDValidationRatcheting featuregate.Feature = "CRDValidationRatcheting"
