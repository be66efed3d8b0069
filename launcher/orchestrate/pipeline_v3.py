"""Pipeline steps on SageMaker SDK 3.x: the ModelTrainer submit builds (launcher.submission.model_trainer), its
`train` run under `sagemaker.core.workflow`'s PipelineSession, in the MLOps package's workflow classes
(`sagemaker.mlops.workflow`: Pipeline, TrainingStep, CacheConfig, the retry policies).

SDK 3.x has no Estimator ("Older interfaces such as Estimator, Model, Predictor and all their subclasses will not
be supported in V3": https://github.com/aws/sagemaker-python-sdk); its TrainingStep takes what
`ModelTrainer.train()` returns under a PipelineSession, and runs it each time the definition is built, recording
the request instead of starting a job (sagemaker/mlops/workflow/steps.py, sagemaker/core/workflow/
pipeline_context.py in the SDK).

ModelTrainer's drivers (its `sm_drivers` channel: sm_train.sh, the torchrun driver, sourcecode.json and
distributed.json) are files it writes while it builds the request, and uploads at once, under a prefix named after
the second it is built in. Here they are held in memory instead (`DriverStage`): no upload while a definition is
built, so `pipeline --dry-run` writes nothing; the step's channel names where they will be, a folder of the plan's
code location named after their content (`<code location>/<digest>/sm_drivers`, as the source tarball's
`<code location>/<digest>/sourcedir.tar.gz`), so building the same pipeline twice gives the same definition, and
a later upsert with other drivers never changes the files an earlier definition's executions read. `upload` puts
them there (a folder already complete is left alone) before the pipeline is created or updated. The drivers'
`__pycache__` folders (compiled copies of the SDK's own installation, stale once downloaded) are left out.
"""
from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from launcher.core.errors import LauncherError
from launcher.orchestrate.pipeline_params import MAX_STEPS_ENV, channel_field
from launcher.plan.build import Plan
from launcher.plan.request import MT_DRIVERS_CHANNEL
from launcher.render.source import split_s3
from launcher.spec.models import FROM_STEP_CHANNEL
from launcher.submission import model_trainer, sdk, source_store

if TYPE_CHECKING:
    from launcher.core.aws import Clients

DIGEST_CHARS = 24  # as the source tarball's folder (launcher.render.source.code_uri)
SKIPPED = ("__pycache__",)
# What the SDK may ask an upload to carry (server-side encryption with the output KMS key); anything else is refused.
UPLOAD_ARGS = ("ServerSideEncryption", "SSEKMSKeyId")


class Drivers(NamedTuple):
    """One step's drivers as ModelTrainer wrote them: the folder they go to, their files, their encryption."""

    uri: str
    files: Mapping[str, bytes]
    extra: Mapping[str, str]


def drivers_folder(code_location: str, files: Mapping[str, bytes]) -> str:
    """The drivers' folder: the code location's, named after their content (names and bytes)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        for part in (name.encode(), files[name]):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    return f"{code_location.rstrip('/')}/{digest.hexdigest()[:DIGEST_CHARS]}/{MT_DRIVERS_CHANNEL}"


def read_folder(path: str) -> dict[str, bytes]:
    """A folder's files (relative POSIX path -> bytes), less SKIPPED folders."""
    found: dict[str, bytes] = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as handle:
                found[os.path.relpath(full, path).replace(os.sep, "/")] = handle.read()
    return found


@functools.cache
def _stage_class(base: type) -> type:
    """A PipelineSession (`base`) whose `upload_data` keeps ModelTrainer's drivers in memory, in `self.stage`
    (uri -> Drivers), and returns the folder they will be uploaded to."""

    class DriverStage(base):
        stage: dict[str, Drivers]
        code_location: str
        moved: Mapping[str, str]  # a content-addressed folder -> the folder the drivers go to instead

        def upload_data(self, path: str, bucket: str | None = None, key_prefix: str = "data", callback: Any = None,
                        extra_args: dict[str, Any] | None = None) -> str:
            unexpected = sorted(set(extra_args or {}) - set(UPLOAD_ARGS))
            if not str(key_prefix).endswith(f"/{MT_DRIVERS_CHANNEL}") or not os.path.isdir(path) or unexpected:
                raise LauncherError("this SageMaker SDK version is not supported: its ModelTrainer uploaded something "
                                    f"other than its drivers while a pipeline step was built ({key_prefix}); install "
                                    "a version setup.cfg accepts")
            files = read_folder(path)
            uri = drivers_folder(self.code_location, files)
            uri = self.moved.get(uri, uri)
            self.stage[uri] = Drivers(uri, files, {k: str(v) for k, v in (extra_args or {}).items()})
            return uri

    DriverStage.__name__ = base.__name__
    return DriverStage


class Workflow:
    """SDK 3.x's workflow classes, and a step's arguments from the plan's ModelTrainer (no AWS call, no upload)."""

    def __init__(self, clients: Clients, role_arn: str, drivers: Mapping[str, str] | None = None) -> None:
        self.api = model_trainer.import_sdk()
        self.moved = dict(drivers or {})

        def load() -> tuple[Any, ...]:
            from sagemaker.core.telemetry import telemetry_logging
            from sagemaker.core.workflow import execution_variables, functions, parameters, pipeline_context
            from sagemaker.mlops.workflow import pipeline, retry, steps

            return telemetry_logging, execution_variables, functions, parameters, pipeline_context, pipeline, retry, \
                steps

        try:
            telemetry, variables, functions, parameters, context, pipeline, retry, steps = sdk.quiet_import(load)
        except ImportError as exc:
            raise LauncherError(f"a pipeline on SageMaker SDK 3.x needs its MLOps package ({exc}); install "
                                "'sagemaker>=3' (which brings sagemaker-mlops)") from None
        self.Pipeline, self.TrainingStep, self.CacheConfig = pipeline.Pipeline, steps.TrainingStep, steps.CacheConfig
        self.ParameterInteger, self.ParameterString = parameters.ParameterInteger, parameters.ParameterString
        self.Join, self.ExecutionVariables = functions.Join, variables.ExecutionVariables
        self.StepRetryPolicy = retry.StepRetryPolicy
        self.SageMakerJobStepRetryPolicy = retry.SageMakerJobStepRetryPolicy
        self.StepExceptionTypeEnum = retry.StepExceptionTypeEnum
        self.SageMakerJobExceptionTypeEnum = retry.SageMakerJobExceptionTypeEnum
        self.clients, self.role_arn = clients, role_arn
        self.stage: dict[str, Drivers] = {}
        self._session_class = _stage_class(context.PipelineSession)
        self._emitter = telemetry._telemetry_emitter
        # `train` below its telemetry decorator: the PipelineSession's wrapper, which records the call for the step
        self._train = sdk.untracked(self.api.ModelTrainer, "train", self._emitter)
        self.session: Any = None

    def _session(self, plan: Plan) -> Any:
        made = model_trainer.session(self.api, plan, self.clients, factory=self._session_class)
        made.stage, made.code_location, made.moved = self.stage, plan.estimator.code_location, self.moved
        if self.session is None:  # the Pipeline's own: the first step's (a definition over 100 KB goes to its bucket)
            self.session = made
        return made

    def step_arguments(self, plan: Plan, source_uri: str, mine: Mapping[str, Any], model: Any) -> Any:
        """`train`'s recorded call for the plan, with the step's parameters (`mine`: spec field -> pipeline variable)
        in place and, given `model` (an earlier step's model artefact), the `from_step` channel."""
        session = self._session(plan)
        trainer = model_trainer.build(plan, source_uri, self.role_arn, self.clients, self.api,
                                      sdk_session=session)
        trainer.compute.instance_type = mine["cluster.instance_type"]
        trainer.compute.instance_count = mine["cluster.instance_count"]
        trainer.output_data_config.s3_output_path = mine["output.path"]
        # MaxSteps (an Integer parameter) as the string an environment value is
        max_steps = self.Join(on="", values=[mine["training.max_steps"]])
        trainer.environment = {**(trainer.environment or {}), MAX_STEPS_ENV: max_steps}
        inputs = [self.api.InputData(channel_name=channel, data_source=mine.get(channel_field(channel), uri))
                  for channel, uri in plan.channels.items()]
        if model is not None:
            inputs.append(self.api.InputData(channel_name=FROM_STEP_CHANNEL, data_source=model))
        with sdk.no_sdk_defaults():
            return self._train(trainer, input_data_config=inputs or None, wait=False, logs=False)

    def untracked_create(self, pipeline: Any) -> Any:
        """`Pipeline.create` for this pipeline, without the SDK's telemetry (as submit's request)."""
        inner = sdk.untracked(self.Pipeline, "create", self._emitter)
        return lambda *args, **kwargs: inner(pipeline, *args, **kwargs)

    def verify(self, s3: Any) -> dict[str, tuple[str, str]]:
        """Each staged folder that holds other content than its drivers (launcher.submission.source_store), with
        the folder they go to instead and the warning that says so; reads only."""
        moved = {}
        for uri, drivers in self.stage.items():
            found, _, passed = source_store.locate(
                source_store.candidates(uri), lambda u, files=drivers.files: source_store.folder_holds(s3, u, files),
                "step's drivers")
            note = source_store.moved_note(passed, found, "step's drivers")
            if note:
                moved[uri] = (found, note)
        return moved

    def upload(self, s3: Any) -> list[str]:
        """Put each step's drivers where its definition names them, unless the folder holds them already (every
        file, byte for byte, and nothing else); returns the folders written. A folder that holds other content
        now (it was free, or ours, when `verify` looked) stops the upload before the pipeline is written."""
        written = []
        for drivers in self.stage.values():
            found = source_store.folder_holds(s3, drivers.uri, drivers.files)
            if found:
                continue
            if found is False:
                raise source_store.SourceTaken(f"{drivers.uri} holds other content than this step's drivers since "
                                               "it was looked at; nothing was written: try again")
            bucket, prefix = split_s3(drivers.uri)
            for name in sorted(drivers.files):
                s3.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=drivers.files[name], **drivers.extra)
            written.append(drivers.uri)
        return written
