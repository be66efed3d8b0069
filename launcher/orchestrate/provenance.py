"""Provenance: what a launched job ran, read back from its own source tarball; `rerun` and `diff` on it.

Every job smp-launch starts carries its source tarball, which holds `plan.json` and `spec.json`
(launcher.jobs.stored reads them back, bounded: they come from AWS). Reading them needs no local file:
a job is its own record.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from launcher.core.aws import Clients, explain
from launcher.core.enums import StrEnum
from launcher.core.errors import LauncherError, UsageError
from launcher.core.frozen import freeze, thaw
from launcher.core.sanitize import DETAIL_LIMIT, NAME_LIMIT, PLACE_LIMIT, clean

if TYPE_CHECKING:
    from launcher.plan.build import Plan
    from launcher.submission.create import Submission

# Keys that differ between any two jobs (or are derived from what differs) and say nothing on their own.
IGNORED = frozenset({"job_name", "spec_hash", "estimator.tags[smp-launch:spec-hash]"})
# Spec sections plan.json does not carry (the rendered script reads them): a plan diff shows them from spec.json.
SPEC_IN_PLAN_DIFF = ("training", "hyperparameters")
_MISSING = object()


class NotLaunchedHere(UsageError):
    """A job whose source holds no plan.json: smp-launch did not start it (exit 2)."""


@dataclass(frozen=True)
class StoredJob:
    """A launched job's record: its description, its source tarball (bytes and files) and the stored plan."""

    name: str
    description: dict[str, Any]
    source_uri: str
    tarball: bytes
    files: Mapping[str, bytes]
    plan: dict[str, Any]
    spec: dict[str, Any] | None  # None for a job launched before the spec was stored


class ChangeKind(StrEnum):
    CHANGED = "changed"
    ADDED = "added"  # only in b
    REMOVED = "removed"  # only in a


@dataclass(frozen=True)
class Change:
    """One key whose value differs: `a` and `b` are the two sides' values (None where a side lacks it),
    read-only; `to_dict()` gives plain copies."""

    path: str
    a: Any
    b: Any
    kind: ChangeKind

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", freeze(self.a))
        object.__setattr__(self, "b", freeze(self.b))
        object.__setattr__(self, "kind", ChangeKind(self.kind))

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "a": thaw(self.a), "b": thaw(self.b), "kind": self.kind.value}

    def line(self) -> str:
        """`path: a -> b`, or `+ path: b` / `- path: a` (keys and values sanitised: they came from S3)."""
        path = clean(self.path, PLACE_LIMIT)
        if self.kind is ChangeKind.ADDED:
            return f"+ {path}: {_shown(self.b)}"
        if self.kind is ChangeKind.REMOVED:
            return f"- {path}: {_shown(self.a)}"
        return f"  {path}: {_shown(self.a)} -> {_shown(self.b)}"


def _shown(value: Any) -> str:
    return clean(json.dumps(value, sort_keys=True, default=str), DETAIL_LIMIT)


def _not_ours(job: str, why: str) -> NotLaunchedHere:
    return NotLaunchedHere(f"{clean(job, NAME_LIMIT)} was not launched by smp-launch ({why}); rerun and diff read the "
                           "plan smp-launch stores in the job's source")


def stored_job(clients: Clients, job: str) -> StoredJob:
    """Read a job's stored plan (and spec) from its source tarball in S3 (launcher.jobs.stored)."""
    from launcher.jobs.status import JobNotFound, describe
    from launcher.jobs.stored import Unreadable, read_source, submit_directory

    try:
        description = describe(clients, job)
    except JobNotFound:  # a job handed to an AWS Batch queue: its latest training job holds the plan
        from launcher.jobs import queued

        found = queued.locate(clients, job)
        training = queued.QueueState.from_description(found).training_job if found else None
        if training is None:
            raise
        description = describe(clients, training)
    uri = submit_directory(description)
    if uri is None:
        raise _not_ours(job, "it has no source tarball")
    try:
        source = read_source(clients.s3, uri)
    except Unreadable as why:
        raise _not_ours(job, str(why)) from None
    except LauncherError:
        raise
    except Exception as exc:
        raise explain(exc, f"reading {clean(job, NAME_LIMIT)}'s source {clean(uri, PLACE_LIMIT)}") from None
    return StoredJob(name=job, description=description, source_uri=uri, tarball=source.tarball,
                     files=source.files, plan=source.plan, spec=source.spec)


# ---------------------------------------------------------------------------------------------- rerun

def _environment(stored: StoredJob) -> dict[str, str]:
    """The spec's environment with redacted values taken back from the job (SageMaker returns Environment);
    a redacted value SageMaker did not return cannot be guessed, so the rerun is refused."""
    from launcher.spec.secrets import REDACTED

    env = dict((stored.spec or {}).get("environment") or {})
    sent = stored.description.get("Environment") or {}
    missing = []
    for name, value in env.items():
        if value == REDACTED:
            if isinstance(sent.get(name), str) and sent[name] != REDACTED:
                env[name] = sent[name]
            else:
                missing.append(name)
    if missing:
        raise UsageError(f"{clean(stored.name, NAME_LIMIT)}'s environment {', '.join(sorted(missing))} was redacted "
                         "when stored and SageMaker did not return it: submit the spec again (better, move the value "
                         "to `secrets:` as a Secrets Manager ARN, which is stored and rerun as it is)")
    return env


def _tags(clients: Clients, stored: StoredJob) -> list[dict[str, str]]:
    arn = stored.description.get("TrainingJobArn")
    if not arn:
        return []
    try:
        return list(clients.sagemaker.list_tags(ResourceArn=arn).get("Tags") or [])
    except Exception:  # a provenance tag is not worth failing a rerun for
        return []


def _in_planned_order(tags: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's tags in the order the job's plan.json lists them: spec.json keeps its keys sorted, and a
    tag order that differs renders a different plan.json (and a false "renders differently" warning)."""
    listed = (plan.get("estimator") or {}).get("tags") if isinstance(plan.get("estimator"), dict) else None
    order = [t.get("Key") for t in listed or [] if isinstance(t, dict)]
    ranked = {key: tags[key] for key in order if isinstance(key, str) and key in tags}
    ranked.update({key: value for key, value in tags.items() if key not in ranked})
    return ranked


def rerun_plan(stored: StoredJob, clients: Clients, *, now: datetime | None = None,
               resume: bool = False) -> tuple[Plan, list[str]]:
    """The plan a rerun submits: the stored spec planned again for the job's region, under a new job name,
    tagged with the job it repeats, running the job's own source tarball. With `resume`, it keeps the job's
    checkpoint S3 URI: SageMaker copies what the job saved there into /opt/ml/checkpoints and the entry script
    carries on from the newest complete checkpoint (a job stopped at its MaxRuntime, say). Returns it and its
    warnings."""
    from pydantic import ValidationError

    from launcher.core.names import GIT_COMMIT_TAG, RERUN_TAG
    from launcher.plan.build import build_plan
    from launcher.plan.bundle import SourceBundle
    from launcher.spec.loader import LoadedSpec
    from launcher.spec.models import JobSpec

    if stored.spec is None:
        raise UsageError(f"{clean(stored.name, NAME_LIMIT)} was launched by an older smp-launch that stored its plan "
                         "but not its spec (spec.json): submit its spec again")
    data = {**stored.spec, "environment": _environment(stored)}
    if isinstance(data.get("tags"), dict):
        data["tags"] = _in_planned_order(data["tags"], stored.plan)
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{clean(stored.name, NAME_LIMIT)}'s stored spec does not validate with this smp-launch: "
                         f"{clean(exc.errors()[0].get('msg', exc), PLACE_LIMIT)}") from None
    loaded = LoadedSpec(spec=spec, file=f"{stored.name}:spec.json", marks={}, files=())
    region = clients.region or stored.plan.get("region")
    env = dict(clients.env)
    if not spec.role:  # the job had its role from SMP_LAUNCH_ROLE: the same one again, the spec unchanged
        env["SMP_LAUNCH_ROLE"] = str(stored.plan.get("role") or stored.description.get("RoleArn") or "")
    plan = build_plan(loaded, now=now, env=env, region=region)
    old_commit = [t for t in _tags(clients, stored) if t.get("Key") == GIT_COMMIT_TAG]
    tags = [t for t in plan.estimator.tags if t["Key"] != GIT_COMMIT_TAG] + old_commit[:1] + [
        {"Key": RERUN_TAG, "Value": stored.name}]
    estimator = dataclasses.replace(plan.estimator, tags=tags)
    warnings = []
    if resume:
        kept = _checkpoint_uri(stored)
        if kept is None:
            raise UsageError(f"{clean(stored.name, NAME_LIMIT)} names no checkpoint S3 URI (its CheckpointConfig): "
                             "there is nothing to resume from; rerun it without --resume")
        estimator = dataclasses.replace(estimator, checkpoint_s3_uri=kept)
    plan = dataclasses.replace(plan, spec_file=stored.plan.get("spec_file") or plan.spec_file, estimator=estimator)
    rendered = {name: text.encode() for name, text in plan.source.files.items()}
    if rendered != dict(stored.files):
        differ = sorted(n for n in set(rendered) | set(stored.files) if rendered.get(n) != stored.files.get(n))
        warnings.append(f"this smp-launch renders {stored.name}'s spec differently ({', '.join(differ)}); "
                        "the rerun runs the job's own source, as stored")
    if stored.plan.get("spec_hash") != plan.spec_hash:
        warnings.append(f"the stored spec's hash ({clean(stored.plan.get('spec_hash'), 40)}) is not the one "
                        f"planned now ({plan.spec_hash})")
    # The job's own tarball, where it is (equal files give equal bytes: the URI a submit would use too).
    bundle = SourceBundle.of({n: b.decode("utf-8", "replace") for n, b in stored.files.items()},
                             stored.tarball, stored.source_uri)
    return plan.with_source(bundle), warnings


def _checkpoint_uri(stored: StoredJob) -> str | None:
    """The S3 URI the job saved its checkpoints under: SageMaker's record of it, else the stored plan's."""
    described = (stored.description.get("CheckpointConfig") or {}).get("S3Uri")
    planned = (stored.plan.get("estimator") or {}).get("checkpoint_s3_uri") if isinstance(
        stored.plan.get("estimator"), dict) else None
    uri = described or planned
    return str(uri) if isinstance(uri, str) and uri.startswith("s3://") else None


def rerun(name: str, clients: Clients, *, dry_run: bool = False, skip_role_check: bool = False,
          now: datetime | None = None, resume: bool = False) -> Submission:
    """Submit a job's stored plan again under a new name, through the same checks as submit; with `resume`, from
    the job's own checkpoints (rerun_plan)."""
    from launcher.submission import batch
    from launcher.submission.create import submit

    stored = stored_job(clients, name)
    plan, warnings = rerun_plan(stored, clients, now=now, resume=resume)
    if batch.queue_of(plan):  # the stored spec names an AWS Batch queue: the rerun goes there too
        result: Submission = batch.submit(plan, clients, options=batch.QueueOptions(), dry_run=dry_run,
                                          skip_role_check=skip_role_check)
    else:
        result = submit(plan, clients, dry_run=dry_run, skip_role_check=skip_role_check)
    return dataclasses.replace(result, warnings=(*warnings, *result.warnings))


# ----------------------------------------------------------------------------------------------- diff

def _is_tag_list(value: list) -> bool:
    return bool(value) and all(isinstance(v, dict) and set(v) == {"Key", "Value"} for v in value)


def _identities(value: list) -> list[str] | None:
    """Names for a list of objects that each carry a `rule` (advisories): the rule, with its field where a
    rule repeats, so one advisory more or less is one change, not a shift of every later position. None
    when the items do not name themselves uniquely (they are keyed by position then)."""
    if not all(isinstance(v, dict) and isinstance(v.get("rule"), str) for v in value):
        return None
    rules = [v["rule"] for v in value]
    names = [f"{v['rule']}@{v.get('field')}" if rules.count(v["rule"]) > 1 else v["rule"] for v in value]
    return names if len(set(names)) == len(names) else None


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted paths to leaves: dicts by key, tag lists by tag key (`tags[team]`), advisories by rule
    (`advisories[SMP024].message`), other lists of objects by position (`channels[0].uri`); a list of plain
    values is one leaf."""
    out: dict[str, Any] = {}
    if isinstance(value, dict) and value:
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list) and _is_tag_list(value):
        for tag in value:
            out[f"{prefix}[{tag['Key']}]"] = tag["Value"]
    elif isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        names = _identities(value)
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{names[i] if names else i}]"))
    else:
        out[prefix] = value
    return out


def compare(a: Mapping[str, Any], b: Mapping[str, Any], *, everything: bool = False) -> list[Change]:
    """How b differs from a, key by key, in a's key order then b's new keys."""
    fa, fb = flatten(dict(a)), flatten(dict(b))
    changes = []
    for path in [*fa, *(p for p in fb if p not in fa)]:
        if not everything and path in IGNORED:
            continue
        va, vb = fa.get(path, _MISSING), fb.get(path, _MISSING)
        if va == vb:
            continue
        kind = ChangeKind.ADDED if va is _MISSING else ChangeKind.REMOVED if vb is _MISSING else ChangeKind.CHANGED
        changes.append(Change(path, None if va is _MISSING else va, None if vb is _MISSING else vb, kind))
    return changes


def is_spec_file(ref: str) -> bool:
    """A path, never a job name: SageMaker job names hold only letters, digits and hyphens (so a missing
    file is said to be missing, not looked up as a job)."""
    return ref.endswith((".yaml", ".yml")) or "/" in ref or os.path.isfile(ref)


def full_spec(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored spec (only what was set) with every default filled in, so both sides of a diff name every
    key; one that no longer validates is compared as stored."""
    from pydantic import ValidationError

    from launcher.spec.models import JobSpec

    try:
        data = JobSpec.model_validate(dict(stored)).model_dump(mode="json", exclude={"extends"})
    except ValidationError:
        return dict(stored)
    data["environment"] = dict(stored.get("environment") or {})  # as stored: redacted values stay redacted
    return data


def _plan_side(plan: Mapping[str, Any], spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """A plan as a diff compares it: with the spec sections it does not carry (SPEC_IN_PLAN_DIFF), so a
    change to training.max_steps or training.batch_size shows as itself."""
    out = dict(plan)
    for section in SPEC_IN_PLAN_DIFF:
        if spec is not None and section not in out and section in spec:
            out[section] = spec[section]
    return out


def side(ref: str, clients: Clients, *, spec: bool = False) -> dict[str, Any]:
    """One side of a diff: a job's stored plan (or spec), or a spec file's plan (or validated spec)."""
    if is_spec_file(ref):
        from launcher.plan.build import build_plan
        from launcher.plan.bundle import deterministic_plan, stored_spec
        from launcher.spec.loader import load_spec

        plan = build_plan(load_spec(ref, []), env=clients.env, region=clients.region)
        full = full_spec(stored_spec(plan))
        return full if spec else _plan_side(deterministic_plan(plan), full)
    stored = stored_job(clients, ref)
    if spec:
        if stored.spec is None:
            raise UsageError(f"{clean(ref, NAME_LIMIT)} was launched by an older smp-launch that did not store its "
                             "spec; diff its plan instead (without --spec)")
        return full_spec(stored.spec)
    return _plan_side(stored.plan, full_spec(stored.spec) if stored.spec is not None else None)


def diff(a: str, b: str, clients: Clients, *, everything: bool = False, spec: bool = False) -> list[Change]:
    """How two jobs' stored plans (or specs) differ; either side may be a spec file (its plan now)."""
    return compare(side(a, clients, spec=spec), side(b, clients, spec=spec), everything=everything)
