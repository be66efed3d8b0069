"""Follow: a started job's life read back from AWS: status and transitions, list, stop, wait, instance
metrics, the failure class of a job that did not finish, and the CloudWatch log streams of every host (read
by `reader`: the rate limit in `ratelimit`, the fresh read in `fresh_read`, the late-line check in
`late_check`; `logs` is the follow loop, and printing is the CLI's)."""
