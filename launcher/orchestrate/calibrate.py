"""`smp-launch calibrate JOB...`: this account's own speed, measured from finished jobs' progress lines.

Each job is read back as `rerun` reads it (its stored spec, launcher.orchestrate.provenance) and predicted
with the published calibration, exactly as `plan` predicted it, on the instance type it ran on (a capacity
fallback may have moved it to another of `cluster.instance_types`). Its speed is what the entry script logged:
rank 0 prints `SMP_PROGRESS ... tokens_per_s=` (all GPUs together) every `log_every` steps
(launcher.render.progress). Steady state leaves out the first WARMUP_LINES progress lines (compilation,
the first allocations, the data loader filling) and the line after each checkpoint save, then takes the
median of the rest, so a slow straggler window does not move it. The ratio measured / predicted per job
is stored beside the state (launcher.predict.account); later plans on that instance type use the
geometric mean of the stored ratios and say so.
"""
from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from launcher.catalog.smp import INSTANCES
from launcher.core.aws import Clients
from launcher.core.errors import UsageError
from launcher.core.sanitize import NAME_LIMIT, PLACE_LIMIT, clean
from launcher.predict.account import Sample, factors, store

WARMUP_LINES = 2
MIN_STEADY_LINES = 3
FINISHED = ("Completed", "Stopped", "Failed")
# What the entry script prints after a save ("checkpoint of step N saved to PATH"), and older wordings.
_CHECKPOINT = re.compile(r"checkpoint(?: of)? step[_ ]?0*(\d+)|saved checkpoint", re.IGNORECASE)


@dataclass(frozen=True)
class Calibration:
    """One job's measurement: steady tokens per second per GPU, what the published calibration predicted,
    and how many progress lines were used and left out."""

    job: str
    instance_type: str
    gpus: int
    measured: float
    predicted: float
    steady_lines: int
    skipped_lines: int

    @property
    def ratio(self) -> float:
        return self.measured / self.predicted

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "instance_type": self.instance_type, "gpus": self.gpus,
                "measured_tokens_per_second_per_gpu": round(self.measured, 1),
                "predicted_tokens_per_second_per_gpu": round(self.predicted, 1), "ratio": round(self.ratio, 4),
                "steady_lines": self.steady_lines, "skipped_lines": self.skipped_lines}


@dataclass(frozen=True)
class CalibrationResult:
    jobs: tuple[Calibration, ...]
    factors: Mapping[str, float]  # instance type -> the factor later plans use
    path: str  # where the samples are kept

    def to_dict(self) -> dict[str, Any]:
        return {"jobs": [j.to_dict() for j in self.jobs], "factors": {k: round(v, 4) for k, v in self.factors.items()},
                "stored": self.path}


def steady_speed(messages: Iterable[str]) -> tuple[float, int, int]:
    """(median tokens per second, progress lines used, progress lines left out) of one host's messages in
    order: the first WARMUP_LINES progress lines and the one after each checkpoint save are left out."""
    from launcher.render import progress

    speeds: list[float] = []
    skipped = 0
    seen = 0
    after_checkpoint = False
    for message in messages:
        parsed = progress.parse(message)
        if parsed is None:
            if _CHECKPOINT.search(message):
                after_checkpoint = True
            continue
        seen += 1
        speed = parsed["tokens_per_s"]
        if seen <= WARMUP_LINES or after_checkpoint or not speed > 0:
            skipped += 1
            after_checkpoint = False
            continue
        speeds.append(speed)
    if len(speeds) < MIN_STEADY_LINES:
        return 0.0, len(speeds), skipped
    return statistics.median(speeds), len(speeds), skipped


def measure(clients: Clients, job: str) -> Calibration:
    """One finished job's steady speed and the published prediction for its stored spec."""
    from pydantic import ValidationError

    from launcher.jobs.logs import iter_lines
    from launcher.orchestrate.provenance import stored_job
    from launcher.predict import predict
    from launcher.rules import run_rules
    from launcher.spec.models import JobSpec

    stored = stored_job(clients, job)
    status = str(stored.description.get("TrainingJobStatus", ""))
    name = clean(job, NAME_LIMIT)
    if status not in FINISHED:
        raise UsageError(f"{name} is {clean(status, 40) or 'not finished'}: calibrate reads finished jobs (wait for "
                         "it, or stop it)")
    if stored.spec is None:
        raise UsageError(f"{name} was launched by an older smp-launch that did not store its spec: it cannot be "
                         "predicted again")
    try:
        spec = JobSpec.model_validate(dict(stored.spec))
    except ValidationError as exc:
        raise UsageError(f"{name}'s stored spec does not validate with this smp-launch: "
                         f"{clean(exc.errors()[0].get('msg', exc), PLACE_LIMIT)}") from None
    ran_on = str((stored.description.get("ResourceConfig") or {}).get("InstanceType") or "")
    if ran_on in INSTANCES and ran_on != spec.cluster.instance_type:  # a capacity fallback ran it on another type
        cluster = spec.cluster.model_copy(update={"instance_type": ran_on, "instance_types": ()})
        spec = spec.model_copy(update={"cluster": cluster})
    _, ctx = run_rules(spec, clients.region or stored.plan.get("region"))
    if not ctx.topology_ok:
        raise UsageError(f"{name}'s layout does not divide its GPUs: there is nothing to compare its speed with")
    predicted = predict(ctx.workload())
    lines = iter_lines(job, clients, until_end=False, hosts=[1])
    try:
        speed, used, skipped = steady_speed(line.message for line in lines)
    finally:
        lines.close()
    if used < MIN_STEADY_LINES:
        raise UsageError(f"{name} logged {used} steady progress lines (SMP_PROGRESS, after {WARMUP_LINES} warm-up "
                         f"lines and those after checkpoints); calibrate needs {MIN_STEADY_LINES}: lower "
                         "training.log_every or train longer")
    gpus = ctx.world
    return Calibration(job, ctx.instance.name, gpus, speed / gpus, predicted.tokens_per_second_per_gpu, used, skipped)


def calibrate(clients: Clients, jobs: Sequence[str], env: Mapping[str, str] | None = None,
              now: datetime | None = None) -> CalibrationResult:
    """Measure every job (all of them before anything is stored: one unreadable job stores nothing), store
    the samples beside the state, and return them with the factors later plans will use."""
    measured = [measure(clients, job) for job in jobs]
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = store([Sample(m.job, m.instance_type, m.measured, m.predicted, m.steady_lines, stamp) for m in measured],
                 env)
    return CalibrationResult(tuple(measured), {k: f.factor for k, f in factors(env).items()}, str(path))
