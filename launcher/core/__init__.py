"""What every stage shares and nothing else: errors and exit codes, the one AWS client factory (profile,
region, AWS_ENDPOINT_URL, deadlines), the names SageMaker and CloudWatch give things, time parsing, text made
safe to print, read-only containers and string enums for frozen results, the version, and the record of the
last job submitted from this machine. Imports no other launcher package."""
