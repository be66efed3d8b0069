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
from launcher.core.sanitize import clean, one_line


class FailureClass(StrEnum):
    """What kind of failure ended a job; the value is what JSON and `--retry` name."""

    CAPACITY = "capacity"
    QUOTA = "quota"
    INTERNAL_ERROR = "internal_error"  # SageMaker's own InternalServerError
    HARDWARE = "hardware"  # an instance or GPU failed (ECC error, a GPU off the bus)
    PERMISSIONS = "permissions"
    IMAGE = "image"
    DATA = "data"  # input channels could not be read or the output written (bad S3 URIs, no route to S3)
    DISK_FULL = "disk_full"
    OUT_OF_MEMORY = "out_of_memory"  # a GPU's memory
    HOST_OUT_OF_MEMORY = "host_out_of_memory"  # the instance's own memory (RAM)
    NCCL_TIMEOUT = "nccl_timeout"
    USER_ERROR = "user_error"
    SPOT_INTERRUPTION = "spot_interruption"
    MAX_RUNTIME = "max_runtime"  # stopped by SageMaker at MaxRuntimeInSeconds
    UNKNOWN = "unknown"  # SageMaker gave no reason a rule here knows


REASON_LIMIT = 1000      # characters of FailureReason kept for display
EVIDENCE_LIMIT = 300     # characters of one evidence line
SCAN_LIMIT = 8192        # characters of a FailureReason searched (SageMaker's limit is 1,024: botocore's model)
TAIL_LINES = 200         # lines of the log tail searched
LINE_LIMIT = 4096        # characters of one log line or status message searched
QUOTE_LIMIT = 200        # characters of the deciding line quoted in a remedy

# Terminal escapes (CSI and OSC sequences) are removed before matching so they cannot split a keyword.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")


@dataclass(frozen=True)
class Failure:
    """A job's failure class, the reason as SageMaker gave it (safe to print, bounded), what to do about it,
    the lines that led to the class, and the training process's exit code where SageMaker or the log gave one."""

    failure_class: FailureClass
    reason: str
    remedy: str
    evidence: tuple[str, ...] = ()
    exit_code: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "failure_class", FailureClass(self.failure_class))
        object.__setattr__(self, "evidence", tuple(self.evidence))

    def to_dict(self) -> dict[str, Any]:
        return {"failure_class": self.failure_class.value, "failure_reason": self.reason, "remedy": self.remedy,
                "evidence": list(self.evidence), "exit_code": self.exit_code}


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
    FailureClass.INTERNAL_ERROR: (
        "SageMaker failed on its own side (InternalServerError), not because of the job: resubmit it (`submit` "
        "retries this class by default with --retry); if it keeps failing, open an AWS support case naming the job."),
    FailureClass.HARDWARE: (
        "an instance or one of its GPUs failed (the error is the hardware's, not the script's): resubmit (`submit` "
        "retries this class by default with --retry); the new job gets other instances and resumes from its "
        "checkpoints."),
    FailureClass.PERMISSIONS: (
        "the job's execution role was refused: grant it access to the S3 paths, ECR image and KMS keys the "
        "job names (`smp-launch check-role SPEC` lists what is missing)."),
    FailureClass.IMAGE: (
        "the training image could not be pulled or started: check framework.image_uri (it must exist in the "
        "job's region, be built for x86_64, and the role needs ecr:BatchGetImage on it)."),
    FailureClass.DATA: (
        "SageMaker could not read an input channel or write the output: check that each data channel's S3 URI "
        "exists and holds objects (`aws s3 ls URI`), and, in a VPC (cluster.subnets), that the subnets route to "
        "S3 (an S3 gateway endpoint or a NAT) and the security groups allow it."),
    FailureClass.DISK_FULL: (
        "the instance's storage volume filled up: raise cluster.volume_size_gb, keep fewer or smaller "
        "checkpoints, or stream the data (a FastFile channel) instead of copying it."),
    FailureClass.OUT_OF_MEMORY: (
        "a GPU ran out of memory: turn on smp.activation_checkpointing, raise smp.tensor_parallel_degree "
        "or smp.hybrid_shard_degree, turn on smp.activation_offloading, or lower training.batch_size; "
        "`smp-launch plan SPEC` shows the memory model for each change."),
    FailureClass.HOST_OUT_OF_MEMORY: (
        "the instance ran out of its own memory (RAM, not a GPU's) and the kernel killed the process: set "
        "smp.delayed_param_init: true (without it each of the instance's ranks builds the whole model in fp32 in "
        "host memory before it is sharded, whatever the GPU-side parallelism), turn off smp.activation_offloading "
        "(it keeps activations in host memory), use fewer data loader workers, or choose an instance type with "
        "more memory."),
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
    FailureClass.MAX_RUNTIME: (
        "SageMaker stopped the job when it reached its MaxRuntimeInSeconds (cluster.max_run): raise "
        "cluster.max_run (at most 28 days), or `smp-launch rerun JOB` to carry on from its last checkpoint."),
    FailureClass.UNKNOWN: "SageMaker gave no reason this tool recognises: read the job's logs (`smp-launch logs JOB`).",
}

ROLE_REMEDY = (
    "SageMaker could not assume the job's execution role: the role must exist in this account and its trust "
    "policy must let sagemaker.amazonaws.com call sts:AssumeRole (`smp-launch check-role SPEC` checks both).")


def _rule(failure_class: FailureClass, *alternatives: str, remedy: str | None = None) -> _Rule:
    return _Rule(failure_class, _rx(*alternatives), remedy or REMEDIES[failure_class])


# Host memory exhausted: the kernel's OOM killer (SIGKILL: exit 137, or -9 as Python reports a signal) and
# allocators that could not get RAM.
_HOST_OOM = (r"instance type with more memory", r"out of memory\. please use a larger instance",
             r"cannot allocate memory", r"can't allocate memory", r"killed by signal: killed", r"\boomkilled\b",
             r"out of memory: kill(?:ed)? process", r"signal 9 \(sigkill\)", r"std::bad_alloc",
             r"java\.lang\.outofmemoryerror", r"(?<![a-z])memoryerror\b", r"oom when allocating tensor[^\n]*device:cpu",
             r"(?:exit ?code|exit status|exitcode|return code)\s*[:=]?\s*(?:137|-9)(?![0-9])")

# Matched against FailureReason, in order: the first that matches wins. SageMaker's own service errors first:
# they are certain, and an AlgorithmError reason could quote anything. The memory and disk rules come before
# the data rule: SageMaker words those as "Artifact upload failed:..." or "Data download failed:..." too.
_REASON_RULES = (
    _rule(FailureClass.CAPACITY, r"CapacityError", r"InsufficientCapacity", r"Insufficient capacity",
          r"Unable to provision requested ML compute capacity"),
    _rule(FailureClass.QUOTA, r"ResourceLimitExceeded", r"account-level service limit", r"service quota"),
    _rule(FailureClass.INTERNAL_ERROR, r"^\s*InternalServerError\b", r"^\s*We encountered an internal error"),
    _rule(FailureClass.HOST_OUT_OF_MEMORY, r"instance type with more memory",
          r"out of memory\. please use a larger instance"),
    _rule(FailureClass.DISK_FULL, r"Insufficient disk space", r"No space left on device"),
    _rule(FailureClass.IMAGE, r"CannotStartContainerError", r"Cannot pull algorithm container",
          r"Requested image .* not found", r"image does not exist", r"failed to pull", r"ImagePull",
          r"OCI runtime create failed", r"exec format error", r"exec user process caused"),
    _rule(FailureClass.PERMISSIONS, r"unable to assume the role", r"could not assume role", remedy=ROLE_REMEDY),
    _rule(FailureClass.PERMISSIONS, r"AccessDenied", r"not authorized to perform", r"is not authorized",
          r"\(403\)", r"\b403 Forbidden", r"Access Denied"),
    _rule(FailureClass.DATA, r"Data download failed", r"Artifact upload failed", r"route to an S3 VPC endpoint",
          r"no file found in path /opt/ml/input", r"NoSuchKey", r"specified key does not exist",
          r"No S3 objects found", r"Failed to download data"),
)

# Matched against FailureReason and the log tail, in order: the cause before its symptoms. A GPU or host
# out-of-memory kill, a failed GPU, a full disk or a refused S3 call on one rank makes the others time out in
# NCCL, so nccl_timeout comes last. Lines that only echo a setting (`NCCL_TIMEOUT=7200`) are not read.
_CONTENT_RULES = (
    _rule(FailureClass.OUT_OF_MEMORY, r"CUDA out of memory", r"(?<!java\.lang\.)OutOfMemoryError",
          r"CUDA error: out of memory", r"oom when allocating tensor(?![^\n]*device:cpu)",
          r"resource_?exhausted: out of memory", r"cuda error: [^\n]*\bout of memory", r"CUBLAS_STATUS_ALLOC_FAILED",
          r"cudaErrorMemoryAllocation", r"HIP out of memory"),
    _rule(FailureClass.HOST_OUT_OF_MEMORY, *_HOST_OOM),
    _rule(FailureClass.HARDWARE, r"uncorrectable ECC error", r"\bECC error", r"fallen off the bus",
          r"CUDA_ERROR_ECC_UNCORRECTABLE", r"\bNVRM: Xid\b", r"\bGPU is lost\b"),
    _rule(FailureClass.DISK_FULL, r"No space left on device", r"\[Errno 28\]", r"Insufficient disk space",
          r"Disk quota exceeded"),
    _rule(FailureClass.PERMISSIONS, r"\((?:AccessDenied|403|Forbidden)\) when calling", r"\b403 Forbidden\b",
          r"AccessDenied: Access Denied", r"is not authorized to perform", r"unable to assume the role"),
    _rule(FailureClass.IMAGE, r"exec format error", r"exec user process caused", r"OCI runtime create failed"),
    _rule(FailureClass.NCCL_TIMEOUT, r"Watchdog caught collective operation timeout", r"Timeout at NCCL work",
          r"ProcessGroupNCCL[^\n]*\b(?:timed out|timeout)\b", r"\bNCCL\b[^=\n]*\btimed out\b"),
)

_USER = _rx(r"AlgorithmError", r"ExecuteUserScriptError", r"InstallModuleError",
            r"Traceback \(most recent call last\)")
_USER_LOG = _rx(r"ExecuteUserScriptError", r"InstallModuleError")
_EXIT_CODE = re.compile(r"(?:ExitCode|Exit Code|exit code|exit status|exitcode|return code)\s*[:=]?\s*"
                        r"(-?\d{1,4})(?!\d)", re.IGNORECASE)
# A line that only sets or echoes a variable (`NCCL_TIMEOUT=7200`, `export X=1`, a launcher's `[..] 0 X=1`).
_ECHO = re.compile(r"^\s*(?:\[[^\]]{0,120}\]\s*)*(?:\d+\s+)?(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=")
# What SageMaker's own reason tells a person to do.
_ADVICE = re.compile(r"\b(?:please|try)\b[^.\n]{3,240}\.?", re.IGNORECASE)


def _scan(text: str | None, limit: int = SCAN_LIMIT) -> str:
    """The text to show and match: bounded, terminal escapes removed (match its `.lower()`)."""
    if not text:
        return ""
    return _ANSI.sub("", text[:limit])


def _line(label: str, text: str) -> str:
    """One evidence line: a reason's own line breaks shown as ⏎ (a FailureReason often has several)."""
    return one_line(f"{label}: {text.strip()}", limit=EVIDENCE_LIMIT)


_RANK_TAG = re.compile(r"^\[[^\]]{0,80}\]<std(?:out|err)>:")  # mpirun's `[1,mpirank:0,algo-1]<stderr>:`


def _traceback_tail(lines: list[str], keep: int = 3) -> list[str]:
    """The last `keep` lines of the last traceback in `lines` (the exception itself last), or []."""
    starts = [i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line]
    if not starts:
        return []
    body = [_RANK_TAG.sub("", line) for line in lines[starts[-1] + 1:] if line.strip()]
    return body[-keep:]


def exit_code_of(reason: str, lines: list[str]) -> int | None:
    """The training process's exit code: from FailureReason, else the last log line that states one."""
    found = _EXIT_CODE.search(reason) or next((m for m in map(_EXIT_CODE.search, reversed(lines)) if m), None)
    return int(found.group(1)) if found else None


def _remedy(base: str, evidence: tuple[str, ...], advice: str | None = None) -> str:
    """The class's remedy, what SageMaker's own reason says to do, and the line that decided the class."""
    out = base
    if advice:
        out += f' SageMaker says: "{clean(advice.strip(), limit=QUOTE_LIMIT)}"'
    if evidence:
        out += f" (decided by {clean(evidence[0], limit=QUOTE_LIMIT)})"
    return out


def classify(status: str, failure_reason: str | None = None,
             transitions: Iterable[tuple[str, str]] = (), log_tail: Iterable[str] = (),
             secondary_status: str | None = None, plan: Mapping[str, Any] | None = None) -> Failure | None:
    """The failure class of a job that ended Failed (or Stopped by SageMaker: managed spot, MaxRuntime), or
    None when it did not fail.

    `transitions` are (secondary status, status message) pairs; `log_tail` is the end of algo-1's log,
    oldest first; `plan` is the job's plan.json (optional: it lets an out-of-memory remedy name a layout)."""
    lines = [_scan(str(x), LINE_LIMIT) for x in list(log_tail)[-TAIL_LINES:]]
    steps = [(_scan(str(s), 64), _scan(str(m), LINE_LIMIT)) for s, m in list(transitions)[:200]]
    reason = _scan(failure_reason)
    reason_l, lines_l = reason.lower(), [line.lower() for line in lines]
    shown = clean((failure_reason or "")[:REASON_LIMIT], limit=REASON_LIMIT)
    interrupted = [m for s, m in steps if s == "Interrupted"]
    if status == "Stopped":
        return _stopped(secondary_status, steps, interrupted, shown)
    if status != "Failed":
        return None
    code = exit_code_of(reason, lines)
    for rule in _REASON_RULES:
        if rule.pattern.search(reason_l):
            evidence: tuple[str, ...] = (_line("FailureReason", reason),)
            advice = _ADVICE.search(reason) if not reason_l.lstrip().startswith("algorithmerror") else None
            return Failure(rule.failure_class, shown, _remedy(rule.remedy, evidence, advice and advice.group(0)),
                           evidence, code)
    capacity_notes = [m for s, m in steps if _REASON_RULES[0].pattern.search(m.lower())]
    readable = [i for i, low in enumerate(lines_l) if not _ECHO.match(low)]
    for rule in _CONTENT_RULES:
        hits = [_line("FailureReason", reason)] if rule.pattern.search(reason_l) else []
        hits += [_line("algo-1", lines[i]) for i in readable if rule.pattern.search(lines_l[i])][-3:]
        if hits:
            remedy = rule.remedy
            if rule.failure_class == FailureClass.OUT_OF_MEMORY and plan is not None:
                remedy = oom_remedy(plan) or remedy
            return Failure(rule.failure_class, shown, _remedy(remedy, tuple(hits)), tuple(hits), code)
    tb = _traceback_tail(lines)
    user_lines = [lines[i] for i in readable if _USER_LOG.search(lines_l[i])]
    if _USER.search(reason_l) or tb or user_lines:
        exit_text = f"exit code {code}" if code is not None else "a non-zero exit"
        last = "; ".join(line.strip() for line in tb) if tb else ""
        remedy = f"the training script ended with {exit_text}"
        remedy += f" ({clean(last, limit=300)})" if last else ""
        remedy += ": read the traceback (`smp-launch logs JOB`), fix the script or spec, resubmit."
        evidence = (_line("FailureReason", reason),) if reason else ()
        evidence += tuple(_line("algo-1", line) for line in (tb or user_lines[-2:]))
        return Failure(FailureClass.USER_ERROR, shown, remedy, evidence, code)
    if interrupted:
        evidence = tuple(_line("Interrupted", m) for m in interrupted)
        return Failure(FailureClass.SPOT_INTERRUPTION, shown, _remedy(REMEDIES[FailureClass.SPOT_INTERRUPTION],
                                                                      evidence), evidence, code)
    if capacity_notes:
        evidence = tuple(_line("Starting", m) for m in capacity_notes[-2:])
        return Failure(FailureClass.CAPACITY, shown, _remedy(REMEDIES[FailureClass.CAPACITY], evidence),
                       evidence, code)
    evidence = (_line("FailureReason", reason),) if reason else ()
    return Failure(FailureClass.UNKNOWN, shown, REMEDIES[FailureClass.UNKNOWN], evidence, code)


def _stopped(secondary_status: str | None, steps: list[tuple[str, str]], interrupted: list[str],
             shown: str) -> Failure | None:
    """A Stopped job's class when SageMaker stopped it (managed spot's wait, MaxRuntime); None when a person
    did: that is not a failure, and must not be retried."""
    evidence: tuple[str, ...]
    if secondary_status == "MaxRuntimeExceeded":
        evidence = (_line("SecondaryStatus", secondary_status),)
        return Failure(FailureClass.MAX_RUNTIME, shown or "the job reached its MaxRuntimeInSeconds "
                       "(MaxRuntimeExceeded)", _remedy(REMEDIES[FailureClass.MAX_RUNTIME], evidence), evidence)
    if secondary_status != "MaxWaitTimeExceeded":
        return None
    if interrupted or any(s == "Training" for s, _ in steps):
        evidence = tuple(_line("Interrupted", m or "managed spot instances interrupted") for m in interrupted)
        evidence += (_line("SecondaryStatus", secondary_status),)
        return Failure(FailureClass.SPOT_INTERRUPTION,
                       shown or "managed spot training ran out of wait time after an interruption "
                       "(MaxWaitTimeExceeded)", _remedy(REMEDIES[FailureClass.SPOT_INTERRUPTION], evidence), evidence)
    evidence = (_line("SecondaryStatus", "MaxWaitTimeExceeded"),)
    return Failure(FailureClass.CAPACITY, shown or "managed spot capacity was never acquired (MaxWaitTimeExceeded)",
                   _remedy(REMEDIES[FailureClass.CAPACITY], evidence), evidence)


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
    # Whose offloading ran: the plan's decision, or (a plan.json from before it was recorded) SMP's flag.
    offloading = plan["decisions"].get("offloading") or (
        "smp" if params.get("sm_activation_offloading", False) else "none")
    base = dict(instance_type=plan["instance_type"], shard_degree=int(params.get("hybrid_shard_degree") or
                                                                        plan["decisions"]["hybrid_shard_degree"]),
                tensor_parallel=int(params.get("tensor_parallel_degree", 1)),
                context_parallel=int(params.get("context_parallel_degree", 1)),
                expert_parallel=int(params.get("expert_parallel_degree", 1)),
                batch_size=max(1, int(plan["global_batch_sequences"]) // dp),
                seq_length=int(plan["model"]["seq_length"]),
                activation_offloading=offloading != "none",
                loading_horizon=int(params.get("activation_loading_horizon", 2)) if offloading == "smp" else 1,
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
