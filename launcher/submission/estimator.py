"""The PyTorch Estimator backend (SageMaker SDK 2.x): the design card's path, `sagemaker.pytorch.PyTorch` with the
plan's `distribution` dict.

It builds the Estimator from a plan and has the SDK build the CreateTrainingJob request that `fit` would send
(`prepare_workflow_for_training`, then the request of `Session.get_train_request`, as the SDK's own AWS Batch
TrainingQueue does); launcher.submission.backend checks it against the plan and sends it. Every argument was
decided when the plan was built. Nothing here imports the SDK until a function is called.

`fit` itself is wrapped by the SDK's telemetry decorator, which sends a request to an S3 telemetry endpoint and,
ending in `finally: return response`, swallows a KeyboardInterrupt raised during CreateTrainingJob; building
the request instead of calling `fit` leaves both out.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from launcher.core.errors import LauncherError
from launcher.core.sdk import BackendKind
from launcher.plan.build import Plan
from launcher.submission import sdk
from launcher.submission.sdk import CONFIG_OVERRIDES, Unused, sdk_silent

if TYPE_CHECKING:
    from launcher.core.aws import Clients

KIND = BackendKind.ESTIMATOR
_no_sdk_defaults = sdk.no_sdk_defaults  # a module name of its own: tests replace it to see the refusal below


def import_sdk():
    """Import sagemaker.pytorch quietly (launcher.submission.sdk.quiet_import).

    The import builds a JumpStart Session, which reads the SDK defaults files: without them it cannot fetch a
    config from S3 or print a page of schema errors for a malformed one. `sagemaker.experiments` is imported
    here too: `fit` imports it lazily, and its import configures the root logger (INFO, to stderr)."""

    def load():
        try:
            import sagemaker
            import sagemaker.experiments  # noqa: F401
            from sagemaker.pytorch import PyTorch
        except ImportError as exc:
            raise LauncherError(f"the PyTorch Estimator needs the SageMaker SDK 2.x ({exc}); install "
                                "'sagemaker>=2.257.7,<3' or use cluster.backend: model-trainer") from None
        return sagemaker, PyTorch

    return sdk.quiet_import(load)


def untracked(owner: type, method: str) -> Callable[..., Any]:
    """`owner.method` without SDK 2.x's telemetry decorator (launcher.submission.sdk.untracked)."""
    from sagemaker.telemetry import telemetry_logging

    return sdk.untracked(owner, method, telemetry_logging._telemetry_emitter)


def untracked_fit() -> Callable[..., Any]:
    """`EstimatorBase.fit`, untracked. `PyTorch.fit`, above it, only adds a training-recipe channel, and a
    plan never names a recipe."""
    from sagemaker.estimator import EstimatorBase

    return untracked(EstimatorBase, "fit")


def channels(plan: Plan) -> dict[str, str]:
    """The job's input channels: every data source except the synthetic one."""
    return dict(plan.channels)


def session(boto_session: Any, sagemaker_client: Any = None, *, pipeline: bool = False):
    """The SDK Session a job is built under, without the user's SDK defaults; with `pipeline`, a
    PipelineSession (fit then records the request as a pipeline step's arguments instead of starting a job)."""
    sagemaker, _ = import_sdk()
    factory: Any  # either SDK Session class; the extra clients below go only to the plain one
    if pipeline:
        from sagemaker.workflow.pipeline_context import PipelineSession

        factory = PipelineSession
    else:
        factory = sagemaker.Session
    with _no_sdk_defaults():
        made = factory(
            boto_session=boto_session, sagemaker_client=sagemaker_client,
            **({} if pipeline else {
                "sagemaker_runtime_client": Unused("sagemaker-runtime"),
                "sagemaker_featurestore_runtime_client": Unused("sagemaker-featurestore-runtime"),
                "sagemaker_metrics_client": Unused("sagemaker-metrics")}))
    if made.sagemaker_config:
        raise LauncherError(f"the SageMaker SDK loaded a defaults config despite {' and '.join(CONFIG_OVERRIDES)}; "
                            "refusing to submit a request that may differ from the plan")
    return made


def build(plan: Plan, source_uri: str, role_arn: str, boto_session: Any, sagemaker_client: Any = None,
          sdk_session: Any = None):
    """The PyTorch Estimator for the plan; the source tarball is already in S3 at source_uri.

    `sdk_session` replaces the plain Session (launcher.orchestrate.pipeline passes a PipelineSession)."""
    _, PyTorch = import_sdk()
    session_ = sdk_session or session(boto_session, sagemaker_client)
    kwargs = plan.estimator.to_dict()
    kwargs.update(source_dir=source_uri, role=role_arn, sagemaker_session=session_)
    # The image the plan resolved (the SDK's own lookup gives the same; tests/test_plan.py checks);
    # naming it spares the SDK loading its image tables.
    kwargs.setdefault("image_uri", plan.framework.image_uri)
    return PyTorch(**kwargs)


def build_request(plan: Plan, source_uri: str, role_arn: str, clients: Clients) -> dict[str, Any]:
    """The CreateTrainingJob request the Estimator's `fit(wait=False)` would send for the plan; nothing is written."""
    estimator = build(plan, source_uri, role_arn, clients.session, clients.sagemaker)
    from sagemaker.estimator import _TrainingJob

    with sdk_silent(), _no_sdk_defaults():
        estimator.prepare_workflow_for_training(job_name=plan.job_name)
        args = _TrainingJob.get_train_args(estimator, channels(plan) or None, None)
        return dict(estimator.sagemaker_session.get_train_request(**args))
