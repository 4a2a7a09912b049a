	CloudControllerManagerWebhook featuregate.Feature = "CloudControllerManagerWebhook"
	CloudDualStackNodeIPs featuregate.Feature = "CloudDualStackNodeIPs"
	StableLoadBalancerNodeSet featuregate.Feature = "StableLoadBalancerNodeSet"
