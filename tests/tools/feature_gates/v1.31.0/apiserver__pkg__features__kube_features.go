	AdmissionWebhookMatchConditions featuregate.Feature = "AdmissionWebhookMatchConditions"
	AggregatedDiscoveryEndpoint featuregate.Feature = "AggregatedDiscoveryEndpoint"
	AnonymousAuthConfigurableEndpoints featuregate.Feature = "AnonymousAuthConfigurableEndpoints"
	APIListChunking featuregate.Feature = "APIListChunking"
	APIResponseCompression featuregate.Feature = "APIResponseCompression"
	APIServerIdentity featuregate.Feature = "APIServerIdentity"
	APIServerTracing featuregate.Feature = "APIServerTracing"
	APIServingWithRoutine featuregate.Feature = "APIServingWithRoutine"
	AuthorizeWithSelectors featuregate.Feature = "AuthorizeWithSelectors"
	ConcurrentWatchObjectDecode featuregate.Feature = "ConcurrentWatchObjectDecode"
	ValidatingAdmissionPolicy featuregate.Feature = "ValidatingAdmissionPolicy"
	CoordinatedLeaderElection featuregate.Feature = "CoordinatedLeaderElection"
	EfficientWatchResumption featuregate.Feature = "EfficientWatchResumption"
	KMSv1 featuregate.Feature = "KMSv1"
	KMSv2 featuregate.Feature = "KMSv2"
	KMSv2KDF featuregate.Feature = "KMSv2KDF"
	MutatingAdmissionPolicy featuregate.Feature = "MutatingAdmissionPolicy"
	OpenAPIEnums featuregate.Feature = "OpenAPIEnums"
	RemainingItemCount featuregate.Feature = "RemainingItemCount"
	ResilientWatchCacheInitialization featuregate.Feature = "ResilientWatchCacheInitialization"
	SeparateCacheWatchRPC featuregate.Feature = "SeparateCacheWatchRPC"
	ServerSideApply featuregate.Feature = "ServerSideApply"
	ServerSideFieldValidation featuregate.Feature = "ServerSideFieldValidation"
	UnauthenticatedHTTP2DOSMitigation featuregate.Feature = "UnauthenticatedHTTP2DOSMitigation"
	RetryGenerateName featuregate.Feature = "RetryGenerateName"
	StrictCostEnforcementForVAP featuregate.Feature = "StrictCostEnforcementForVAP"
	StrictCostEnforcementForWebhooks featuregate.Feature = "StrictCostEnforcementForWebhooks"
	StorageVersionAPI featuregate.Feature = "StorageVersionAPI"
	StorageVersionHash featuregate.Feature = "StorageVersionHash"
	StructuredAuthenticationConfiguration featuregate.Feature = "StructuredAuthenticationConfiguration"
	StructuredAuthorizationConfiguration featuregate.Feature = "StructuredAuthorizationConfiguration"
	WatchBookmark featuregate.Feature = "WatchBookmark"
	WatchCacheInitializationPostStartHook featuregate.Feature = "WatchCacheInitializationPostStartHook"
	WatchFromStorageWithoutResourceVersion featuregate.Feature = "WatchFromStorageWithoutResourceVersion"
	InPlacePodVerticalScaling featuregate.Feature = "InPlacePodVerticalScaling"
	WatchList featuregate.Feature = "WatchList"
	ConsistentListFromCache featuregate.Feature = "ConsistentListFromCache"
	ZeroLimitedNominalConcurrencyShares featuregate.Feature = "ZeroLimitedNominalConcurrencyShares"
	AggregatedDiscoveryEndpoint: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	AdmissionWebhookMatchConditions: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	APIListChunking: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	ValidatingAdmissionPolicy: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	EfficientWatchResumption: {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	KMSv2: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.31
	KMSv2KDF: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.31
	RemainingItemCount: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	ServerSideApply: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.29
	ServerSideFieldValidation: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.29
	WatchBookmark: {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	ZeroLimitedNominalConcurrencyShares: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
