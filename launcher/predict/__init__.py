"""Before paying: how fast a layout trains, how long it takes and what it costs.

`model` is the step-time model (compute, FSDP/TP/CP/EP communication, overlap), `fit` calibrates its
compute efficiency on published measurements (`published`, each with its source), `speed` turns both
into a prediction with a band, `account` keeps this account's own factors (`smp-launch calibrate`), and
`budget` turns a prediction into time to train and cost. No AWS call: prices come from
launcher.catalog.prices (a fetched cache, else a shipped snapshot).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from launcher.predict.account import AccountFactor
from launcher.predict.account import factors as account_factors
from launcher.predict.budget import Cost, TrainingTime, cost, training_time
from launcher.predict.model import Workload
from launcher.predict.speed import Performance, predict

if TYPE_CHECKING:
    from launcher.spec.models import JobSpec

__all__ = ["AccountFactor", "Cost", "Performance", "TrainingTime", "Workload", "account_factors", "cost", "predict",
           "steps_from", "training_time"]


def steps_from(spec: JobSpec, per_step: int) -> str:
    """How the plan's steps were decided, in words: training.max_steps, or training.tokens over the global
    batch of `per_step` tokens (the spec turned the budget into max_steps)."""
    t = spec.training
    if t.tokens is None:
        return "training.max_steps"
    return f"training.tokens {t.tokens:,} at {per_step:,} tokens a step"
