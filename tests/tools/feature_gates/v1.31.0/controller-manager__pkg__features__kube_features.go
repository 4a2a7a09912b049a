	CloudControllerManagerWebhook featuregate.Feature = "CloudControllerManagerWebhook"
	CloudDualStackNodeIPs featuregate.Feature = "CloudDualStackNodeIPs"
	StableLoadBalancerNodeSet featuregate.Feature = "StableLoadBalancerNodeSet"
	CloudDualStackNodeIPs:         {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.32
	StableLoadBalancerNodeSet:     {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // GA in 1.30, remove in 1.31
