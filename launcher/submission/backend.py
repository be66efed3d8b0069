"""The seam between a frozen plan and SageMaker: a backend builds the plan's CreateTrainingJob request with the
SDK, the request is held to the plan's prediction, and only then sent (torchx's Scheduler: a dry run returns the
exact request, `schedule` sends that and nothing more).

Two backends build requests (launcher.core.sdk chooses): the PyTorch Estimator (SDK 2.x) and ModelTrainer (SDK
2.x and 3.x). What sends the request is the caller's: CreateTrainingJob here (`schedule`), or SubmitServiceJob
for a plan that names an AWS Batch queue (launcher.submission.batch).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from launcher.core.errors import LauncherError
from launcher.core.frozen import thaw
from launcher.core.sdk import BackendKind
from launcher.plan.build import Plan
from launcher.plan.request import drivers_uri, predict_request

if TYPE_CHECKING:
    from launcher.core.aws import Clients

SHOWN_DIFFERENCES = 3  # field paths a refusal names (never their values: an environment value may be a secret)


# What submit hands a plan to once the account checks passed and the source is uploaded, with the source's URI,
# the role's ARN and the clients: it creates the job (or queues it) and returns the job's name. `schedule` below,
# or a Batch queue's (launcher.submission.batch.starter).
Start = Callable[[Plan, str, str, "Clients"], str]


def backend_module(plan: Plan) -> ModuleType:
    """The module that builds the plan's request (its `build_request(plan, source_uri, role_arn, clients)`)."""
    if plan.backend.problem:
        raise LauncherError(f"{plan.spec_file}: cluster.backend: {plan.backend.problem}")
    if plan.backend.kind is BackendKind.MODEL_TRAINER:
        from launcher.submission import model_trainer

        return model_trainer
    from launcher.submission import estimator

    return estimator


def built_request(plan: Plan, source_uri: str, role_arn: str, clients: Clients) -> dict[str, Any]:
    """The request the plan's backend built with the SDK, once it is the request the plan predicted; otherwise a
    LauncherError naming where they differ, before anything is sent."""
    backend = backend_module(plan)
    try:
        built = backend.build_request(plan, source_uri, role_arn, clients)
    except LauncherError:
        raise
    except Exception as exc:
        if type(exc).__module__.startswith("botocore"):  # an AWS call of the SDK's own (its drivers' upload)
            from launcher.core.aws import explain

            raise explain(exc, f"uploading the SageMaker SDK's drivers for {plan.job_name} (nothing was "
                               "started)") from None
        from launcher.core.sanitize import MESSAGE_LIMIT, clean

        raise LauncherError(f"the SageMaker SDK ({plan.backend.sdk}) refused to build the job with its "
                            f"{plan.backend.kind} backend: {clean(exc, MESSAGE_LIMIT)}; nothing was started") from None
    predicted = predict_request(plan, source_uri, role_arn)
    differing = list(differences(thaw(built), thaw(predicted)))
    if differing:
        shown = ", ".join(differing[:SHOWN_DIFFERENCES]) + (", ..." if len(differing) > SHOWN_DIFFERENCES else "")
        uploaded = (f"; its drivers were uploaded to {drivers_uri(plan)}"
                    if plan.backend.kind is BackendKind.MODEL_TRAINER else "")
        raise LauncherError(f"the SageMaker SDK ({plan.backend.sdk}) built a request for {plan.job_name} that is not "
                            f"the one the plan shows (it differs at {shown}); nothing was started{uploaded}. "
                            "Install a SageMaker SDK version setup.cfg accepts, or report the difference")
    return built


def differences(built: Any, predicted: Any, path: str = "") -> Iterator[str]:
    """The field paths where two requests differ (`ResourceConfig.InstanceCount`, `InputDataConfig[2]`)."""
    if isinstance(built, Mapping) and isinstance(predicted, Mapping):
        for key in sorted(set(built) | set(predicted), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in built or key not in predicted:
                yield where
            else:
                yield from differences(built[key], predicted[key], where)
    elif isinstance(built, list) and isinstance(predicted, list) and len(built) == len(predicted):
        for i, (a, b) in enumerate(zip(built, predicted, strict=True)):
            yield from differences(a, b, f"{path}[{i}]")
    elif built != predicted:
        yield path or "the request"


def schedule(plan: Plan, source_uri: str, role_arn: str, clients: Clients) -> str:
    """CreateTrainingJob with the request the plan's backend built; returns the job's name. A KeyboardInterrupt
    during the call propagates: whether the job exists is then for the caller to find out."""
    request = built_request(plan, source_uri, role_arn, clients)
    clients.sagemaker.create_training_job(**request)
    return plan.job_name
