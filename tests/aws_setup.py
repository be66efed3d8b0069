"""AWS resources the submit tests need, created in the emulator: a bucket, three roles, a caller."""
import json

ACCOUNT = "123456789012"
REGION = "us-west-2"
BUCKET = "my-smp-bucket"
TRUST_SAGEMAKER = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
TRUST_EC2 = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def job_policy(bucket: str = BUCKET, with_ecr_and_logs: bool = True) -> dict:
    statements = [
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": f"arn:aws:s3:::{bucket}/*"},
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}"},
        {"Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": "*"},
    ]
    if with_ecr_and_logs:
        statements += [
            {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
            {"Effect": "Allow", "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                                           "ecr:BatchCheckLayerAvailability"],
             "Resource": "arn:aws:ecr:*:658645717510:repository/smdistributed-modelparallel"},
            {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
             "Resource": "arn:aws:logs:*:*:log-group:/aws/sagemaker/TrainingJobs:*"},
        ]
    return {"Version": "2012-10-17", "Statement": statements}


def create_world(session, bucket: str = BUCKET, pass_role: bool = True) -> dict[str, str]:
    """Bucket, roles Good / NoTrust / NoPerms, and the caller (moto's `moto` user) allowed to PassRole."""
    s3, iam = session.client("s3"), session.client("iam")
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    arns = {}
    for name, trust, policy in (("Good", TRUST_SAGEMAKER, job_policy(bucket)),
                                ("NoTrust", TRUST_EC2, job_policy(bucket)),
                                ("NoPerms", TRUST_SAGEMAKER, job_policy(bucket, with_ecr_and_logs=False))):
        arns[name] = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        iam.put_role_policy(RoleName=name, PolicyName="job", PolicyDocument=json.dumps(policy))
    iam.create_user(UserName="moto")
    if pass_role:
        iam.put_user_policy(UserName="moto", PolicyName="pass", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Action": "iam:PassRole", "Resource": f"arn:aws:iam::{ACCOUNT}:role/*",
                "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}}]}))
    return arns
