"""Time to train and what it costs: the step-time prediction times the steps, plus what is not stepping.

- Start-up: SageMaker provisioning the instances, pulling the SMP image and downloading the data, and the
  script building the model: STARTUP_SECONDS, an estimate (the `Starting` and `Downloading` phases of
  DescribeTrainingJob's SecondaryStatusTransitions show an account's own).
- Checkpoints: every `checkpoint_every` steps each node writes its share of the fp32 weights and AdamW
  moments (12 bytes per parameter; one replica of a hybrid-sharded model writes) to local storage at
  CHECKPOINT_GB_S per node (an estimate); SageMaker uploads them to S3 in the background. An asynchronous
  save (SMP's async_save) stops training only while each GPU copies its shard to host memory over PCIe;
  the write runs while training goes on (SMP's checkpointing page:
  https://docs.aws.amazon.com/sagemaker/latest/dg/model-parallel-core-features-v2-checkpoints.html).
- Spot: an interruption allowance. AWS's Spot Instance Advisor puts the least interrupted instance types
  below 5% a month (https://aws.amazon.com/ec2/spot/instance-advisor/); taking 5% per instance-month, a job
  of n instances expects n x hours x 0.05 / 720 interruptions, each costing a start-up and half a
  checkpoint interval of lost steps. Waiting for capacity is not counted (`max_wait` bounds it).
Cost is instances x hours x the hourly price (launcher.catalog.prices: the fetched cache, else the shipped
snapshot, each figure with its source and date; where the job's region has none, the same type's figure from
another region, named in `price_region` and the source). Without any figure there is no cost, only the reason.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.catalog.prices import regional_price
from launcher.predict.hardware import GPUS
from launcher.predict.model import Workload

STARTUP_SECONDS = 600.0
CHECKPOINT_BYTES_PER_PARAM = 12
CHECKPOINT_GB_S = 1.0
SPOT_INTERRUPTIONS_PER_INSTANCE_HOUR = 0.05 / 720


@dataclass(frozen=True)
class TrainingTime:
    steps: int
    steps_from: str  # how the steps were decided, in words
    step_seconds: float
    startup_seconds: float
    checkpoints: int
    checkpoint_seconds: float  # all of them
    interruption_seconds: float  # the spot allowance (0 on demand)
    async_checkpoints: bool = False  # checkpoint_seconds counts only the copies to host memory

    @property
    def training_seconds(self) -> float:
        return self.steps * self.step_seconds

    @property
    def total_seconds(self) -> float:
        return self.startup_seconds + self.training_seconds + self.checkpoint_seconds + self.interruption_seconds

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "steps_from": self.steps_from, "startup_seconds": round(self.startup_seconds),
                "training_seconds": round(self.training_seconds, 1), "checkpoints": self.checkpoints,
                "checkpoint_seconds": round(self.checkpoint_seconds, 1), "async_checkpoints": self.async_checkpoints,
                "interruption_seconds": round(self.interruption_seconds, 1)}


def checkpoint_seconds(w: Workload) -> float:
    """One checkpoint write: the nodes holding one replica of the sharded states write in parallel."""
    holders = max(1, math.ceil(w.shard * w.tensor_parallel * w.expert_parallel / w.gpus_per_node))
    nbytes = CHECKPOINT_BYTES_PER_PARAM * w.architecture.parameters / min(holders, w.nodes)
    return nbytes / (CHECKPOINT_GB_S * 1e9)


def staging_seconds(w: Workload) -> float:
    """An asynchronous save's stop: each GPU copies its share of the states to host memory over PCIe."""
    holders = min(w.world, max(1, w.shard * w.tensor_parallel * w.expert_parallel))
    return CHECKPOINT_BYTES_PER_PARAM * w.architecture.parameters / holders / (GPUS[w.gpu].pcie_gb_s * 1e9)


def training_time(w: Workload, step_seconds: float, steps: int, steps_from: str, checkpoint_every: int,
                  spot: bool, async_checkpoint: bool = False) -> TrainingTime:
    count = steps // checkpoint_every
    writes = count * (staging_seconds(w) if async_checkpoint else checkpoint_seconds(w))
    interruptions = 0.0
    if spot:
        hours = (STARTUP_SECONDS + steps * step_seconds + writes) / 3600
        expected = w.nodes * hours * SPOT_INTERRUPTIONS_PER_INSTANCE_HOUR
        lost = STARTUP_SECONDS + 0.5 * min(checkpoint_every, steps) * step_seconds
        interruptions = expected * lost
    return TrainingTime(steps, steps_from, step_seconds, STARTUP_SECONDS, count, writes, interruptions,
                        async_checkpoint)


@dataclass(frozen=True)
class Cost:
    """`plan`'s `cost`: None figures (and the reason in `note`) where no price is known."""

    usd: float | None
    usd_per_hour: float | None
    price_source: str | None
    price_date: str | None
    spot: bool
    note: str = ""
    price_region: str | None = None  # the region the figure is for: another one's where the job's has none

    def to_dict(self) -> dict[str, Any]:
        return {"usd": None if self.usd is None else round(self.usd, 2),
                "usd_per_hour": None if self.usd_per_hour is None else round(self.usd_per_hour, 3),
                "price_source": self.price_source, "price_date": self.price_date,
                "price_region": self.price_region, "spot": self.spot, "note": self.note}


def cost(instance_type: str, instances: int, region: str | None, spot: bool, seconds: float,
         env: Mapping[str, str] | None = None) -> Cost:
    kind = "spot" if spot else "on-demand"
    if not region:
        return Cost(None, None, None, None, spot, "no region, so no price: set cluster.region or AWS_REGION")
    found = regional_price(instance_type, region, spot=spot, env=env)
    if found is None:
        return Cost(None, None, None, None, spot,
                    f"no {kind} price for {instance_type} in any region of the fetched cache or the shipped "
                    "snapshot; a submit (or its dry run, or `smp-launch prices --refresh`) fetches one")
    price = found.price
    per_hour = instances * price.usd_per_hour
    return Cost(per_hour * seconds / 3600, per_hour, found.source, price.date, spot,
                f"{instances} x {instance_type} at ${price.usd_per_hour:,.3f} an hour ({kind})", found.region)


# ---- how long SageMaker lets it run (cluster.max_run, cluster.max_wait) ----

MAX_RUN_LIMIT = 28 * 86400  # StoppingCondition.MaxRuntimeInSeconds: at most 28 days (API_StoppingCondition)
MAX_RUN_MARGIN = 0.10  # the proposal's margin over the band's slow end, start-up and checkpoint writes included
MAX_RUN_STEP = 900  # proposals are whole quarters of an hour


def at_speed(time: TrainingTime, w: Workload, step_seconds: float, checkpoint_every: int,
             spot: bool) -> TrainingTime:
    """The same run at another step time (an end of the speed band): the steps, start-up and checkpoint writes
    stay; the spot allowance follows the new length."""
    return training_time(w, step_seconds, time.steps, time.steps_from, checkpoint_every, spot)


def proposed_max_run(slowest_seconds: float) -> int:
    """A max_run the prediction fits in: the band's slow end (start-up and checkpoint writes included) plus
    MAX_RUN_MARGIN, rounded up to a quarter of an hour; never more than SageMaker allows."""
    wanted = slowest_seconds * (1 + MAX_RUN_MARGIN)
    return int(min(MAX_RUN_LIMIT, math.ceil(wanted / MAX_RUN_STEP) * MAX_RUN_STEP))


def step_reached(time: TrainingTime, limit_seconds: float, checkpoint_seconds_each: float,
                 checkpoint_every: int) -> int:
    """About the step a run stopped after `limit_seconds` has reached: start-up first, then steps with their
    share of the checkpoint writes (at the predicted speed)."""
    per_step = time.step_seconds + checkpoint_seconds_each / max(1, checkpoint_every)
    left = limit_seconds - time.startup_seconds
    return max(0, min(time.steps, int(left // per_step))) if per_step > 0 else 0
