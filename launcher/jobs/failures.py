"""Why a training job ended badly: one class a person (or `submit --retry`) can act on, from what SageMaker wrote.

The inputs are DescribeTrainingJob's FailureReason, its SecondaryStatusTransitions (status and message)
and the tail of algo-1's log. All of it is hostile text: it is bounded before it is searched and made
safe to print (launcher.core.sanitize) before it is kept. The texts matched are ones SageMaker really
writes; tests/fixtures/failure_reasons/ holds each with the public page it came from.

Managed spot: an interrupted job goes back to Starting and, when MaxWaitTimeInSeconds runs out, ends
Stopped with SecondaryStatus MaxWaitTimeExceeded, after an `Interrupted` transition
(https://docs.aws.amazon.com/sagemaker/latest/dg/model-managed-spot-training.html).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.enums import StrEnum
from launcher.core.sanitize import clean


class FailureClass(StrEnum):
    """What kind of failure ended a job; the value is what JSON and `--retry` name."""

    CAPACITY = "capacity"
    QUOTA = "quota"
    PERMISSIONS = "permissions"
    IMAGE = "image"
    OUT_OF_MEMORY = "out_of_memory"
    NCCL_TIMEOUT = "nccl_timeout"
    USER_ERROR = "user_error"
    SPOT_INTERRUPTION = "spot_interruption"
    UNKNOWN = "unknown"  # SageMaker gave no reason a rule here knows


REASON_LIMIT = 1000      # characters of FailureReason kept for display
EVIDENCE_LIMIT = 300     # characters of one evidence line
SCAN_LIMIT = 8192        # characters of a FailureReason searched (SageMaker's limit is 1,024: botocore's model)
TAIL_LINES = 200         # lines of the log tail searched
LINE_LIMIT = 4096        # characters of one log line or status message searched

# Terminal escapes (CSI and OSC sequences) are removed before matching so they cannot split a keyword.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")


@dataclass(frozen=True)
class Failure:
    """A job's failure class, the reason as SageMaker gave it (safe to print, bounded), what to do about it,
    and the lines that led to the class."""

    failure_class: FailureClass
    reason: str
    remedy: str
    evidence: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "failure_class", FailureClass(self.failure_class))
        object.__setattr__(self, "evidence", tuple(self.evidence))

    def to_dict(self) -> dict[str, Any]:
        return {"failure_class": self.failure_class.value, "failure_reason": self.reason, "remedy": self.remedy,
                "evidence": list(self.evidence)}


@dataclass(frozen=True)
class _Rule:
    failure_class: FailureClass
    pattern: re.Pattern[str]
    remedy: str


def _rx(*alternatives: str) -> re.Pattern[str]:
    """Case-insensitive by matching lowercased text (`_scan` lowers it): Python's IGNORECASE alternations
    scan several times slower, and a log tail can be large."""
    return re.compile("|".join(a.lower() for a in alternatives))


REMEDIES = {
    FailureClass.CAPACITY: (
        "SageMaker could not get the instances: resubmit later (`submit --retry capacity`), or choose another "
        "instance type or region."),
    FailureClass.QUOTA: (
        "the account's service quota for this instance type is too low: request an increase in Service Quotas "
        "(SageMaker, '<instance type> for training job usage'), or use fewer or other instances."),
    FailureClass.PERMISSIONS: (
        "the job's execution role was refused: grant it access to the S3 paths, ECR image and KMS keys the "
        "job names (`smp-launch check-role SPEC` lists what is missing)."),
    FailureClass.IMAGE: (
        "the training image could not be pulled or started: check framework.image_uri (it must exist in the "
        "job's region, and the role needs ecr:BatchGetImage on it)."),
    FailureClass.OUT_OF_MEMORY: (
        "a GPU ran out of memory: turn on smp.activation_checkpointing, raise smp.tensor_parallel_degree "
        "or smp.hybrid_shard_degree, turn on smp.activation_offloading, or lower training.batch_size; "
        "`smp-launch plan SPEC` shows the memory model for each change."),
    FailureClass.NCCL_TIMEOUT: (
        "a collective timed out (NCCL watchdog): one rank stalled or died first; read every host's log "
        "(`smp-launch logs JOB`) for the first error, and check the data loader and "
        "checkpoint saves for one slow rank."),
    FailureClass.USER_ERROR: (
        "the training script exited with an error: read the traceback (`smp-launch logs JOB`), fix it, "
        "resubmit."),
    FailureClass.SPOT_INTERRUPTION: (
        "managed spot capacity was taken back before the job finished: resubmit "
        "(`submit --retry spot`); it resumes from its checkpoints. Raise cluster.max_wait to wait "
        "longer for spot capacity, or use on-demand instances."),
    FailureClass.UNKNOWN: "SageMaker gave no reason this tool recognises: read the job's logs (`smp-launch logs JOB`).",
}


def _rule(failure_class: FailureClass, *alternatives: str) -> _Rule:
    return _Rule(failure_class, _rx(*alternatives), REMEDIES[failure_class])


# Matched against FailureReason, in order: the first that matches wins. AWS service errors first: they are
# certain, and an AlgorithmError reason could quote anything.
_REASON_RULES = (
    _rule(FailureClass.CAPACITY, r"CapacityError", r"InsufficientCapacity", r"Insufficient capacity",
          r"Unable to provision requested ML compute capacity"),
    _rule(FailureClass.QUOTA, r"ResourceLimitExceeded", r"account-level service limit", r"service quota"),
    _rule(FailureClass.PERMISSIONS, r"AccessDenied", r"not authorized to perform", r"is not authorized",
          r"\(403\)", r"\b403 Forbidden", r"Access Denied"),
    _rule(FailureClass.IMAGE, r"CannotStartContainerError", r"Cannot pull algorithm container",
          r"Requested image .* not found", r"image does not exist", r"failed to pull", r"ImagePull"),
)

# Matched against FailureReason and the log tail: OOM before NCCL (an OOM on one rank makes the others time out).
_CONTENT_RULES = (
    _rule(FailureClass.OUT_OF_MEMORY, r"CUDA out of memory", r"OutOfMemoryError", r"CUDA error: out of memory",
          r"\bOOMKilled\b", r"exit ?code:? ?137\b", r"ExitCode 137\b", r"signal 9 \(SIGKILL\)"),
    _rule(FailureClass.NCCL_TIMEOUT, r"Watchdog caught collective operation timeout", r"ProcessGroupNCCL.*[Tt]imeout",
          r"NCCL.*timed? ?out", r"Timeout at NCCL work"),
)

_USER = _rx(r"AlgorithmError", r"ExecuteUserScriptError", r"Traceback \(most recent call last\)")
_EXIT_CODE = re.compile(r"(?:ExitCode|Exit Code|exit code|exit status|exitcode)[:=]?\s*(-?\d{1,4})")


def _scan(text: str | None, limit: int = SCAN_LIMIT) -> str:
    """The text to show and match: bounded, terminal escapes removed (match its `.lower()`)."""
    if not text:
        return ""
    return _ANSI.sub("", text[:limit])


def _line(label: str, text: str) -> str:
    return clean(f"{label}: {text.strip()}", limit=EVIDENCE_LIMIT)


_RANK_TAG = re.compile(r"^\[[^\]]{0,80}\]<std(?:out|err)>:")  # mpirun's `[1,mpirank:0,algo-1]<stderr>:`


def _traceback_tail(lines: list[str], keep: int = 3) -> list[str]:
    """The last `keep` lines of the last traceback in `lines` (the exception itself last), or []."""
    starts = [i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line]
    if not starts:
        return []
    body = [_RANK_TAG.sub("", line) for line in lines[starts[-1] + 1:] if line.strip()]
    return body[-keep:]


def classify(status: str, failure_reason: str | None = None,
             transitions: Iterable[tuple[str, str]] = (), log_tail: Iterable[str] = (),
             secondary_status: str | None = None, plan: Mapping[str, Any] | None = None) -> Failure | None:
    """The failure class of a job that ended Failed (or Stopped by managed spot), or None when it did not fail.

    `transitions` are (secondary status, status message) pairs; `log_tail` is the end of algo-1's log,
    oldest first; `plan` is the job's plan.json (optional: it lets an out-of-memory remedy name a layout)."""
    lines = [_scan(str(x), LINE_LIMIT) for x in list(log_tail)[-TAIL_LINES:]]
    steps = [(_scan(str(s), 64), _scan(str(m), LINE_LIMIT)) for s, m in list(transitions)[:200]]
    reason = _scan(failure_reason)
    reason_l, lines_l = reason.lower(), [line.lower() for line in lines]
    shown = clean((failure_reason or "")[:REASON_LIMIT], limit=REASON_LIMIT)
    interrupted = [m for s, m in steps if s == "Interrupted"]
    if status == "Stopped":
        # Only SageMaker's own stop for spot: a job a person stopped is not a failure, and must not be retried.
        if secondary_status == "MaxWaitTimeExceeded":
            if interrupted or any(s == "Training" for s, _ in steps):
                evidence = tuple(_line("Interrupted", m or "managed spot instances interrupted") for m in interrupted)
                return Failure(FailureClass.SPOT_INTERRUPTION,
                               shown or "managed spot training ran out of wait time after an interruption "
                               "(MaxWaitTimeExceeded)", REMEDIES[FailureClass.SPOT_INTERRUPTION],
                               evidence + (_line("SecondaryStatus", secondary_status or "Stopped"),))
            return Failure(FailureClass.CAPACITY,
                           shown or "managed spot capacity was never acquired (MaxWaitTimeExceeded)",
                           REMEDIES[FailureClass.CAPACITY], (_line("SecondaryStatus", "MaxWaitTimeExceeded"),))
        return None
    if status != "Failed":
        return None
    for rule in _REASON_RULES:
        if rule.pattern.search(reason_l):
            return Failure(rule.failure_class, shown, rule.remedy, (_line("FailureReason", reason),))
    capacity_notes = [m for s, m in steps if _REASON_RULES[0].pattern.search(m.lower())]
    for rule in _CONTENT_RULES:
        hits = [_line("FailureReason", reason)] if rule.pattern.search(reason_l) else []
        hits += [_line("algo-1", lines[i]) for i, low in enumerate(lines_l) if rule.pattern.search(low)][-3:]
        if hits:
            remedy = rule.remedy
            if rule.failure_class == FailureClass.OUT_OF_MEMORY and plan is not None:
                remedy = oom_remedy(plan) or remedy
            return Failure(rule.failure_class, shown, remedy, tuple(hits))
    tb = _traceback_tail(lines)
    if _USER.search(reason_l) or tb:
        code = _EXIT_CODE.search(reason) or next((m for m in map(_EXIT_CODE.search, reversed(lines)) if m), None)
        exit_text = f"exit code {code.group(1)}" if code else "a non-zero exit"
        last = "; ".join(line.strip() for line in tb) if tb else ""
        remedy = f"the training script ended with {exit_text}"
        remedy += f" ({clean(last, limit=300)})" if last else ""
        remedy += ": read the traceback (`smp-launch logs JOB`), fix the script or spec, resubmit."
        evidence = (_line("FailureReason", reason),) if reason else ()
        return Failure(FailureClass.USER_ERROR, shown, remedy, evidence + tuple(_line("algo-1", line) for line in tb))
    if interrupted:
        return Failure(FailureClass.SPOT_INTERRUPTION, shown, REMEDIES[FailureClass.SPOT_INTERRUPTION],
                       tuple(_line("Interrupted", m) for m in interrupted))
    if capacity_notes:
        return Failure(FailureClass.CAPACITY, shown, REMEDIES[FailureClass.CAPACITY],
                       tuple(_line("Starting", m) for m in capacity_notes[-2:]))
    evidence = (_line("FailureReason", reason),) if reason else ()
    return Failure(FailureClass.UNKNOWN, shown, REMEDIES[FailureClass.UNKNOWN], evidence)


def oom_remedy(plan: Mapping[str, Any]) -> str | None:
    """A remedy naming the spec change with the most memory headroom, by the memory model (launcher.rules.memory), from
    the job's plan.json; None when the plan lacks what the model needs (the generic remedy is used then).

    The job ran out of memory, so the model under-counted this job: a change is proposed only when the model
    gives it clearly more room than the layout that failed (at most 85% of the GPU, and 10% less than now)."""
    try:
        return _propose(plan)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        return None


def _layout_of(plan: Mapping[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    from dataclasses import fields

    from launcher.catalog.architecture import Architecture
    from launcher.rules.memory import ParallelLayout, estimate

    names = {f.name for f in fields(Architecture)}
    arch = Architecture(**{k: v for k, v in plan["model"].items() if k in names})
    params = plan["distribution"]["smdistributed"]["modelparallel"]["parameters"]
    dp = int(plan["data_parallel_degree"])
    base = dict(instance_type=plan["instance_type"], shard_degree=int(params.get("hybrid_shard_degree") or
                                                                        plan["decisions"]["hybrid_shard_degree"]),
                tensor_parallel=int(params.get("tensor_parallel_degree", 1)),
                context_parallel=int(params.get("context_parallel_degree", 1)),
                expert_parallel=int(params.get("expert_parallel_degree", 1)),
                batch_size=max(1, int(plan["global_batch_sequences"]) // dp),
                seq_length=int(plan["model"]["seq_length"]),
                activation_offloading=bool(params.get("sm_activation_offloading", False)),
                loading_horizon=int(params.get("activation_loading_horizon", 2)),
                smp_implementation=bool(plan["decisions"].get("transform", True)))
    recorded = ((plan.get("memory") or {}).get("breakdown") or {}).get("activations")
    # plan.json does not say whether activations were checkpointed; the recorded activation figure does.
    ckpt = True
    if recorded is not None:
        ckpt = min((True, False), key=lambda c: abs(
            estimate(arch, ParallelLayout(activation_checkpointing=c, **base)).breakdown["activations"] - recorded))
    base["activation_checkpointing"] = ckpt
    return arch, ParallelLayout, base


def _propose(plan: Mapping[str, Any]) -> str | None:
    from launcher.rules.memory import estimate

    arch, layout, base = _layout_of(plan)
    world = int(plan["world_size"])
    gpus = int(plan["gpus_per_instance"])
    now = estimate(arch, layout(**base))
    tp, shard, ep, cp = base["tensor_parallel"], base["shard_degree"], base["expert_parallel"], base["context_parallel"]
    options: list[tuple[str, dict[str, Any]]] = []
    if not base["activation_checkpointing"]:
        options.append(("smp.activation_checkpointing: true", {"activation_checkpointing": True}))
    if base["activation_checkpointing"] and not base["activation_offloading"]:
        options.append(("smp.activation_offloading: true", {"activation_offloading": True}))
    new_tp = tp * 2
    while new_tp <= gpus and world % (new_tp * cp) == 0:
        new_shard = min(shard, world // (new_tp * ep))
        if world % (new_shard * new_tp * ep) == 0:
            options.append((f"smp.tensor_parallel_degree: {new_tp}"
                            + (f" (and smp.hybrid_shard_degree: {new_shard})" if new_shard != shard else ""),
                            {"tensor_parallel": new_tp, "shard_degree": new_shard}))
            break
        new_tp *= 2
    top = world // (tp * ep)
    if top > shard and world % (top * tp * ep) == 0:
        options.append((f"smp.hybrid_shard_degree: {top}", {"shard_degree": top}))
    if base["batch_size"] > 1:
        options.append((f"training.batch_size: {base['batch_size'] // 2}",
                        {"batch_size": base["batch_size"] // 2}))
    rated = []
    for text, change in options:
        est = estimate(arch, layout(**{**base, **change}))
        if est.per_gpu_gb <= 0.85 * est.capacity_gb and est.per_gpu_gb <= 0.9 * now.per_gpu_gb:
            rated.append((est.per_gpu_gb, text))
    if not rated:
        return None
    rated.sort()
    best_gb, best = rated[0]
    cap = now.capacity_gb
    others = ", ".join(text for _, text in rated[1:3])
    out = (f"a GPU ran out of memory (the memory model put this layout at {now.per_gpu_gb:.1f} of {cap:.0f} GB per "
           f"GPU): set {best} in the spec (modelled {best_gb:.1f} GB)")
    if others:
        out += f"; also possible: {others}"
    return out + "; check with `smp-launch plan SPEC`."


# -- reading what a failed job left ---------------------------------------------------------------------------

LOG_LINE_LIMIT = 4096


def diagnose(clients: Any, desc: Mapping[str, Any], *, tail_lines: int = 100) -> Failure | None:
    """Classify a DescribeTrainingJob answer with what else the job left: algo-1's last log lines and, for an
    out-of-memory failure, its plan.json. Reads only; whatever cannot be read is left out (never an error)."""
    status = str(desc.get("TrainingJobStatus", ""))
    if status not in ("Failed", "Stopped"):
        return None
    transitions = [(str(t.get("Status", "")), str(t.get("StatusMessage", "")))
                   for t in (desc.get("SecondaryStatusTransitions") or [])]
    name = str(desc.get("TrainingJobName", ""))
    tail = log_tail(clients, name, tail_lines) if status == "Failed" and name else []
    args: dict[str, Any] = dict(failure_reason=desc.get("FailureReason"), transitions=transitions, log_tail=tail,
                                secondary_status=desc.get("SecondaryStatus"))
    found = classify(status, **args)
    if found is not None and found.failure_class == FailureClass.OUT_OF_MEMORY:
        plan = job_plan(clients, desc)
        if plan is not None:
            found = classify(status, plan=plan, **args)
    return found


def log_tail(clients: Any, job: str, lines: int = 100) -> list[str]:
    """The last `lines` lines of algo-1's newest log stream, oldest first; [] when there are none or they
    cannot be read."""
    from launcher.core.names import LOG_GROUP

    try:
        logs = clients.logs
        prefix = f"{job}/algo-1-"
        found = logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=prefix)
        streams = [s for s in found.get("logStreams", []) if str(s.get("logStreamName", "")).startswith(prefix)]
        if not streams:
            return []
        newest = max(streams, key=lambda s: (s.get("lastEventTimestamp") or 0, s.get("logStreamName", "")))
        events = logs.get_log_events(logGroupName=LOG_GROUP, logStreamName=newest["logStreamName"],
                                     limit=max(1, min(lines, 10_000)), startFromHead=False).get("events", [])
    except Exception:  # noqa: BLE001 - a diagnosis reads what it can; no answer is "cannot tell"
        return []
    return [str(e.get("message", ""))[:LOG_LINE_LIMIT] for e in events[-lines:]]


def job_plan(clients: Any, desc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The job's plan.json (launcher.jobs.stored); None when the job has none (not launched by this tool)
    or it cannot be read: the remedy then falls back to the generic one."""
    from launcher.jobs.stored import read_source, submit_directory

    uri = submit_directory(desc)
    if uri is None:
        return None
    try:
        return read_source(clients.s3, uri).plan
    except Exception:  # noqa: BLE001 - optional: whatever cannot be read is left out
        return None
