"""Rules on how long SageMaker lets a job run, against how long the prediction says it takes.

SageMaker stops a training job at StoppingCondition.MaxRuntimeInSeconds (cluster.max_run) and, with managed
spot, at MaxWaitTimeInSeconds (cluster.max_wait: run time plus time waiting for capacity); every hour before
the stop is paid (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StoppingCondition.html,
https://docs.aws.amazon.com/sagemaker/latest/dg/model-managed-spot-training.html). The prediction's band
(launcher.predict.speed) gives the shortest and longest time the run is expected to take: a limit below the
shortest is an error, one inside the band a warning. A spec without max_run gets one proposed from the band.
"""
from __future__ import annotations

from collections.abc import Iterator

from launcher.core.durations import compact, spoken
from launcher.predict.budget import MAX_RUN_LIMIT, MAX_RUN_MARGIN, checkpoint_seconds, proposed_max_run, step_reached
from launcher.rules.engine import Context, Finding, Severity, rule

STOPPING = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StoppingCondition.html"
SPOT = "https://docs.aws.amazon.com/sagemaker/latest/dg/model-managed-spot-training.html"


def _limits(ctx: Context) -> Iterator[tuple[str, int, str]]:
    """(field, seconds, what SageMaker calls the stop) for each limit the job runs under."""
    yield "cluster.max_run", ctx.max_run, "MaxRuntimeExceeded"
    if ctx.spec.cluster.spot and ctx.spec.cluster.max_wait is not None:
        yield "cluster.max_wait", ctx.spec.cluster.max_wait, "MaxWaitTimeExceeded"


def _ways_out(ctx: Context, field: str, steps_fit: int) -> str:
    band = ctx.time_band
    assert band is not None
    need = proposed_max_run(band[1].total_seconds)
    fewer = (f"train fewer steps (training.max_steps or training.tokens: about {steps_fit:,} fit in {field})"
             if steps_fit else "train fewer steps (training.max_steps or training.tokens)")
    if band[1].total_seconds * (1 + MAX_RUN_MARGIN) > MAX_RUN_LIMIT:
        return (f"no limit SageMaker allows (28 days) holds the band's slow end: {fewer}, and train the rest in a "
                "second job that resumes from this one's checkpoints (`smp-launch rerun`)")
    return f"raise {field} to {compact(need)} or more (SageMaker allows up to 28 days), or {fewer}"


def _over(ctx: Context, straddle: bool) -> Iterator[Finding]:
    band, time = ctx.time_band, ctx.training_time
    if band is None or time is None or not ctx.memory.fits:
        return  # a layout that does not fit fails before it trains: SMP060 says why
    fast, slow = band
    each = checkpoint_seconds(ctx.workload())
    every = ctx.spec.training.checkpoint_every
    for field, limit, stop in _limits(ctx):
        if field == "cluster.max_run" and not ctx.max_run_set and slow.total_seconds <= limit:
            continue  # a proposed limit holds the band by construction
        predicted = (f"predicted {spoken(time.total_seconds)} (band {spoken(fast.total_seconds)} to "
                     f"{spoken(slow.total_seconds)}, start-up and checkpoint writes included)")
        if not straddle and fast.total_seconds > limit:
            n = step_reached(time, limit, each, every)
            yield Finding(f"the run is {predicted} and {field} is {spoken(limit)}: SageMaker stops it ({stop}) "
                          f"at about step {n:,} of {time.steps:,}, and the hours before the stop are paid; "
                          + _ways_out(ctx, field, n), field)
        elif straddle and fast.total_seconds <= limit < slow.total_seconds:
            n = step_reached(slow, limit, each, every)
            yield Finding(f"the run is {predicted} and {field} is {spoken(limit)}, inside the band: a run at "
                          f"the band's slow end is stopped ({stop}) at about step {n:,} of {slow.steps:,}; "
                          + _ways_out(ctx, field, n), field)


@rule("SMP080", Severity.ERROR, "The predicted run fits cluster.max_run (and, with spot, cluster.max_wait)",
      f"{STOPPING}; {SPOT}")
def run_fits_limit(ctx: Context) -> Iterator[Finding]:
    yield from _over(ctx, straddle=False)


@rule("SMP081", Severity.WARNING, "The prediction's band fits cluster.max_run (and, with spot, cluster.max_wait)",
      f"{STOPPING}; {SPOT}")
def band_fits_limit(ctx: Context) -> Iterator[Finding]:
    yield from _over(ctx, straddle=True)


@rule("SMP082", Severity.INFO, "Without cluster.max_run, the plan proposes one from the prediction", STOPPING)
def max_run_proposed(ctx: Context) -> Iterator[Finding]:
    band = ctx.time_band
    if ctx.max_run_set or band is None or not ctx.memory.fits:
        return
    slow = band[1].total_seconds
    capped = " (capped at cluster.max_wait)" if ctx.max_run < proposed_max_run(slow) else ""
    yield Finding(f"cluster.max_run is not set: the job gets {compact(ctx.max_run)} ({spoken(ctx.max_run)}), the "
                  f"predicted band's slow end ({spoken(slow)}, start-up and checkpoint writes included) plus "
                  f"{MAX_RUN_MARGIN:.0%}, rounded up to a quarter hour{capped}; set cluster.max_run to choose",
                  "cluster.max_run")
