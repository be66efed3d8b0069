"""Follow: a started job's life read back from AWS: status and transitions, list, stop, wait, the CloudWatch
log streams of every host, instance metrics, and the failure class of a job that did not finish."""
