	CloudControllerManagerWebhook featuregate.Feature = "CloudControllerManagerWebhook"
