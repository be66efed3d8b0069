"""The Plan: everything a submit will do, computed from a spec with no side effects.

`plan`, `render`, `submit --dry-run` and `submit` all build the same Plan and differ only in what
they do with it. Building one makes no AWS call and writes nothing: the source dir is rendered and
packed in memory, and the CreateTrainingJob request SDK v2 will send is predicted (launcher.plan.request).
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from launcher.catalog.architecture import Architecture
from launcher.catalog.smp import FRAMEWORKS, INSTANCES, requirements, smp_image_uri
from launcher.core.aws import resolve_region
from launcher.core.errors import Mark, Problem, SpecError, no_region
from launcher.core.frozen import FrozenDict, freeze, thaw
from launcher.core.names import (
    CHECKPOINT_LOCAL_PATH,
    ENTRY_POINT,
    GIT_COMMIT_TAG,
    MANAGED_TAG,
    SPEC_HASH_TAG,
    VERSION_TAG,
)
from launcher.core.sdk import BackendChoice, choose_backend
from launcher.core.version import VERSION
from launcher.plan.bundle import SourceBundle, source_bundle
from launcher.predict import Cost, Performance, TrainingTime
from launcher.render import progress
from launcher.render.distribution import render_distribution
from launcher.render.files import rope_scaled, template_context
from launcher.render.templates import TemplateSet, load_templates, shipped
from launcher.rules import Advisory, run_rules
from launcher.rules.decisions import Decisions
from launcher.rules.memory import MemoryEstimate
from launcher.rules.topology import Topology
from launcher.spec.loader import LoadedSpec
from launcher.spec.models import JobSpec


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


def spec_hash(loaded: LoadedSpec, templates: TemplateSet | None = None) -> str:
    """A hash of the spec as it may be shown (secret-looking environment values redacted): it is a tag.

    It covers the team templates by content, not by where they lie: the same templates hash the same
    from any folder, and an edited one changes the hash."""
    from launcher.spec.secrets import redact_env

    data = loaded.spec.model_dump(mode="json", exclude={"extends"})
    # Fields added later hash only when set: older specs keep their hashes.
    for added in ("keep_alive", "instance_types", "queue"):
        if not data["cluster"].get(added):
            data["cluster"].pop(added, None)
    if data["cluster"].get("backend") == "auto":
        del data["cluster"]["backend"]
    for section, key in (("cluster", "max_cost"), ("training", "tokens"), ("model", "from_step")):
        if data[section].get(key) is None:
            data[section].pop(key, None)
    if data["output"].get("save_final_model") is False:
        del data["output"]["save_final_model"]
    if data.get("notify") is None:
        data.pop("notify", None)
    if data.get("pipeline") == {"cache": False, "cache_expire_after": 30 * 86400}:
        data.pop("pipeline", None)
    del data["templates"]
    team = templates.team_digests() if templates else {}
    if team:
        data["templates"] = team
    data["environment"] = redact_env(data.get("environment", {}))
    canonical = json.dumps(data, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def input_channels(loaded: LoadedSpec) -> dict[str, str]:
    """SageMaker input channels: the data sources that live in S3 (synthetic data needs none)."""
    data = loaded.spec.data
    out = {} if data.train == "synthetic" else {"train": data.train}
    if data.validation:
        out["validation"] = data.validation
    out.update(data.channels)
    return out


@dataclass(frozen=True)
class ModelInfo:
    preset: str | None
    seq_length: int
    architecture: Architecture

    def to_dict(self) -> dict[str, Any]:
        return {"preset": self.preset, "seq_length": self.seq_length, **self.architecture.as_dict()}


@dataclass(frozen=True)
class FrameworkInfo:
    pytorch_version: str
    py_version: str
    smp_version: str
    image_uri: str | None  # None until a region is known (the SMP images are regional)
    requirements: Mapping[str, str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "requirements", freeze(self.requirements))

    def to_dict(self) -> dict[str, Any]:
        return {"pytorch_version": self.pytorch_version, "py_version": self.py_version,
                "smp_version": self.smp_version, "image_uri": self.image_uri,
                "requirements": dict(self.requirements)}


@dataclass(frozen=True)
class Storage:
    """Where the job's local files live (see `storage`)."""

    kind: str
    size_gb: int
    volume_size_gb_used: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "size_gb": self.size_gb, "volume_size_gb_used": self.volume_size_gb_used,
                "note": self.note}


@dataclass(frozen=True)
class EstimatorArgs:
    """The SageMaker SDK v2 PyTorch Estimator's keyword arguments, every one decided by the plan.

    `source_dir` stays None here: the backend passes the uploaded tarball's URI, and `role` is the
    spec's (a name or an ARN): submit passes the ARN it resolved. The collections are read-only
    (FrozenDicts and tuples, whatever was passed in); `to_dict()` gives the SDK plain dicts and lists."""

    entry_point: str
    source_dir: str | None
    role: str | None
    framework_version: str
    py_version: str
    instance_type: str
    instance_count: int
    volume_size: int
    max_run: int
    use_spot_instances: bool
    checkpoint_s3_uri: str
    checkpoint_local_path: str
    output_path: str
    code_location: str
    base_job_name: str
    distribution: Mapping[str, Any]
    hyperparameters: Mapping[str, Any]
    environment: Mapping[str, str]
    metric_definitions: Sequence[Mapping[str, str]]
    tags: Sequence[Mapping[str, str]]
    debugger_hook_config: bool = False
    disable_profiler: bool = True
    # Given only where the spec asks for them (None: not passed to the SDK at all).
    image_uri: str | None = None
    max_wait: int | None = None
    subnets: Sequence[str] | None = None
    security_group_ids: Sequence[str] | None = None
    output_kms_key: str | None = None
    volume_kms_key: str | None = None
    keep_alive_period_in_seconds: int | None = None  # a warm pool (cluster.keep_alive > 0)

    def __post_init__(self) -> None:
        for name in _ESTIMATOR_COLLECTIONS:
            object.__setattr__(self, name, freeze(getattr(self, name)))

    def to_dict(self) -> dict[str, Any]:
        """The keyword arguments as plain, mutable dicts and lists (a copy; secrets NOT redacted: this is
        what the SDK gets)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return thaw({k: v for k, v in out.items() if v is not None or k in _ALWAYS_PASSED})


_ALWAYS_PASSED = frozenset({"source_dir", "role"})
_ESTIMATOR_COLLECTIONS = ("distribution", "hyperparameters", "environment", "metric_definitions", "tags", "subnets",
                          "security_group_ids")


@dataclass(frozen=True)
class Plan:
    """Everything a submit will do, decided once: pure data, no AWS call made to build it.

    `to_dict()` is `plan --output json` (a contract for pipelines; secret values redacted).
    `request` is the CreateTrainingJob request SDK v2 will send, as shown: a role given by name has
    its ARN only from IAM, so the request names a placeholder there (`role_arn_placeholder`) that
    submit replaces with the ARN it resolved (`request_for`).

    Frozen all the way down: nested mappings are FrozenDicts, sequences tuples, parts frozen
    dataclasses (and the spec a frozen model), so no reader can change what another reads. A variant
    is a new Plan: `dataclasses.replace`, or `with_source` to run another source bundle."""

    spec_file: str
    spec_hash: str
    job_name: str
    base_job_name: str
    region: str | None
    role: str | None
    instance_type: str
    topology: Topology
    model: ModelInfo
    framework: FrameworkInfo
    distribution: Mapping[str, Any]
    estimator: EstimatorArgs
    decisions: Decisions
    advisories: tuple[Advisory, ...]
    memory: MemoryEstimate | None  # None where the layout does not divide the world (no figure means anything)
    storage: Storage
    spec: JobSpec = field(compare=False, repr=False)  # the validated spec: what the templates read
    channels: Mapping[str, str] = field(default_factory=FrozenDict)
    secrets: Mapping[str, str] = field(default_factory=FrozenDict)  # env name -> Secrets Manager ARN, read at start
    # A source bundle given instead of the rendered one (a rerun runs its job's own tarball); see `with_source`.
    templates: TemplateSet = field(default_factory=shipped, repr=False)  # what the source dir is rendered from
    given_source: SourceBundle | None = field(default=None, repr=False)
    # Predicted speed, time to train and cost (launcher.predict); None where the layout does not divide the world.
    performance: Performance | None = None
    training_time: TrainingTime | None = None
    cost: Cost | None = None
    # cluster.instance_types after the first: this job planned and advised on each of them, in order of preference
    # (each with no alternatives of its own), for a capacity fallback (launcher.orchestrate.fallback).
    alternatives: tuple[Plan, ...] = ()
    # How the request is built and sent (cluster.backend resolved against the installed SDK; launcher.core.sdk).
    backend: BackendChoice = field(default_factory=lambda: choose_backend("auto"))

    def __post_init__(self) -> None:
        for name in ("distribution", "channels", "secrets"):
            object.__setattr__(self, name, freeze(getattr(self, name)))
        object.__setattr__(self, "advisories", tuple(self.advisories))
        object.__setattr__(self, "alternatives", tuple(self.alternatives))

    def alternatives_dict(self) -> list[dict[str, Any]]:
        """Each alternative in brief (`alternatives` of `plan --output json`): whether this layout fits it and
        why not."""
        return [{"instance_type": a.instance_type, "fits": not a.errors,
                 "errors": [f"{e.rule} {e.message}" for e in a.errors],
                 "memory_per_gpu_gb": round(a.memory.per_gpu_gb, 2) if a.memory else None,
                 "image_uri": a.framework.image_uri, **a.prediction_dict()} for a in self.alternatives]

    def with_source(self, bundle: SourceBundle) -> Plan:
        """This plan running `bundle` instead of the source it renders: a new Plan whose `source`,
        `source_uri` and `request` name the bundle (this one is unchanged)."""
        return dataclasses.replace(self, given_source=bundle)

    @property
    def instance_count(self) -> int:
        return self.topology.instance_count

    @property
    def gpus_per_instance(self) -> int:
        return self.topology.gpus_per_instance

    @property
    def world_size(self) -> int:
        return self.topology.world_size

    @property
    def data_parallel_degree(self) -> int:
        return self.topology.data_parallel_degree

    @property
    def global_batch_sequences(self) -> int:
        return self.topology.global_batch_sequences

    @property
    def global_batch_tokens(self) -> int:
        return self.topology.global_batch_tokens

    @property
    def errors(self) -> tuple[Advisory, ...]:
        """The advisories that block submit."""
        return tuple(a for a in self.advisories if a.is_error)

    @cached_property
    def source(self) -> SourceBundle:
        """The source bundle the job runs: the one given (`with_source`), else the source dir rendered
        on first use, in memory, then kept (`validate` needs none of it, and every later read gets the same
        bytes)."""
        if self.given_source is not None:
            return self.given_source

        return source_bundle(self)

    @cached_property
    def _predicted_request(self) -> dict[str, Any]:
        from launcher.plan.request import predict_request
        from launcher.spec.secrets import redact_request

        return thaw(redact_request(predict_request(self, self.source.uri, self.role_arn_placeholder)))

    @property
    def request(self) -> dict[str, Any]:
        """The predicted CreateTrainingJob request as shown (a copy; secrets redacted, the role's placeholder)."""
        return copy.deepcopy(self._predicted_request)

    @property
    def source_uri(self) -> str:
        return self.source.uri

    @property
    def role_arn_placeholder(self) -> str:
        """What the predicted request names as RoleArn before IAM is asked (the ARN itself if the spec gives one)."""
        if not self.role:
            return "<no role: set role or SMP_LAUNCH_ROLE>"
        return self.role if self.role.startswith("arn:") else f"<ARN of role {self.role}>"

    def request_for(self, role_arn: str) -> dict[str, Any]:
        """The predicted request with the role's resolved ARN in place of the placeholder."""
        return {**self.request, "RoleArn": role_arn}

    def body_dict(self) -> dict[str, Any]:
        """`to_dict` without the source bundle and the request (what plan.json in the tarball holds)."""
        from launcher.spec.secrets import redact_env

        estimator = self.estimator.to_dict()
        estimator["environment"] = redact_env(estimator.get("environment", {}))
        return thaw({
            "spec_file": self.spec_file, "spec_hash": self.spec_hash, "job_name": self.job_name,
            "base_job_name": self.base_job_name, "region": self.region, "role": self.role,
            "instance_type": self.instance_type, "instance_count": self.instance_count,
            "gpus_per_instance": self.gpus_per_instance, "world_size": self.world_size,
            # figures of a layout that does not divide the world mean nothing: null, as `plan` shows "-"
            "data_parallel_degree": self.data_parallel_degree if self.memory else None,
            "global_batch_sequences": self.global_batch_sequences if self.memory else None,
            "global_batch_tokens": self.global_batch_tokens if self.memory else None, "model": self.model.to_dict(),
            "framework": self.framework.to_dict(), "distribution": self.distribution,
            "estimator": estimator, "secrets": self.secrets, "channels": self.channels,
            "decisions": self.decisions.to_dict(), "advisories": [a.to_dict() for a in self.advisories],
            "memory": self.memory.to_dict() if self.memory else None, "storage": self.storage.to_dict(),
            "templates": self.templates.used(),
            # only with cluster.instance_types: a plan without alternatives keeps the keys it always had
            **({"instance_types": [self.instance_type, *(a.instance_type for a in self.alternatives)],
                "alternatives": self.alternatives_dict()} if self.alternatives else {}),
        })

    def to_dict(self) -> dict[str, Any]:
        """The JSON `plan --output json` prints (a contract for pipelines): a deep copy, secrets redacted.

        Secret-looking environment values are redacted (launcher.spec.secrets); the backend reads
        `self.estimator`, which keeps them."""
        return {**self.body_dict(), **self.prediction_dict(), "backend": self.backend.to_dict(),
                "source_uri": self.source_uri, "request": self.request}

    def prediction_dict(self) -> dict[str, Any]:
        """`performance` (speed, its band and what bounds it, time to train) and `cost`, as `plan --output json`
        gives them. Not in plan.json: a price's date and this account's calibration change from day to day,
        and a job's record stays what it ran."""
        if self.performance is None or self.training_time is None:
            return {"performance": None, "cost": None}
        perf = {**self.performance.to_dict(), "time_to_train_seconds": round(self.training_time.total_seconds, 1),
                "time_to_train": self.training_time.to_dict()}
        return {"performance": perf, "cost": self.cost.to_dict() if self.cost else None}


def build_plan(loaded: LoadedSpec, now: datetime | None = None,
               env: Mapping[str, str] | None = None, region: str | None = None) -> Plan:
    """Compute the frozen Plan for a validated spec: every decision, the Estimator's arguments, and
    (on first read) the source dir rendered in memory and the request that names it.

    Pure: no network, no files written. `region`, when given, is the one the caller already
    resolved (resolve_region) and wins. The distribution is rendered from the templates here; with
    team templates the source dir is rendered here too, so a team template that fails is a
    TemplateError (exit 2) before anything is uploaded or asked of AWS."""
    env = os.environ if env is None else env
    spec = loaded.spec
    now = now or datetime.now(timezone.utc)
    name = job_name(spec.name, now)
    region = region or resolve_region(spec.cluster.region, env)
    role = spec.role or env.get("SMP_LAUNCH_ROLE") or None
    instance = INSTANCES[spec.cluster.instance_type]
    topology = Topology.of(spec)
    fw = FRAMEWORKS[spec.framework.pytorch_version]
    image = spec.framework.image_uri or (smp_image_uri(region, fw.pytorch, instance.name) if region else None)
    found, ctx = run_rules(spec, region, topology, env)
    advisories = tuple(dataclasses.replace(a, mark=loaded.mark(a.field)) for a in found)
    templates = load_templates(loaded.templates_dir)
    hashed = spec_hash(loaded, templates)
    dist = render_distribution(templates, template_context(spec, ctx.decisions), spec.smp)
    plan = Plan(
        spec_file=loaded.file, spec_hash=hashed, job_name=name, base_job_name=spec.name,
        region=region, role=role, instance_type=instance.name, topology=topology,
        model=ModelInfo(spec.model.preset, spec.model.seq_length, spec.model.architecture()),
        framework=FrameworkInfo(fw.pytorch, fw.python, fw.smp, image,
                                requirements(fw.pytorch, spec.model.architecture().type, rope_scaled(spec))),
        distribution=dist,
        estimator=estimator_args(loaded, name, role, hashed, git_commit(loaded.file), dist, max_run=ctx.max_run),
        decisions=ctx.decisions, advisories=advisories,
        memory=ctx.memory if ctx.topology_ok else None,
        storage=storage(spec.cluster.volume_size_gb, instance.name, instance.instance_storage_gb),
        channels=input_channels(loaded), secrets=dict(spec.secrets), spec=spec, templates=templates,
        performance=ctx.performance, training_time=ctx.training_time, cost=ctx.cost,
        backend=choose_backend(spec.cluster.backend),
    )
    if templates.team:
        plan.source  # noqa: B018 (renders now: a failing team template stops the plan, not a later upload)
    others = spec.cluster.instance_types[1:]
    if others:
        plan = dataclasses.replace(plan, alternatives=tuple(
            build_plan(_on_instance(loaded, other), now=now, env=env, region=region) for other in others))
    return plan


def _on_instance(loaded: LoadedSpec, instance_type: str) -> LoadedSpec:
    """The spec on `instance_type` alone (no alternatives): each fallback is planned and advised as its own job."""
    spec = loaded.spec
    cluster = spec.cluster.model_copy(update={"instance_type": instance_type, "instance_types": ()})
    return dataclasses.replace(loaded, spec=spec.model_copy(update={"cluster": cluster}))


def estimator_args(loaded: LoadedSpec, name: str, role: str | None, hashed: str, commit: str | None,
                   dist: Mapping[str, Any], max_run: int | None = None) -> EstimatorArgs:
    """The Estimator's arguments for the spec; `hashed` (its spec_hash) and `commit` become provenance tags.
    `max_run` is the limit the plan decided (the spec's, or one proposed from the prediction where the spec
    sets none: launcher.rules.engine.Context.max_run); None takes the spec's."""
    spec = loaded.spec
    instance = INSTANCES[spec.cluster.instance_type]
    fw = FRAMEWORKS[spec.framework.pytorch_version]
    output = spec.output.path.rstrip("/")
    tags = [{"Key": k, "Value": v} for k, v in spec.tags.items()] + [
        {"Key": MANAGED_TAG, "Value": "true"},
        {"Key": VERSION_TAG, "Value": VERSION},
        {"Key": SPEC_HASH_TAG, "Value": hashed},
    ]
    if commit:
        tags.append({"Key": GIT_COMMIT_TAG, "Value": commit})
    cluster = spec.cluster
    max_run = cluster.max_run if max_run is None else max_run
    kms = cluster.kms_key_id
    return EstimatorArgs(
        entry_point=ENTRY_POINT, source_dir=None, role=role, framework_version=fw.pytorch, py_version=fw.python,
        instance_type=instance.name, instance_count=cluster.instance_count, volume_size=cluster.volume_size_gb,
        max_run=max_run, use_spot_instances=cluster.spot,
        checkpoint_s3_uri=spec.output.checkpoint_path or f"{output}/checkpoints/{name}",
        checkpoint_local_path=CHECKPOINT_LOCAL_PATH, output_path=output,
        code_location=spec.output.code_path or f"{output}/code", base_job_name=spec.name,
        distribution=dist, hyperparameters=dict(spec.hyperparameters),
        environment=dict(spec.environment), metric_definitions=progress.metric_definitions(), tags=tags,
        image_uri=spec.framework.image_uri or None,
        max_wait=(cluster.max_wait or max_run) if cluster.spot else None,
        subnets=list(cluster.subnets) if cluster.subnets else None,
        security_group_ids=list(cluster.security_group_ids) if cluster.subnets else None,
        # CreateTrainingJob refuses VolumeKmsKeyId on instances with NVMe instance storage (p4d, p4de, p5):
        # their local volumes are encrypted by the instance's hardware; the key protects the S3 output.
        output_kms_key=kms or None,
        volume_kms_key=kms if kms and not instance.instance_storage_gb else None,
        keep_alive_period_in_seconds=cluster.keep_alive or None,
    )


def storage(volume_size_gb: int, instance_type: str, instance_storage_gb: int) -> Storage:
    """Where the job's local files live: SageMaker mounts NVMe instance storage instead of an EBS
    volume on instances that have it, so VolumeSizeInGB provisions nothing there (API_ResourceConfig)."""
    if instance_storage_gb:
        return Storage("instance storage", instance_storage_gb, False,
                       f"{instance_type} mounts its {instance_storage_gb:,} GB of NVMe instance storage; "
                       f"volume_size_gb ({volume_size_gb}) provisions no EBS volume")
    return Storage("EBS volume", volume_size_gb, True, "")


def advisory_problems(plan: Plan) -> list[Problem]:
    """The advisor's errors as spec problems, each pointing at the field (and file position) that caused it."""
    return [Problem(a.mark or Mark(plan.spec_file, 1, 1), a.field, f"{a.rule} {a.message}") for a in plan.errors]


def blocking_errors(plan: Plan) -> SpecError | None:
    """The advisor's errors as one SpecError (exit 2), or None when nothing blocks submit."""
    problems = advisory_problems(plan)
    return SpecError(problems) if problems else None


def require_region(plan: Plan) -> str:
    if not plan.region:
        raise no_region()
    return plan.region
