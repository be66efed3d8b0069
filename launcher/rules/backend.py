"""The rule on how the request is built: the backend the spec asks for exists in the installed SageMaker SDK."""
from __future__ import annotations

from collections.abc import Iterator

from launcher.core.sdk import choose_backend
from launcher.rules.engine import Context, Finding, Severity, rule

SDK_README = "https://github.com/aws/sagemaker-python-sdk/blob/master/README.rst"
MODEL_TRAINER = "https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-v2-use-api.html"


@rule("SMP090", Severity.ERROR, "The backend exists in the installed SageMaker SDK", f"{SDK_README}; {MODEL_TRAINER}")
def backend_installed(ctx: Context) -> Iterator[Finding]:
    problem = choose_backend(ctx.spec.cluster.backend).problem
    if problem:
        yield Finding(problem, "cluster.backend")
