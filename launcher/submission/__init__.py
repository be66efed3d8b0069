"""Submit: a Plan made into a running SageMaker training job: bucket and IAM role checks, the upload of the
source tarball, and CreateTrainingJob through the SageMaker SDK's PyTorch Estimator (the only package that
imports the SDK)."""
