	CRDValidationRatcheting featuregate.Feature = "CRDValidationRatcheting"
	CustomResourceFieldSelectors featuregate.Feature = "CustomResourceFieldSelectors"
	CustomResourceFieldSelectors: {
		{Version: version.MustParse("1.32"), Default: true, LockToDefault: true, PreRelease: featuregate.GA},
	},
