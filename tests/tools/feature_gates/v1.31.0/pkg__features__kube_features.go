	CrossNamespaceVolumeDataSource featuregate.Feature = "CrossNamespaceVolumeDataSource"
	AllowDNSOnlyNodeCSR featuregate.Feature = "AllowDNSOnlyNodeCSR"
	AllowServiceLBStatusOnNonLB featuregate.Feature = "AllowServiceLBStatusOnNonLB"
	AnyVolumeDataSource featuregate.Feature = "AnyVolumeDataSource"
	AppArmor featuregate.Feature = "AppArmor"
	AppArmorFields featuregate.Feature = "AppArmorFields"
	AuthorizeNodeWithSelectors featuregate.Feature = "AuthorizeNodeWithSelectors"
	CloudDualStackNodeIPs featuregate.Feature = "CloudDualStackNodeIPs"
	ClusterTrustBundle featuregate.Feature = "ClusterTrustBundle"
	ClusterTrustBundleProjection featuregate.Feature = "ClusterTrustBundleProjection"
	CPUCFSQuotaPeriod featuregate.Feature = "CustomCPUCFSQuotaPeriod"
	CPUManager featuregate.Feature = "CPUManager"
	CPUManagerPolicyAlphaOptions featuregate.Feature = "CPUManagerPolicyAlphaOptions"
	CPUManagerPolicyBetaOptions featuregate.Feature = "CPUManagerPolicyBetaOptions"
	CPUManagerPolicyOptions featuregate.Feature = "CPUManagerPolicyOptions"
	CoordinatedLeaderElection featuregate.Feature = "CoordinatedLeaderElection"
	CSIMigrationPortworx featuregate.Feature = "CSIMigrationPortworx"
	CSIVolumeHealth featuregate.Feature = "CSIVolumeHealth"
	CloudControllerManagerWebhook featuregate.Feature = "CloudControllerManagerWebhook"
	ContainerCheckpoint featuregate.Feature = "ContainerCheckpoint"
	CronJobsScheduledAnnotation featuregate.Feature = "CronJobsScheduledAnnotation"
	DevicePluginCDIDevices featuregate.Feature = "DevicePluginCDIDevices"
	DisableAllocatorDualWrite featuregate.Feature = "DisableAllocatorDualWrite"
	DisableCloudProviders featuregate.Feature = "DisableCloudProviders"
	DisableKubeletCloudCredentialProviders featuregate.Feature = "DisableKubeletCloudCredentialProviders"
	AllowInsecureKubeletCertificateSigningRequests featuregate.Feature = "AllowInsecureKubeletCertificateSigningRequests"
	DisableNodeKubeProxyVersion featuregate.Feature = "DisableNodeKubeProxyVersion"
	DRAControlPlaneController featuregate.Feature = "DRAControlPlaneController"
	DynamicResourceAllocation featuregate.Feature = "DynamicResourceAllocation"
	EventedPLEG featuregate.Feature = "EventedPLEG"
	ExecProbeTimeout featuregate.Feature = "ExecProbeTimeout"
	RetryGenerateName featuregate.Feature = "RetryGenerateName"
	GracefulNodeShutdown featuregate.Feature = "GracefulNodeShutdown"
	GracefulNodeShutdownBasedOnPodPriority featuregate.Feature = "GracefulNodeShutdownBasedOnPodPriority"
	HPAContainerMetrics featuregate.Feature = "HPAContainerMetrics"
	HPAScaleToZero featuregate.Feature = "HPAScaleToZero"
	HonorPVReclaimPolicy featuregate.Feature = "HonorPVReclaimPolicy"
	InTreePluginPortworxUnregister featuregate.Feature = "InTreePluginPortworxUnregister"
	JobBackoffLimitPerIndex featuregate.Feature = "JobBackoffLimitPerIndex"
	JobManagedBy featuregate.Feature = "JobManagedBy"
	JobPodFailurePolicy featuregate.Feature = "JobPodFailurePolicy"
	JobPodReplacementPolicy featuregate.Feature = "JobPodReplacementPolicy"
	JobSuccessPolicy featuregate.Feature = "JobSuccessPolicy"
	KubeletCgroupDriverFromCRI featuregate.Feature = "KubeletCgroupDriverFromCRI"
	KubeletInUserNamespace featuregate.Feature = "KubeletInUserNamespace"
	KubeletPodResourcesDynamicResources featuregate.Feature = "KubeletPodResourcesDynamicResources"
	KubeletPodResourcesGet featuregate.Feature = "KubeletPodResourcesGet"
	KubeletSeparateDiskGC featuregate.Feature = "KubeletSeparateDiskGC"
	KubeletTracing featuregate.Feature = "KubeletTracing"
	KubeProxyDrainingTerminatingNodes featuregate.Feature = "KubeProxyDrainingTerminatingNodes"
	LegacyServiceAccountTokenCleanUp featuregate.Feature = "LegacyServiceAccountTokenCleanUp"
	LocalStorageCapacityIsolationFSQuotaMonitoring featuregate.Feature = "LocalStorageCapacityIsolationFSQuotaMonitoring"
	LogarithmicScaleDown featuregate.Feature = "LogarithmicScaleDown"
	MatchLabelKeysInPodAffinity featuregate.Feature = "MatchLabelKeysInPodAffinity"
	MatchLabelKeysInPodTopologySpread featuregate.Feature = "MatchLabelKeysInPodTopologySpread"
	MaxUnavailableStatefulSet featuregate.Feature = "MaxUnavailableStatefulSet"
	MemoryManager featuregate.Feature = "MemoryManager"
	MemoryQoS featuregate.Feature = "MemoryQoS"
	MinDomainsInPodTopologySpread featuregate.Feature = "MinDomainsInPodTopologySpread"
	MultiCIDRServiceAllocator featuregate.Feature = "MultiCIDRServiceAllocator"
	NewVolumeManagerReconstruction featuregate.Feature = "NewVolumeManagerReconstruction"
	NFTablesProxyMode featuregate.Feature = "NFTablesProxyMode"
	NodeLogQuery featuregate.Feature = "NodeLogQuery"
	NodeOutOfServiceVolumeDetach featuregate.Feature = "NodeOutOfServiceVolumeDetach"
	NodeSwap featuregate.Feature = "NodeSwap"
	PDBUnhealthyPodEvictionPolicy featuregate.Feature = "PDBUnhealthyPodEvictionPolicy"
	PersistentVolumeLastPhaseTransitionTime featuregate.Feature = "PersistentVolumeLastPhaseTransitionTime"
	PodAndContainerStatsFromCRI featuregate.Feature = "PodAndContainerStatsFromCRI"
	PodDeletionCost featuregate.Feature = "PodDeletionCost"
	PodDisruptionConditions featuregate.Feature = "PodDisruptionConditions"
	PodIndexLabel featuregate.Feature = "PodIndexLabel"
	PodReadyToStartContainersCondition featuregate.Feature = "PodReadyToStartContainersCondition"
	PodHostIPs featuregate.Feature = "PodHostIPs"
	PodLifecycleSleepAction featuregate.Feature = "PodLifecycleSleepAction"
	PodSchedulingReadiness featuregate.Feature = "PodSchedulingReadiness"
	PortForwardWebsockets featuregate.Feature = "PortForwardWebsockets"
	ProcMountType featuregate.Feature = "ProcMountType"
	QOSReserved featuregate.Feature = "QOSReserved"
	RecoverVolumeExpansionFailure featuregate.Feature = "RecoverVolumeExpansionFailure"
	RelaxedEnvironmentVariableValidation featuregate.Feature = "RelaxedEnvironmentVariableValidation"
	ReloadKubeletServerCertificateFile featuregate.Feature = "ReloadKubeletServerCertificateFile"
	ResourceHealthStatus featuregate.Feature = "ResourceHealthStatus"
	RotateKubeletServerCertificate featuregate.Feature = "RotateKubeletServerCertificate"
	RuntimeClassInImageCriAPI featuregate.Feature = "RuntimeClassInImageCriApi"
	ElasticIndexedJob featuregate.Feature = "ElasticIndexedJob"
	SchedulerQueueingHints featuregate.Feature = "SchedulerQueueingHints"
	SeparateTaintEvictionController featuregate.Feature = "SeparateTaintEvictionController"
	ServiceAccountTokenJTI featuregate.Feature = "ServiceAccountTokenJTI"
	ServiceAccountTokenNodeBinding featuregate.Feature = "ServiceAccountTokenNodeBinding"
	ServiceAccountTokenNodeBindingValidation featuregate.Feature = "ServiceAccountTokenNodeBindingValidation"
	ServiceAccountTokenPodNodeInfo featuregate.Feature = "ServiceAccountTokenPodNodeInfo"
	ServiceTrafficDistribution featuregate.Feature = "ServiceTrafficDistribution"
	SidecarContainers featuregate.Feature = "SidecarContainers"
	SizeMemoryBackedVolumes featuregate.Feature = "SizeMemoryBackedVolumes"
	StableLoadBalancerNodeSet featuregate.Feature = "StableLoadBalancerNodeSet"
	StatefulSetAutoDeletePVC featuregate.Feature = "StatefulSetAutoDeletePVC"
	StatefulSetStartOrdinal featuregate.Feature = "StatefulSetStartOrdinal"
	StorageVersionMigrator featuregate.Feature = "StorageVersionMigrator"
	TopologyAwareHints featuregate.Feature = "TopologyAwareHints"
	TopologyManagerPolicyAlphaOptions featuregate.Feature = "TopologyManagerPolicyAlphaOptions"
	TopologyManagerPolicyBetaOptions featuregate.Feature = "TopologyManagerPolicyBetaOptions"
	TopologyManagerPolicyOptions featuregate.Feature = "TopologyManagerPolicyOptions"
	TranslateStreamCloseWebsocketRequests featuregate.Feature = "TranslateStreamCloseWebsocketRequests"
	UnknownVersionInteroperabilityProxy featuregate.Feature = "UnknownVersionInteroperabilityProxy"
	UserNamespacesSupport featuregate.Feature = "UserNamespacesSupport"
	VolumeAttributesClass featuregate.Feature = "VolumeAttributesClass"
	VolumeCapacityPriority featuregate.Feature = "VolumeCapacityPriority"
	WinDSR featuregate.Feature = "WinDSR"
	WinOverlay featuregate.Feature = "WinOverlay"
	WindowsHostNetwork featuregate.Feature = "WindowsHostNetwork"
	NodeInclusionPolicyInPodTopologySpread featuregate.Feature = "NodeInclusionPolicyInPodTopologySpread"
	SELinuxMountReadWriteOncePod featuregate.Feature = "SELinuxMountReadWriteOncePod"
	InPlacePodVerticalScaling featuregate.Feature = "InPlacePodVerticalScaling"
	LoadBalancerIPMode featuregate.Feature = "LoadBalancerIPMode"
	ImageMaximumGCAge featuregate.Feature = "ImageMaximumGCAge"
	UserNamespacesPodSecurityStandards featuregate.Feature = "UserNamespacesPodSecurityStandards"
	StorageNamespaceIndex featuregate.Feature = "StorageNamespaceIndex"
	SELinuxMount featuregate.Feature = "SELinuxMount"
	RecursiveReadOnlyMounts featuregate.Feature = "RecursiveReadOnlyMounts"
	SupplementalGroupsPolicy featuregate.Feature = "SupplementalGroupsPolicy"
	ImageVolume featuregate.Feature = "ImageVolume"
	AppArmor: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	AppArmorFields: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	CloudDualStackNodeIPs: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	CPUManager: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // GA in 1.26
	DisableCloudProviders: {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	DisableKubeletCloudCredentialProviders: {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	DevicePluginCDIDevices: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	HPAContainerMetrics: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	JobPodFailurePolicy: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	KubeProxyDrainingTerminatingNodes: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // GA in 1.31; remove in 1.33
	LegacyServiceAccountTokenCleanUp: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // GA in 1.30; remove in 1.32
	LogarithmicScaleDown: {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	MinDomainsInPodTopologySpread: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	NewVolumeManagerReconstruction: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	NodeOutOfServiceVolumeDetach: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.31
	PDBUnhealthyPodEvictionPolicy: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	PersistentVolumeLastPhaseTransitionTime: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	PodDisruptionConditions: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	PodHostIPs: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	PodSchedulingReadiness: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // GA in 1.30; remove in 1.32
	ElasticIndexedJob: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // GA in 1.31, remove in 1.32
	StableLoadBalancerNodeSet: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // GA in 1.30, remove in 1.32
	StatefulSetStartOrdinal: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // GA in 1.31, remove in 1.33
	genericfeatures.AdmissionWebhookMatchConditions: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	genericfeatures.AggregatedDiscoveryEndpoint: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
	genericfeatures.APIListChunking: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	genericfeatures.EfficientWatchResumption: {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	genericfeatures.KMSv2: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.31
	genericfeatures.KMSv2KDF: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.31
	genericfeatures.RemainingItemCount: {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	genericfeatures.ServerSideApply: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.29
	genericfeatures.ServerSideFieldValidation: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.29
	genericfeatures.ValidatingAdmissionPolicy: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	genericfeatures.WatchBookmark: {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	genericfeatures.ZeroLimitedNominalConcurrencyShares: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
