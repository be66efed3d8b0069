"""Why a training job ended badly: one class a person (or `submit --retry`) can act on, from what SageMaker wrote.

The inputs are DescribeTrainingJob's FailureReason, its SecondaryStatusTransitions (status and message)
and the tail of algo-1's log. All of it is hostile text: it is bounded before it is searched and made
safe to print (launcher.core.sanitize) before it is kept. The rules (which texts make which class, and the
remedy for each kind of text) are data, in launcher.jobs.failure_rules; this module applies them.

SageMaker's generic reason for a script that failed (AlgorithmError: ExecuteUserScriptError, an exit code) names
no cause: the class then comes from the log, and where the log names none either the job is `unknown`, with what
to read, never a guess (exit 137, SIGKILL, is the one code taken as a cause: the kernel's out-of-memory killer).

Managed spot: an interrupted job goes back to Starting and, when MaxWaitTimeInSeconds runs out, ends
Stopped with SecondaryStatus MaxWaitTimeExceeded, after an `Interrupted` transition
(https://docs.aws.amazon.com/sagemaker/latest/dg/model-managed-spot-training.html).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.sanitize import clean, one_line
from launcher.jobs.failure_rules import CONTENT_RULES, REASON_RULES, REMEDIES, ROLE_REMEDY, FailureClass, Rule

__all__ = ["FailureClass", "REMEDIES", "ROLE_REMEDY", "Failure", "classify", "diagnose", "oom_remedy"]

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
    kind: str
    pattern: re.Pattern[str]
    unless: re.Pattern[str] | None
    remedy: str

    def hit(self, low: str) -> bool:
        """Whether a (lowercased) line is evidence for this rule."""
        return bool(self.pattern.search(low)) and not (self.unless and self.unless.search(low))


def _rx(*alternatives: str) -> re.Pattern[str]:
    """Case-insensitive by matching lowercased text with lowercase patterns (launcher.jobs.failure_rules writes them
    so; `\\W`-style escapes keep their case): Python's IGNORECASE alternations scan several times slower, and a log
    tail can be large."""
    return re.compile("|".join(alternatives))


def _compiled(rule: Rule) -> _Rule:
    return _Rule(rule.failure_class, rule.kind, _rx(*rule.patterns), _rx(*rule.unless) if rule.unless else None,
                 rule.remedy or REMEDIES[rule.failure_class])


_REASON_RULES = tuple(map(_compiled, REASON_RULES))
_CONTENT_RULES = tuple(map(_compiled, CONTENT_RULES))
_CAPACITY = _REASON_RULES[0]

_EXIT_CODE = re.compile(r"(?:ExitCode|Exit Code|exit code|exit status|exitcode|return code)\s*[:=]?\s*"
                        r"(-?\d{1,4})(?!\d)", re.IGNORECASE)
# A line that only sets or echoes a variable (`NCCL_TIMEOUT=7200`, `export X=1`, a launcher's `[..] 0 X=1`).
_ECHO = re.compile(r"^\s*(?:\[[^\]]{0,120}\]\s*)*(?:\d+\s+)?(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=")
# What SageMaker's own reason tells a person to do.
_ADVICE = re.compile(r"\b(?:please|try)\b[^.\n]{3,240}\.?", re.IGNORECASE)
# SageMaker's (and its toolkit's) words for "the script failed" that say nothing about why.
_WRAPPER = re.compile(r"algorithmerror|executeuserscripterror|framework error|exit ?code")
_ERROR_MESSAGE = re.compile(r'errormessage\s*"(.*)', re.DOTALL)
_TRACEBACK = "Traceback (most recent call last)"
# An exception's name at the end of a traceback (`KeyError: 'x'`, `torch.OutOfMemoryError: ...`, `AssertionError`).
_EXCEPTION = re.compile(r"(?:^|[\s:])([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure))(?=:(?:\s|$)|\s*$)",
                        re.MULTILINE)
# The exceptions a launcher raises when a worker it started failed: they name the worker's exit, not its error.
_LAUNCHER_WRAPPERS = ("CalledProcessError", "ChildFailedError", "ExecuteUserScriptError")
_SCRIPT_FRAME = "/opt/ml/code/"
# A Python exception as a line of its own (`KeyError: 'x'`), where the log kept no traceback around it; not one the
# GPU's libraries raise (a CUDA or cuDNN error may be the GPU's fault as much as the script's).
_EXCEPTION_LINE = re.compile(r"^\W*([A-Za-z_][\w.]*(?:Error|Exception))(?::\s|:$)(?!.*\b(?i:cuda|cudnn|cublas)\b)")
# mpirun's `[1,mpirank:0,algo-1]<stderr>:` and the like, before a line.
_RANK_TAG = re.compile(r"^\[[^\]]{0,80}\]<std(?:out|err)>:")
_MPI_RANK_EXIT = re.compile(r"process rank (\d+) [^\n]*?exited on\s+signal (\d+)(?: \(([^)\n]{1,40})\))?")
_MPI_ABORT = re.compile(r"MPI_ABORT was invoked on rank (\d+)[^\n]*\s+with errorcode (-?\d+)")
_SIGNALS = {4: "SIGILL: an illegal instruction, often a binary built for another CPU", 6: "SIGABRT: the process "
            "aborted", 7: "SIGBUS: a bus error", 9: "SIGKILL: killed", 11: "SIGSEGV: a segmentation fault in native "
            "code (a library or the image, not Python)", 15: "SIGTERM: asked to stop"}


def _scan(text: str | None, limit: int = SCAN_LIMIT) -> str:
    """The text to show and match: bounded, terminal escapes removed (match its `.lower()`)."""
    if not text:
        return ""
    return _ANSI.sub("", text[:limit])


def _line(label: str, text: str) -> str:
    """One evidence line: a reason's own line breaks shown as ⏎ (a FailureReason often has several)."""
    return one_line(f"{label}: {text.strip()}", limit=EVIDENCE_LIMIT)


def _tracebacks(lines: list[str]) -> list[list[str]]:
    """Each traceback in `lines` (oldest first): the non-blank lines after its header, up to the next one."""
    found: list[list[str]] = []
    for line in lines:
        text = _RANK_TAG.sub("", line)
        if _TRACEBACK in text:
            found.append([])
        elif found and text.strip():
            found[-1].append(text)
    return found


def _raised(body: Iterable[str]) -> str | None:
    """The name of the exception a traceback's body ends with, or None when it is cut off before one. A frame's
    source line (`raise X(...)`) is no exception: a name counts where a colon or the line's end follows it."""
    names = [m.group(1) for line in body for m in _EXCEPTION.finditer(line) if not line.lstrip().startswith("File ")]
    return names[-1] if names else None


def _own_error(body: list[str]) -> bool:
    """Whether a traceback is the script's own error: it ends with an exception that is not a launcher's wrapper
    around a worker's exit, or, cut off before its exception, it runs through the job's own code."""
    raised = _raised(body)
    if raised is not None:
        return raised.rsplit(".", 1)[-1] not in _LAUNCHER_WRAPPERS
    return any(_SCRIPT_FRAME in line for line in body)


def _reason_error(reason: str) -> str | None:
    """The script's own error that SageMaker's reason carries (its ErrorMessage, a traceback, a failed install of
    the job's requirements), or None when the reason is only the wrapper."""
    if "installmoduleerror" in reason.lower():
        return reason
    message = _ERROR_MESSAGE.search(reason.lower())
    if message and message.group(1).strip().strip('"').strip():
        return reason
    if _TRACEBACK in reason:
        body = reason.split(_TRACEBACK)[-1]
        # one-line reasons (as the SDK prints some) run the frames and the exception together: split them at
        # each `File "` and after each frame's source line
        parts = re.split(r"\n| (?=File \")|(?<=\)) (?=[A-Za-z_][\w.]*: )", body)
        if _own_error(parts):
            return reason
    return None


def exit_code_of(reason: str, lines: list[str]) -> int | None:
    """The training process's exit code: from FailureReason, else the last log line that states one."""
    found = _EXIT_CODE.search(reason) or next((m for m in map(_EXIT_CODE.search, reversed(lines)) if m), None)
    return int(found.group(1)) if found else None


def _signal_of(code: int | None) -> str | None:
    """What an exit code says about a signal: 128+N or -N is signal N."""
    if code is None:
        return None
    number = -code if code < 0 else code - 128 if code > 128 else None
    return _SIGNALS.get(number) if number is not None else None


def _remedy(base: str, evidence: tuple[str, ...], advice: str | None = None) -> str:
    """The class's remedy, what SageMaker's own reason says to do, and the line that decided the class."""
    out = base
    if advice:
        out += f' SageMaker says: "{clean(advice.strip(), limit=QUOTE_LIMIT)}"'
    if evidence:
        out += f" (decided by {clean(evidence[0], limit=QUOTE_LIMIT)})"
    return out


def _unknown(reason: str, lines: list[str], code: int | None) -> tuple[str, tuple[str, ...]]:
    """The remedy and evidence of a failure nothing names a cause for: what SageMaker and the launchers did say
    (an exit code, a signal, a rank that aborted), and where the cause must be read."""
    said: list[str] = []
    evidence: list[str] = []
    signal = _signal_of(code)
    if reason and _WRAPPER.search(reason.lower()):
        said.append("SageMaker's reason is only its generic wrapper for a failed script"
                    + (f" (exit code {code}{'; ' + signal if signal else ''})" if code is not None else ""))
        evidence.append(_line("FailureReason", reason))
    elif code is not None:
        said.append(f"the training process ended with exit code {code}" + (f" ({signal})" if signal else ""))
    toolkit = [line for line in lines if "executeuserscripterror" in line.lower()][-1:]
    if toolkit and not said:
        said.append("SageMaker's training toolkit says only that the script failed (ExecuteUserScriptError)"
                    + (f" with exit code {code}" if code is not None else ""))
        evidence.append(_line("algo-1", toolkit[0]))
    tail = "\n".join(lines)
    for m in list(_MPI_RANK_EXIT.finditer(tail))[-1:]:
        sig = int(m.group(2))
        said.append(f"MPI says rank {m.group(1)} ended on signal {sig}"
                    + (f" ({_SIGNALS[sig]})" if sig in _SIGNALS else f" ({m.group(3)})" if m.group(3) else ""))
        evidence.append(_line("algo-1", m.group(0)))
    for m in list(_MPI_ABORT.finditer(tail))[-1:]:
        said.append(f"rank {m.group(1)} called MPI_ABORT with error code {m.group(2)} (its own error is in its log)")
        evidence.append(_line("algo-1", m.group(0)))
    if not said:
        return REMEDIES[FailureClass.UNKNOWN], tuple(evidence)
    remedy = ("; ".join(said) + ": nothing in it or in algo-1's last lines names a cause. Read every host's log "
              "(`smp-launch logs JOB`) for the first error: the rank that failed may be on another host, or its "
              "error above algo-1's last lines.")
    return _remedy(remedy[0].upper() + remedy[1:], tuple(evidence)), tuple(evidence)


def classify(status: str, failure_reason: str | None = None,
             transitions: Iterable[tuple[str, str]] = (), log_tail: Iterable[str] = (),
             secondary_status: str | None = None, plan: Mapping[str, Any] | None = None) -> Failure | None:
    """The failure class of a job that ended Failed (or Stopped by SageMaker: managed spot, MaxRuntime), or
    None when it did not fail.

    `transitions` are (secondary status, status message) pairs; `log_tail` is the end of algo-1's log,
    oldest first; `plan` is the job's plan.json (optional: it lets an out-of-memory remedy name a layout, and a
    job stopped at MaxRuntime say how far it got of its steps)."""
    lines = [_scan(str(x), LINE_LIMIT) for x in list(log_tail)[-TAIL_LINES:]]
    steps = [(_scan(str(s), 64), _scan(str(m), LINE_LIMIT)) for s, m in list(transitions)[:200]]
    reason = _scan(failure_reason)
    reason_l, lines_l = reason.lower(), [line.lower() for line in lines]
    shown = clean((failure_reason or "")[:REASON_LIMIT], limit=REASON_LIMIT)
    interrupted = [m for s, m in steps if s == "Interrupted"]
    if status == "Stopped":
        return _stopped(secondary_status, steps, interrupted, shown, lines, plan)
    if status != "Failed":
        return None
    code = exit_code_of(reason, lines)
    for rule in _REASON_RULES:
        if rule.hit(reason_l):
            evidence: tuple[str, ...] = (_line("FailureReason", reason),)
            advice = _ADVICE.search(reason) if not reason_l.lstrip().startswith("algorithmerror") else None
            return Failure(rule.failure_class, shown, _remedy(rule.remedy, evidence, advice and advice.group(0)),
                           evidence, code)
    capacity_notes = [m for s, m in steps if _CAPACITY.hit(m.lower())]
    readable = [i for i, low in enumerate(lines_l) if not _ECHO.match(low)]
    reason_lines = [low for low in reason_l.splitlines() if low.strip()]
    for rule in _CONTENT_RULES:
        hits = [_line("FailureReason", reason)] if any(map(rule.hit, reason_lines)) else []
        hits += [_line("algo-1", lines[i]) for i in readable if rule.hit(lines_l[i])][-3:]
        if hits:
            remedy = rule.remedy
            if rule.failure_class == FailureClass.OUT_OF_MEMORY and plan is not None:
                remedy = oom_remedy(plan) or remedy
            return Failure(rule.failure_class, shown, _remedy(remedy, tuple(hits)), tuple(hits), code)
    own = [body for body in _tracebacks([lines[i] for i in readable]) if _own_error(body)]
    installs = [lines[i] for i in readable if "installmoduleerror" in lines_l[i]]
    installs += [lines[i] for i in readable if (m := _EXCEPTION_LINE.match(_RANK_TAG.sub("", lines[i])))
                 and m.group(1).rsplit(".", 1)[-1] not in _LAUNCHER_WRAPPERS]
    reason_error = _reason_error(reason)
    if own or installs or reason_error:
        exit_text = f"exit code {code}" if code is not None else "a non-zero exit"
        last = "; ".join(line.strip() for line in own[-1][-3:]) if own else ""
        remedy = f"the training script ended with {exit_text}"
        remedy += f" ({clean(last, limit=300)})" if last else ""
        remedy += ": read the traceback (`smp-launch logs JOB`), fix the script or spec, resubmit."
        evidence = (_line("FailureReason", reason),) if reason else ()
        evidence += tuple(_line("algo-1", line) for line in (own[-1][-3:] if own else installs[-2:]))
        return Failure(FailureClass.USER_ERROR, shown, remedy, evidence, code)
    if interrupted:
        evidence = tuple(_line("Interrupted", m) for m in interrupted)
        return Failure(FailureClass.SPOT_INTERRUPTION, shown, _remedy(REMEDIES[FailureClass.SPOT_INTERRUPTION],
                                                                      evidence), evidence, code)
    if capacity_notes:
        evidence = tuple(_line("Starting", m) for m in capacity_notes[-2:])
        return Failure(FailureClass.CAPACITY, shown, _remedy(REMEDIES[FailureClass.CAPACITY], evidence),
                       evidence, code)
    remedy, evidence = _unknown(reason, [lines[i] for i in readable], code)
    if not evidence and reason:
        evidence = (_line("FailureReason", reason),)
    return Failure(FailureClass.UNKNOWN, shown, remedy, evidence, code)


def _stopped(secondary_status: str | None, steps: list[tuple[str, str]], interrupted: list[str],
             shown: str, lines: list[str], plan: Mapping[str, Any] | None) -> Failure | None:
    """A Stopped job's class when SageMaker stopped it (managed spot's wait, MaxRuntime); None when a person
    did: that is not a failure, and must not be retried."""
    evidence: tuple[str, ...]
    if secondary_status == "MaxRuntimeExceeded":
        return _max_runtime(shown, lines, plan)
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


_CHECKPOINT_SAVED = re.compile(r"\bcheckpoint of step (\d+) saved\b")  # the entry script's line (templates/train.py.j2)


def _planned_steps(plan: Mapping[str, Any] | None) -> int | None:
    """The steps the job was to train: its spec's training.max_steps (diagnose adds the stored spec's `training` to
    the plan it passes), else a plan's time to train; None when neither says."""
    for path in (("training", "max_steps"), ("performance", "time_to_train", "steps")):
        value: Any = plan or {}
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _max_runtime(shown: str, lines: list[str], plan: Mapping[str, Any] | None) -> Failure:
    """A job SageMaker stopped at MaxRuntimeInSeconds: how far it got (its last progress line and checkpoint, from
    algo-1's log) and the rerun that carries on from that checkpoint."""
    from launcher.render import progress

    reached = next(((int(p["step"]), line) for line in reversed(lines) if (p := progress.parse(line))), None)
    saved = next((int(m.group(1)) for line in reversed(lines) if (m := _CHECKPOINT_SAVED.search(line))), None)
    total = _planned_steps(plan)
    evidence: tuple[str, ...] = (_line("SecondaryStatus", "MaxRuntimeExceeded"),)
    remedy = "SageMaker stopped the job when it reached its MaxRuntimeInSeconds (cluster.max_run)"
    if reached is not None:
        evidence += (_line("algo-1", reached[1]),)
        remedy += f", at step {reached[0]}" + (f" of {total}" if total else "")
    if saved is not None:
        remedy += f"; its last checkpoint is of step {saved}"
        left = f" ({total - saved} steps left)" if total and total > saved else ""
        remedy += f": `smp-launch rerun JOB --resume` carries on from it{left}"
    else:
        remedy += ": `smp-launch rerun JOB --resume` carries on from its last checkpoint, if it saved one"
    remedy += ", or raise cluster.max_run (at most 28 days) and submit again."
    return Failure(FailureClass.MAX_RUNTIME, shown or "the job reached its MaxRuntimeInSeconds (MaxRuntimeExceeded)",
                   _remedy(remedy, evidence), evidence)


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
    """Classify a DescribeTrainingJob answer with what else the job left: algo-1's last log lines (of a job that
    failed, or that SageMaker stopped at its MaxRuntime: how far it got) and, for an out-of-memory failure or a
    MaxRuntime stop, its plan.json. Reads only; whatever cannot be read is left out (never an error)."""
    status = str(desc.get("TrainingJobStatus", ""))
    if status not in ("Failed", "Stopped"):
        return None
    transitions = [(str(t.get("Status", "")), str(t.get("StatusMessage", "")))
                   for t in (desc.get("SecondaryStatusTransitions") or [])]
    name = str(desc.get("TrainingJobName", ""))
    ran_out = status == "Stopped" and desc.get("SecondaryStatus") == "MaxRuntimeExceeded"
    tail = log_tail(clients, name, tail_lines) if (status == "Failed" or ran_out) and name else []
    args: dict[str, Any] = dict(failure_reason=desc.get("FailureReason"), transitions=transitions, log_tail=tail,
                                secondary_status=desc.get("SecondaryStatus"))
    found = classify(status, **args)
    if found is not None and found.failure_class in (FailureClass.OUT_OF_MEMORY, FailureClass.MAX_RUNTIME):
        plan = job_plan(clients, desc, with_training=found.failure_class == FailureClass.MAX_RUNTIME)
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


def job_plan(clients: Any, desc: Mapping[str, Any], *, with_training: bool = False) -> dict[str, Any] | None:
    """The job's plan.json (launcher.jobs.stored), with `with_training` its spec.json's `training` section added
    (the steps it was to train); None when the job has none (not launched by this tool) or it cannot be read: the
    remedy then falls back to the generic one."""
    from launcher.jobs.stored import read_source, submit_directory

    uri = submit_directory(desc)
    if uri is None:
        return None
    try:
        stored = read_source(clients.s3, uri)
    except Exception:  # noqa: BLE001 - optional: whatever cannot be read is left out
        return None
    if with_training and isinstance(stored.spec, dict) and isinstance(stored.spec.get("training"), dict):
        return {**stored.plan, "training": stored.spec["training"]}
    return stored.plan
