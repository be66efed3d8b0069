"""The Plan: everything a submit will do, computed from a spec with no side effects.

`plan`, `render`, `submit --dry-run` and `submit` all build the same Plan and differ only in what
they do with it (design.md). Building one makes no AWS call and writes nothing.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from launcher import __version__, progress
from launcher.catalog import FRAMEWORKS, INSTANCES, requirements, smp_image_uri
from launcher.errors import Problem, SpecError, UsageError
from launcher.rules import evaluate
from launcher.spec.loader import LoadedSpec

SMP_PARAMETER_KEYS = (
    "hybrid_shard_degree", "sm_activation_offloading", "activation_loading_horizon",
    "fsdp_cache_flush_warnings", "allow_empty_shards", "tensor_parallel_degree",
    "context_parallel_degree", "expert_parallel_degree", "random_seed",
)
MANAGED_TAG = "smp-launch:managed"
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
ENTRY_POINT = "train.py"


def resolve_region(spec_region: str | None, env: Mapping[str, str], *, flag: str | None = None,
                   profile: str | None = None) -> str | None:
    """The one place a command's region is decided: --region, else the spec's, else AWS_REGION /
    AWS_DEFAULT_REGION, else the profile's (read from disk, no network). Decide it once, before
    anything reads it, and hand the result to everything (plan, bucket checks, clients, state)."""
    if flag:
        return flag
    if spec_region:
        return spec_region
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if env.get(var):
            return env[var]
    import botocore.exceptions
    import botocore.session  # only when neither the spec nor the environment names a region

    try:
        session = botocore.session.Session(profile=profile or env.get("AWS_PROFILE") or None)
        return session.get_config_variable("region")
    except botocore.exceptions.ProfileNotFound:
        return None  # the client factory says so, in one line, when a client is made


def job_name(base: str, now: datetime) -> str:
    """`<name>-YYYYMMDD-HHMMSS-mmm` in UTC: unique per millisecond, at most 63 characters (names <= 43)."""
    t = now.astimezone(timezone.utc)
    return f"{base}-{t:%Y%m%d-%H%M%S}-{t.microsecond // 1000:03d}"


def git_commit(path: str) -> str | None:
    """The commit of the git repository holding the spec, for provenance; None outside a repository."""
    import subprocess

    folder = os.path.dirname(os.path.abspath(path))
    try:
        out = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) == 40 else None


def spec_hash(loaded: LoadedSpec) -> str:
    """A hash of the spec as it may be shown (secret-looking environment values redacted): it is a tag."""
    from launcher.secrets import redact_env

    data = loaded.spec.model_dump(mode="json", exclude={"extends"})
    data["environment"] = redact_env(data.get("environment", {}))
    canonical = json.dumps(data, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def distribution(loaded: LoadedSpec) -> dict[str, Any]:
    """The SMP v2 `distribution` dict, exactly as the Estimator gets it (https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-v2-reference.html).

    `enabled` must be the bool True: the SDK forwards `parameters` only on an identity check.
    """
    smp = loaded.spec.smp
    params: dict[str, Any] = {}
    for key in SMP_PARAMETER_KEYS:
        value = getattr(smp, key)
        if value is not None:
            params[key] = value
    # SMP's offloading implementation is on only where the spec turns offloading on at all
    params["sm_activation_offloading"] = smp.activation_offloading and smp.sm_activation_offloading
    return {
        "torch_distributed": {"enabled": True},
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": params}},
    }


def input_channels(loaded: LoadedSpec) -> dict[str, str]:
    """SageMaker input channels: the data sources that live in S3 (synthetic data needs none)."""
    data = loaded.spec.data
    out = {} if data.train == "synthetic" else {"train": data.train}
    if data.validation:
        out["validation"] = data.validation
    out.update(data.channels)
    return out


@dataclass(frozen=True)
class Plan:
    spec_file: str
    spec_hash: str
    job_name: str
    base_job_name: str
    region: str | None
    role: str | None
    instance_type: str
    instance_count: int
    gpus_per_instance: int
    world_size: int
    data_parallel_degree: int
    global_batch_sequences: int
    global_batch_tokens: int
    model: dict[str, Any]
    framework: dict[str, Any]
    distribution: dict[str, Any]
    estimator: dict[str, Any]
    channels: dict[str, str] = field(default_factory=dict)
    decisions: dict[str, Any] = field(default_factory=dict)
    advisories: list[dict[str, Any]] = field(default_factory=list)
    memory: dict[str, Any] | None = None
    storage: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)  # env name -> Secrets Manager ARN, fetched at job start

    def as_dict(self) -> dict[str, Any]:
        """A deep copy in the JSON shape `plan --output json` promises (a contract for pipelines).

        Secret-looking environment values are redacted (launcher.secrets): this is what is shown and
        written (plan.json in the tarball); the backend reads `self.estimator`, which keeps them."""
        from launcher.secrets import redact_env

        estimator = {**self.estimator, "environment": redact_env(self.estimator.get("environment", {}))}
        return copy.deepcopy({
            "spec_file": self.spec_file, "spec_hash": self.spec_hash, "job_name": self.job_name,
            "base_job_name": self.base_job_name, "region": self.region, "role": self.role,
            "instance_type": self.instance_type, "instance_count": self.instance_count,
            "gpus_per_instance": self.gpus_per_instance, "world_size": self.world_size,
            "data_parallel_degree": self.data_parallel_degree,
            "global_batch_sequences": self.global_batch_sequences,
            "global_batch_tokens": self.global_batch_tokens, "model": self.model,
            "framework": self.framework, "distribution": self.distribution,
            "estimator": estimator, "secrets": self.secrets, "channels": self.channels,
            "decisions": self.decisions, "advisories": self.advisories, "memory": self.memory,
            "storage": self.storage,
        })


def build_plan(loaded: LoadedSpec, now: datetime | None = None,
               env: Mapping[str, str] | None = None, region: str | None = None) -> Plan:
    """Compute the frozen Plan for a validated spec. Pure: no network, no files written.

    `region`, when given, is the one the caller already resolved (resolve_region) and wins."""
    env = os.environ if env is None else env
    spec = loaded.spec
    now = now or datetime.now(timezone.utc)
    name = job_name(spec.name, now)
    region = region or resolve_region(spec.cluster.region, env)
    role = spec.role or env.get("SMP_LAUNCH_ROLE") or None
    instance = INSTANCES[spec.cluster.instance_type]
    world = spec.cluster.instance_count * instance.gpus
    smp = spec.smp
    dp = max(1, world // (smp.tensor_parallel_degree * smp.context_parallel_degree))
    sequences = dp * spec.training.batch_size
    arch = spec.model.architecture()
    fw = FRAMEWORKS[spec.framework.pytorch_version]
    image = spec.framework.image_uri or (smp_image_uri(region, fw.pytorch, instance.name) if region else None)
    advisories, ctx = evaluate(spec, region)
    dist = distribution(loaded)
    digest = spec_hash(loaded)

    output = spec.output.path.rstrip("/")
    checkpoint_uri = spec.output.checkpoint_path or f"{output}/checkpoints/{name}"
    tags = [{"Key": k, "Value": v} for k, v in spec.tags.items()] + [
        {"Key": MANAGED_TAG, "Value": "true"},
        {"Key": "smp-launch:version", "Value": __version__},
        {"Key": "smp-launch:spec-hash", "Value": digest},
    ]
    commit = git_commit(loaded.file)
    if commit:
        tags.append({"Key": "smp-launch:git-commit", "Value": commit})
    estimator: dict[str, Any] = {
        "entry_point": ENTRY_POINT,
        "source_dir": None,  # the rendered source dir; filled in when the files are written
        "role": role,
        "framework_version": fw.pytorch,
        "py_version": fw.python,
        "instance_type": instance.name,
        "instance_count": spec.cluster.instance_count,
        "volume_size": spec.cluster.volume_size_gb,
        "max_run": spec.cluster.max_run,
        "use_spot_instances": spec.cluster.spot,
        "checkpoint_s3_uri": checkpoint_uri,
        "checkpoint_local_path": CHECKPOINT_LOCAL_PATH,
        "output_path": output,
        "code_location": spec.output.code_path or f"{output}/code",
        "base_job_name": spec.name,
        "distribution": dist,
        "hyperparameters": dict(spec.hyperparameters),
        "environment": dict(spec.environment),
        "metric_definitions": progress.metric_definitions(),
        "tags": tags,
        "debugger_hook_config": False,
        "disable_profiler": True,
    }
    if spec.framework.image_uri:
        estimator["image_uri"] = spec.framework.image_uri
    if spec.cluster.spot:
        estimator["max_wait"] = spec.cluster.max_wait or spec.cluster.max_run
    if spec.cluster.subnets:
        estimator["subnets"] = list(spec.cluster.subnets)
        estimator["security_group_ids"] = list(spec.cluster.security_group_ids)
    if spec.cluster.kms_key_id:
        # CreateTrainingJob refuses VolumeKmsKeyId on instances with NVMe instance storage (p4d, p4de, p5):
        # their local volumes are encrypted by the instance's hardware; the key protects the S3 output.
        estimator["output_kms_key"] = spec.cluster.kms_key_id
        if not instance.instance_storage_gb:
            estimator["volume_kms_key"] = spec.cluster.kms_key_id

    return Plan(
        spec_file=loaded.file, spec_hash=digest, job_name=name, base_job_name=spec.name,
        region=region, role=role, instance_type=instance.name,
        instance_count=spec.cluster.instance_count, gpus_per_instance=instance.gpus,
        world_size=world, data_parallel_degree=dp, global_batch_sequences=sequences,
        global_batch_tokens=sequences * spec.model.seq_length,
        model={"preset": spec.model.preset, "seq_length": spec.model.seq_length, **arch.as_dict()},
        framework={"pytorch_version": fw.pytorch, "py_version": fw.python, "smp_version": fw.smp,
                   "image_uri": image, "requirements": requirements(fw.pytorch)},
        distribution=dist, estimator=estimator, channels=input_channels(loaded), decisions=ctx.decisions.as_dict(),
        advisories=advisories, memory=ctx.memory.as_dict() if ctx.topology_ok else None,
        storage=storage(spec.cluster.volume_size_gb, instance.name, instance.instance_storage_gb),
        secrets=dict(spec.secrets),
    )


def storage(volume_size_gb: int, instance_type: str, instance_storage_gb: int) -> dict[str, Any]:
    """Where the job's local files live: SageMaker mounts NVMe instance storage instead of an EBS
    volume on instances that have it, so VolumeSizeInGB provisions nothing there (API_ResourceConfig)."""
    if instance_storage_gb:
        return {"kind": "instance storage", "size_gb": instance_storage_gb, "volume_size_gb_used": False,
                "note": f"{instance_type} mounts its {instance_storage_gb:,} GB of NVMe instance storage; "
                        f"volume_size_gb ({volume_size_gb}) provisions no EBS volume"}
    return {"kind": "EBS volume", "size_gb": volume_size_gb, "volume_size_gb_used": True, "note": ""}


def blocking_errors(loaded: LoadedSpec, plan: Plan) -> SpecError | None:
    """The advisor's errors as spec problems (exit 2), each pointing at the field that caused it."""
    problems = [Problem(loaded.mark(a["field"]), a["field"], f"{a['rule']} {a['message']}")
                for a in plan.advisories if a["severity"] == "error"]
    return SpecError(problems) if problems else None


def require_region(plan: Plan) -> str:
    if not plan.region:
        raise UsageError("no AWS region: set cluster.region in the spec, or AWS_REGION, or a profile region")
    return plan.region
