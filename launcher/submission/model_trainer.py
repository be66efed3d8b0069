"""The ModelTrainer backend: `ModelTrainer(..., distributed=Torchrun(smp=SMP(...)))`, on SageMaker SDK 3.x
(`sagemaker.train`) and 2.x (`sagemaker.modules.train`, the same class on sagemaker_core).

AWS's SMP v2 pages describe an SMP job this way
(https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-v2-use-api.html): the nine SMP
fields are the distribution's `parameters`, sent as the `mp_parameters` hyperparameter. The source tarball the
plan uploaded is the `code` channel (ModelTrainer unpacks a `.tar.gz` source before it starts torchrun), its
requirements.txt installed by the SDK's drivers, which ModelTrainer uploads as the `sm_drivers` channel.

The request is what ModelTrainer builds for `train()` (`_create_training_job_args(boto3=True)`, the call the
SDK's own AWS Batch TrainingQueue makes), with three things held to the plan:
- the job's name: ModelTrainer names a job from its base name and the second it is built in; the plan named it
  already, so the SDK's namer gives the plan's name while the request is built;
- where its drivers go: beside the source, in the code location the account check verified (the session's
  default bucket and prefix). SDK 3.x would otherwise choose a bucket by an IAM simulation of the job's role;
- the spelling of spot: SDK 2.x's ModelTrainer writes EnableManagedSpotTraining as `EnableManagedSotTraining`
  in its boto3-style request (sagemaker/modules/train/model_trainer.py), which CreateTrainingJob would refuse.
launcher.submission.backend checks the result against the plan before anything is sent.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from launcher.core.errors import LauncherError
from launcher.core.sdk import BackendKind, installed_sdk
from launcher.plan.build import Plan
from launcher.plan.request import drivers_uri, smp_parameters
from launcher.render.source import split_s3
from launcher.submission import sdk

if TYPE_CHECKING:
    from launcher.core.aws import Clients

KIND = BackendKind.MODEL_TRAINER
REQUIREMENTS = "requirements.txt"
SPOT_MISSPELT = "EnableManagedSotTraining"  # SDK 2.x's key for EnableManagedSpotTraining (see above)
NAMER = "_get_unique_name"  # ModelTrainer's job namer, as its module imports it


@dataclass(frozen=True)
class TrainerApi:
    """The classes ModelTrainer is built from, wherever the installed SDK line keeps them."""

    module: ModuleType  # the module defining ModelTrainer (its job namer is looked up there)
    ModelTrainer: Any
    Torchrun: Any
    SMP: Any
    SourceCode: Any
    Compute: Any
    InputData: Any
    OutputDataConfig: Any
    StoppingCondition: Any
    CheckpointConfig: Any
    Networking: Any
    MetricDefinition: Any
    Session: Any


def import_sdk() -> TrainerApi:
    """ModelTrainer's classes from SDK 3.x (sagemaker.train, sagemaker.core) or 2.x (sagemaker.modules)."""
    line = installed_sdk().major

    def load() -> TrainerApi:
        try:
            if line is not None and line >= 3:
                from sagemaker.core.helper.session_helper import Session
                from sagemaker.core.shapes import MetricDefinition
                from sagemaker.core.training import configs
                from sagemaker.train import model_trainer
                from sagemaker.train.distributed import SMP, Torchrun
            else:
                from sagemaker.modules import Session, configs
                from sagemaker.modules.distributed import SMP, Torchrun
                from sagemaker.modules.train import model_trainer
                from sagemaker_core.shapes import MetricDefinition
        except ImportError as exc:
            raise LauncherError(f"the installed SageMaker SDK has no ModelTrainer ({exc}); install 'sagemaker>=3' "
                                "or 'sagemaker>=2.257.7,<3'") from None
        return TrainerApi(model_trainer, model_trainer.ModelTrainer, Torchrun, SMP, configs.SourceCode,
                          configs.Compute, configs.InputData, configs.OutputDataConfig, configs.StoppingCondition,
                          configs.CheckpointConfig, configs.Networking, MetricDefinition, Session)

    return sdk.quiet_import(load)


def session(api: TrainerApi, plan: Plan, clients: Clients, factory: Any = None) -> Any:
    """The SDK session the trainer uploads its drivers through: our clients (their endpoint, deadlines and record),
    the plan's code location as its default bucket and prefix, no bucket made or looked for. `factory` replaces the
    SDK's Session class (a pipeline's step is built under a PipelineSession: launcher.orchestrate.pipeline_v3)."""
    bucket, prefix = split_s3(plan.estimator.code_location)
    with sdk.no_sdk_defaults():
        made = (factory or api.Session)(boto_session=clients.session, sagemaker_client=clients.sagemaker,
                                        default_bucket=bucket, default_bucket_prefix=prefix.strip("/") or None)
    made._default_bucket = bucket  # known to exist (the account check): default_bucket() asks S3 nothing
    made.s3_client = clients.s3
    made.s3_resource = clients.resource("s3")
    made.s3_resource.meta.client = InThread(clients.s3)
    return made


class InThread:
    """An S3 client whose file uploads run in the calling thread: s3transfer's pool would hide the SDK's uploads
    from the call record (`aws_calls`) and from Ctrl-C. It keeps the keys it uploaded (`uploaded`: bucket, key).
    Everything else is the client's own."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.uploaded: list[tuple[str, str]] = []

    def upload_file(self, *args: Any, **kwargs: Any) -> Any:
        from boto3.s3.transfer import TransferConfig

        kwargs["Config"] = TransferConfig(use_threads=False)
        named = {**dict(zip(("Filename", "Bucket", "Key"), args[:3], strict=False)), **kwargs}
        result = self._client.upload_file(*args, **kwargs)
        self.uploaded.append((str(named.get("Bucket")), str(named.get("Key"))))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def build(plan: Plan, source_uri: str, role_arn: str, clients: Clients, api: TrainerApi | None = None,
          sdk_session: Any = None) -> Any:
    """The ModelTrainer for the plan; the source tarball is already in S3 at source_uri. `sdk_session` replaces the
    session made here (a pipeline passes its own, made by `session` with a PipelineSession class)."""
    api = api or import_sdk()
    est = plan.estimator
    params = smp_parameters(plan)
    staged = _staged_in_code_location(api.ModelTrainer)
    with sdk.no_sdk_defaults():
        trainer = staged(
            sagemaker_session=sdk_session or session(api, plan, clients), role=role_arn,
            base_job_name=plan.base_job_name,
            training_image=plan.framework.image_uri,
            source_code=api.SourceCode(source_dir=source_uri, entry_script=est.entry_point, requirements=REQUIREMENTS),
            distributed=api.Torchrun(smp=api.SMP(**{k: v for k, v in params.items() if v is not None})),
            compute=api.Compute(instance_type=est.instance_type, instance_count=est.instance_count,
                                volume_size_in_gb=est.volume_size, volume_kms_key_id=est.volume_kms_key,
                                keep_alive_period_in_seconds=est.keep_alive_period_in_seconds,
                                enable_managed_spot_training=True if est.use_spot_instances else None),
            stopping_condition=api.StoppingCondition(max_runtime_in_seconds=est.max_run,
                                                     max_wait_time_in_seconds=est.max_wait),
            output_data_config=api.OutputDataConfig(s3_output_path=est.output_path, kms_key_id=est.output_kms_key,
                                                    compression_type="GZIP"),
            checkpoint_config=api.CheckpointConfig(s3_uri=est.checkpoint_s3_uri,
                                                   local_path=est.checkpoint_local_path),
            networking=(api.Networking(subnets=list(est.subnets), security_group_ids=list(est.security_group_ids or ()))
                        if est.subnets else None),
            environment=dict(est.environment) or None,
            hyperparameters=dict(est.hyperparameters),
            tags=[{"key": t["Key"], "value": t["Value"]} for t in est.tags],
        )
    return trainer.with_metric_definitions([api.MetricDefinition(name=m["Name"], regex=m["Regex"])
                                            for m in est.metric_definitions])


@functools.cache
def _staged_in_code_location(base: type) -> type:
    """ModelTrainer whose drivers go to the session's default bucket, which is the plan's code location: SDK 3.x
    asks IAM whether the job's role may write there and, when the simulation says no, moves them under the output
    path instead (`_resolve_staging_bucket`), which the plan could not have predicted."""

    class Staged(base):
        def _resolve_staging_bucket(self) -> tuple[str, None]:
            return self.sagemaker_session.default_bucket(), None

    Staged.__name__ = base.__name__
    return Staged


@contextlib.contextmanager
def _named(api: TrainerApi, name: str) -> Iterator[None]:
    """ModelTrainer's job namer giving the plan's job name while the request is built."""
    namer = getattr(api.module, NAMER)

    def plan_name(base: str, max_length: int = 63) -> str:
        return name

    setattr(api.module, NAMER, plan_name)
    try:
        yield
    finally:
        setattr(api.module, NAMER, namer)


def build_request(plan: Plan, source_uri: str, role_arn: str, clients: Clients) -> dict[str, Any]:
    """The CreateTrainingJob request ModelTrainer's `train()` would send for the plan. Uploads the SDK's drivers
    (its `sm_drivers` channel); sends nothing else."""
    api = import_sdk()
    if not hasattr(api.module, NAMER) or not hasattr(api.ModelTrainer, "_create_training_job_args"):
        raise LauncherError("this SageMaker SDK version is not supported: its ModelTrainer builds a request "
                            "differently; install a version setup.cfg accepts")
    with sdk.sdk_silent():
        trainer = build(plan, source_uri, role_arn, clients, api)
        inputs = [api.InputData(channel_name=name, data_source=uri) for name, uri in plan.channels.items()]
        with sdk.no_sdk_defaults(), _named(api, plan.job_name):
            request = dict(trainer._create_training_job_args(input_data_config=inputs or None, boto3=True))
    uploader = trainer.sagemaker_session.s3_resource.meta.client
    only_ours(clients.s3, drivers_uri(plan), getattr(uploader, "uploaded", []))
    if SPOT_MISSPELT in request:
        request["EnableManagedSpotTraining"] = request.pop(SPOT_MISSPELT)
    return request


def only_ours(s3: Any, folder: str, uploaded: list[tuple[str, str]]) -> None:
    """The job's drivers channel reads every object under `folder`: each must be one the SDK just uploaded (the
    folder is named after the job, so nothing else belongs there); another's object there stops the submit."""
    from launcher.core.sanitize import PLACE_LIMIT, clean
    from launcher.submission.source_store import SourceTaken

    bucket, prefix = split_s3(folder.rstrip("/") + "/")
    ours = {key for b, key in uploaded if b == bucket}
    page = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1000)
    others = sorted(str(o["Key"]) for o in page.get("Contents") or () if str(o["Key"]) not in ours)
    if others:
        raise SourceTaken(f"s3://{bucket}/{clean(others[0], PLACE_LIMIT)} lies among the SageMaker SDK's drivers for "
                          f"{plan_name(folder)} and is not one of them: the job would read it; nothing was started "
                          "(remove it, then submit again)")


def plan_name(folder: str) -> str:
    """The job name in a drivers folder (`.../<base>/<job>/input/sm_drivers`)."""
    parts = folder.rstrip("/").split("/")
    return parts[-3] if len(parts) >= 3 else folder
