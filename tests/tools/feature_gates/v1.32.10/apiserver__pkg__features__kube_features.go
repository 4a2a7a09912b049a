	AdmissionWebhookMatchConditions featuregate.Feature = "AdmissionWebhookMatchConditions"
	AggregatedDiscoveryEndpoint featuregate.Feature = "AggregatedDiscoveryEndpoint"
	AnonymousAuthConfigurableEndpoints featuregate.Feature = "AnonymousAuthConfigurableEndpoints"
	AllowUnsafeMalformedObjectDeletion featuregate.Feature = "AllowUnsafeMalformedObjectDeletion"
	APIListChunking featuregate.Feature = "APIListChunking"
	APIResponseCompression featuregate.Feature = "APIResponseCompression"
	APIServerIdentity featuregate.Feature = "APIServerIdentity"
	APIServerTracing featuregate.Feature = "APIServerTracing"
	APIServingWithRoutine featuregate.Feature = "APIServingWithRoutine"
	AuthorizeWithSelectors featuregate.Feature = "AuthorizeWithSelectors"
	CBORServingAndStorage featuregate.Feature = "CBORServingAndStorage"
	BtreeWatchCache featuregate.Feature = "BtreeWatchCache"
	ConcurrentWatchObjectDecode featuregate.Feature = "ConcurrentWatchObjectDecode"
	CoordinatedLeaderElection featuregate.Feature = "CoordinatedLeaderElection"
	EfficientWatchResumption featuregate.Feature = "EfficientWatchResumption"
	KMSv1 featuregate.Feature = "KMSv1"
	MutatingAdmissionPolicy featuregate.Feature = "MutatingAdmissionPolicy"
	OpenAPIEnums featuregate.Feature = "OpenAPIEnums"
	RemainingItemCount featuregate.Feature = "RemainingItemCount"
	RemoteRequestHeaderUID featuregate.Feature = "RemoteRequestHeaderUID"
	ResilientWatchCacheInitialization featuregate.Feature = "ResilientWatchCacheInitialization"
	SeparateCacheWatchRPC featuregate.Feature = "SeparateCacheWatchRPC"
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
	WatchList featuregate.Feature = "WatchList"
	ConsistentListFromCache featuregate.Feature = "ConsistentListFromCache"
	AdmissionWebhookMatchConditions: {
		{Version: version.MustParse("1.30"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	AggregatedDiscoveryEndpoint: {
		{Version: version.MustParse("1.30"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	APIListChunking: {
		{Version: version.MustParse("1.29"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	EfficientWatchResumption: {
		{Version: version.MustParse("1.24"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	RemainingItemCount: {
		{Version: version.MustParse("1.29"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	RetryGenerateName: {
		{Version: version.MustParse("1.32"), Default: true, LockToDefault: true, PreRelease: featuregate.GA},
	},
	StrictCostEnforcementForVAP: {
		{Version: version.MustParse("1.32"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	StrictCostEnforcementForWebhooks: {
		{Version: version.MustParse("1.32"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	StructuredAuthorizationConfiguration: {
		{Version: version.MustParse("1.32"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	WatchBookmark: {
		{Version: version.MustParse("1.17"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
