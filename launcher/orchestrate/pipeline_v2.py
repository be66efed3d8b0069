"""Pipeline steps on SageMaker SDK 2.x: the PyTorch Estimator submit builds (launcher.submission.estimator), its
`fit` run under `sagemaker.workflow`'s PipelineSession, which records the request as a step's arguments instead of
starting a job (https://sagemaker.readthedocs.io/en/stable/amazon_sagemaker_model_building_pipeline.html).

SDK 2.x's ModelTrainer has no such path (its `train` is not runnable by a PipelineSession), so a plan whose backend
is ModelTrainer never reaches this module: launcher.orchestrate.pipeline refuses it first.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from launcher.orchestrate.pipeline_params import MAX_STEPS_ENV, channel_field
from launcher.plan.build import Plan
from launcher.spec.models import FROM_STEP_CHANNEL
from launcher.submission import estimator as backend

if TYPE_CHECKING:
    from launcher.core.aws import Clients


class Workflow:
    """SDK 2.x's workflow classes, and a step's arguments from the plan's Estimator (no AWS call)."""

    def __init__(self, clients: Clients, role_arn: str) -> None:
        backend.import_sdk()
        from sagemaker.workflow.execution_variables import ExecutionVariables
        from sagemaker.workflow.functions import Join
        from sagemaker.workflow.parameters import ParameterInteger, ParameterString
        from sagemaker.workflow.pipeline import Pipeline
        from sagemaker.workflow.retry import (
            SageMakerJobExceptionTypeEnum,
            SageMakerJobStepRetryPolicy,
            StepExceptionTypeEnum,
            StepRetryPolicy,
        )
        from sagemaker.workflow.steps import CacheConfig, TrainingStep

        self.Pipeline, self.TrainingStep, self.CacheConfig = Pipeline, TrainingStep, CacheConfig
        self.ParameterInteger, self.ParameterString = ParameterInteger, ParameterString
        self.Join, self.ExecutionVariables = Join, ExecutionVariables
        self.StepRetryPolicy, self.SageMakerJobStepRetryPolicy = StepRetryPolicy, SageMakerJobStepRetryPolicy
        self.StepExceptionTypeEnum, self.SageMakerJobExceptionTypeEnum = (StepExceptionTypeEnum,
                                                                          SageMakerJobExceptionTypeEnum)
        self.clients, self.role_arn = clients, role_arn
        self.session = backend.session(clients.session, clients.sagemaker, pipeline=True)
        self._fit = backend.untracked_fit()

    def step_arguments(self, plan: Plan, source_uri: str, mine: Mapping[str, Any], model: Any) -> Any:
        """`fit`'s recorded request for the plan, with the step's parameters (`mine`: spec field -> pipeline
        variable) in place and, given `model` (an earlier step's model artefact), the `from_step` channel."""
        from sagemaker.inputs import TrainingInput

        # With OutputPath a parameter, the SDK asks the session's default bucket where a plain job's output
        # bucket decides (whether the code's KMS key applies), and would create sagemaker-REGION-ACCOUNT to
        # answer. The spec's output bucket is the answer a plain job gets, with no AWS call.
        self.session._default_bucket = plan.spec.output.path[len("s3://"):].split("/", 1)[0]
        est = backend.build(plan, source_uri, self.role_arn, self.clients.session, self.clients.sagemaker,
                            sdk_session=self.session)
        est.instance_type = mine["cluster.instance_type"]
        est.instance_count = mine["cluster.instance_count"]
        est.output_path = mine["output.path"]
        # MaxSteps (an Integer parameter) as the string an environment value is
        max_steps = self.Join(on="", values=[mine["training.max_steps"]])
        est.environment = {**(est.environment or {}), MAX_STEPS_ENV: max_steps}
        inputs: dict[str, Any] = {channel: mine.get(channel_field(channel), uri)
                                  for channel, uri in backend.channels(plan).items()}
        if model is not None:
            inputs[FROM_STEP_CHANNEL] = TrainingInput(s3_data=model)
        return self._fit(est, inputs=inputs or None, job_name=plan.job_name, wait=False, logs=False)

    def untracked_create(self, pipeline: Any) -> Any:
        """`Pipeline.create` for this pipeline, without the SDK's telemetry (as submit's fit)."""
        inner = backend.untracked(self.Pipeline, "create")
        return lambda *args, **kwargs: inner(pipeline, *args, **kwargs)

    def upload(self, s3: Any) -> list[str]:
        """What the steps need in S3 besides the source tarballs: nothing (the Estimator reads the tarball)."""
        return []

    def verify(self, s3: Any) -> dict[str, tuple[str, str]]:
        """Folders of drivers that hold other content: none (the Estimator has no drivers to upload)."""
        return {}
