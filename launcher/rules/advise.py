"""`smp-launch advise`: search SMP v2 layouts for a model and rank them by predicted time to train.

Every layout that fits and passes the rules gets the step-time model's prediction (launcher.predict):
tokens per second per GPU, MFU, what bounds its step, the time to train a token budget and its cost.
The default order is the shortest predicted time (`by="cost"`: the cheapest, priced as `plan` prices, another
region's figure where the region has none; a candidate no region prices is refused by name, never ranked by time
instead); layouts above HEADROOM of a GPU's memory rank after every layout with headroom, and equal figures break
by cost, then fewer instances. Layouts whose predicted times differ by less than the model's leave-one-out spread
tie, and the advice says so. `by="practices"` keeps the order of AWS's best practices ("Starting points" in
https://docs.aws.amazon.com/sagemaker/latest/dg/model-parallel-best-practices-v2.html): the lowest
sharding degree that fits, tensor parallelism only when needed, activation offloading before more
sharding, checkpointing always.
Every candidate is checked by the same rules `plan` runs, so advice never contradicts `validate`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from pydantic import ValidationError

from launcher.catalog.smp import DEFAULT_PYTORCH, FRAMEWORKS, INSTANCES
from launcher.core.errors import ArgumentError
from launcher.predict import Cost, Performance, TrainingTime
from launcher.predict.fit import published_fit
from launcher.rules import Severity, run_rules
from launcher.rules.checks import MAX_GLOBAL_TOKENS
from launcher.rules.memory import MemoryEstimate, ParallelLayout, estimate
from launcher.rules.topology import Topology
from launcher.spec.models import JobSpec
from launcher.spec.presets import PRESETS

MAX_BATCH = 16
ORDERS = ("time", "cost", "practices")
DEFAULT_TOKENS = 10**12  # the budget times are shown for when none is given: a common pre-training run
HEADROOM = 0.95  # a layout predicted above this share of a GPU's memory ranks after every one below it
# A budget longer than SageMaker lets one job run (28 days) is a property of the budget, not of a layout: advise
# still ranks the layouts, and says so on each (a spec it writes is refused by `plan` until the budget is split).
LONGER_THAN_ONE_JOB = frozenset({"SMP080"})
TP_CHOICES = (1, 2, 4, 8)
INSTANCE_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# The best practices' reference table: (preset, instances) -> (shard, tp, checkpointing, offloading, batch).
SEED_REFERENCES = {
    ("llama2-7b", 1): (8, 1, True, False, 4),
    ("llama2-70b", 32): (256, 1, True, False, 2),
    ("llama-175b", 64): (128, 4, True, True, 6),
}


def parse_tokens(text: str) -> int:
    """`4M`, `4Mi`, `512K` or a plain number; M and K are binary (4M = 4,194,304, the best practices' limit)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KkMm]i?)?\s*", str(text))
    if not m:
        raise ArgumentError(f"{{global_batch_tokens}}: {text!r} is not a token count such as 4M or 2097152")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20}[(m.group(2) or "")[:1].lower()]
    return int(float(m.group(1)) * scale)


@dataclass(frozen=True)
class AdvisedLayout:
    """One SMP v2 layout the advisor found to fit and pass every rule, with why it ranks where it does."""

    instances: int
    shard: int
    tp: int
    checkpointing: bool
    offloading: bool
    batch: int
    memory: MemoryEstimate
    global_batch_tokens: int
    reference: bool = False
    warnings: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    performance: Performance | None = None
    time: TrainingTime | None = None
    cost: Cost | None = None
    ties_with_best: bool = False  # predicted within the model's spread of the best: no real difference
    tokens: int | None = None  # the token budget the time and cost are for (training.tokens of a written spec)
    region: str | None = None  # the region the layout was planned (and priced) in
    max_run: int | None = None  # a limit the prediction fits in (the plan's proposal: launcher.rules.stopping)
    too_long: str = ""  # why the budget does not fit one job (SMP080), where it does not: true of every layout
    HEADROOM: ClassVar[float] = HEADROOM  # the share of a GPU's memory above which a layout ranks last
    pytorch_version: str | None = None  # a newer image than the default, where only that one takes the layout

    def __post_init__(self) -> None:
        object.__setattr__(self, "warnings", tuple(self.warnings))
        object.__setattr__(self, "reasons", tuple(self.reasons))

    @property
    def key(self) -> tuple[int, bool, int, int, bool, int]:
        """Fewest warnings (the best practices' own advice, e.g. long context wants TP), checkpointing on, then
        the least tensor parallelism, the lowest sharding degree, no offloading, the largest batch."""
        return (len(self.warnings), not self.checkpointing, self.tp, self.shard, self.offloading, -self.batch)

    @property
    def headroom(self) -> bool:
        """Whether the predicted peak leaves more than (1 - HEADROOM) of a GPU's memory free."""
        return self.memory.utilisation <= HEADROOM

    @property
    def time_seconds(self) -> float:
        return self.time.total_seconds if self.time else float("inf")

    @property
    def usd(self) -> float | None:
        return self.cost.usd if self.cost else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "smp": {"hybrid_shard_degree": self.shard, "tensor_parallel_degree": self.tp,
                    "activation_checkpointing": self.checkpointing, "activation_offloading": self.offloading},
            "training": {"batch_size": self.batch},
            "memory": self.memory.to_dict(),
            "global_batch_tokens": self.global_batch_tokens,
            "seed_reference": self.reference,
            "warnings": list(self.warnings),
            "reasons": list(self.reasons),
            "performance": None if self.performance is None else {
                **self.performance.to_dict(), "time_to_train_seconds": round(self.time_seconds, 1),
                "time_to_train": self.time.to_dict() if self.time else None},
            "cost": self.cost.to_dict() if self.cost else None,
            "ties_with_best": self.ties_with_best,
            "headroom": self.headroom,
            "tokens": self.tokens,
            "region": self.region,
            "max_run": self.max_run,
            "too_long": self.too_long or None,
            "framework": {"pytorch_version": self.pytorch_version or DEFAULT_PYTORCH},
        }


@dataclass(frozen=True)
class Budget:
    """What the advice predicts against: a token budget, the region whose prices apply, where this account's
    calibration and price cache are read (`env`), and the order."""

    tokens: int = DEFAULT_TOKENS
    region: str = "us-west-2"
    env: Any = None
    by: str = "time"


# The newest image: a layout the default image refuses (e.g. SMP's gradient clipping with activation offloading
# before SMP 2.8.0) is tried on it too, and offered with that framework version.
NEWEST_PYTORCH = max(FRAMEWORKS, key=lambda v: tuple(int(x) for x in v.split(".")))


def _spec(preset: str, instance_type: str, instances: int, seq: int, precision: str, c: dict[str, Any],
          budget: Budget, pytorch_version: str = DEFAULT_PYTORCH) -> JobSpec:
    return JobSpec.model_validate({
        "name": "advise", "model": {"preset": preset, "seq_length": seq},
        "framework": {"pytorch_version": pytorch_version},
        "cluster": {"instance_type": instance_type, "instance_count": instances, "region": budget.region},
        "smp": {"hybrid_shard_degree": c["shard"], "tensor_parallel_degree": c["tp"],
                "activation_checkpointing": c["ac"], "activation_offloading": c["offload"]},
        "training": {"batch_size": c["batch"], "precision": precision, "tokens": budget.tokens},
        "output": {"path": "s3://advise-bucket/smp"},
    })


def _search(preset: str, instance_type: str, instances: int, seq: int, precision: str,
            target: int | None, budget: Budget) -> list[AdvisedLayout]:
    arch = PRESETS[preset].architecture
    cluster = Topology(instances, INSTANCES[instance_type].gpus, seq_length=seq)
    limit = target or MAX_GLOBAL_TOKENS
    found: list[AdvisedLayout] = []
    refused: list[str] = []  # why a layout that fits makes a spec the launcher would refuse (a token budget)
    for tp in TP_CHOICES:
        if cluster.world_size % tp or arch.num_heads % tp or arch.num_key_value_heads % tp:
            continue
        dp = replace(cluster, tensor_parallel=tp).data_parallel_degree
        batches = [target // (dp * seq)] if target else list(range(1, MAX_BATCH + 1))
        for batch in batches:
            tokens = replace(cluster, tensor_parallel=tp, batch_size=batch).global_batch_tokens if batch >= 1 else 0
            if batch < 1 or (target and tokens != target) or tokens > limit:
                continue
            for shard in (d for d in range(1, dp + 1) if dp % d == 0):
                for ac, offload in ((True, False), (True, True), (False, False)):
                    # offloading as the spec below runs it: PyTorch's offload wrapper (sm_activation_offloading's
                    # default), which keeps the one layer backward has reached (Context.loading_horizon)
                    lay = ParallelLayout(instance_type, shard, tensor_parallel=tp, batch_size=batch, seq_length=seq,
                                         activation_checkpointing=ac, activation_offloading=offload,
                                         loading_horizon=1)
                    mem = estimate(arch, lay)
                    if not mem.fits:
                        continue
                    try:
                        spec = _spec(preset, instance_type, instances, seq, precision,
                                     {"shard": shard, "tp": tp, "ac": ac, "offload": offload, "batch": batch},
                                     budget)
                    except ValidationError as err:
                        why = str(err.errors()[0]["msg"]).removeprefix("Value error, ")
                        if not why.startswith("training.tokens"):
                            raise  # only the token budget depends on the layout: anything else is our bug
                        refused.append(why)
                        continue
                    advisories, ctx = run_rules(spec, budget.region, env=budget.env)
                    newer = None
                    if (any(a.is_error and a.rule not in LONGER_THAN_ONE_JOB for a in advisories)
                            and NEWEST_PYTORCH != DEFAULT_PYTORCH):
                        newer = NEWEST_PYTORCH
                        layout = {"shard": shard, "tp": tp, "ac": ac, "offload": offload, "batch": batch}
                        spec = _spec(preset, instance_type, instances, seq, precision, layout, budget, newer)
                        advisories, ctx = run_rules(spec, budget.region, env=budget.env)
                    if any(a.is_error and a.rule not in LONGER_THAN_ONE_JOB for a in advisories):
                        continue
                    ref = SEED_REFERENCES.get((preset, instances)) == (shard, tp, ac, offload, batch) and seq == 4096
                    warns = tuple(f"{a.rule}: {a.message}" for a in advisories if a.severity is Severity.WARNING)
                    longer = next((f"{a.rule}: {a.message}" for a in advisories if a.rule in LONGER_THAN_ONE_JOB), "")
                    found.append(AdvisedLayout(instances, shard, tp, ac, offload, batch, mem, tokens, ref, warns,
                                               performance=ctx.performance, time=ctx.training_time, cost=ctx.cost,
                                               tokens=budget.tokens, region=budget.region, max_run=ctx.max_run,
                                               too_long=longer, pytorch_version=newer))
    if not found and refused:
        raise ArgumentError(f"{{tokens}}: no layout can train this budget: {refused[0]}; give a smaller {{tokens}} "
                            "or a longer {seq_length}")
    return _rank(found, budget.by)


def _rank(found: list[AdvisedLayout], by: str) -> list[AdvisedLayout]:
    """Best first: the best practices' order, or the shortest predicted time (the cheapest with `cost`), every
    layout with memory headroom before any without, equal figures broken by cost, then fewer instances, then the
    best practices' order. `cost` with a candidate no price covers is refused (ArgumentError), naming it."""
    practices = _explain(sorted(found, key=lambda c: (not c.headroom, c.key)))
    if by == "practices" or not practices:
        return practices
    if by == "cost":
        unpriced = [c for c in practices if c.usd is None]
        if unpriced:
            why = unpriced[0].cost.note if unpriced[0].cost else "the layout has no prediction"
            raise ArgumentError(f"{{by}}: cannot rank {len(unpriced)} of {len(practices)} layouts by cost: {why}; "
                                "or rank them by time")

    def order(c: AdvisedLayout) -> tuple[bool, float, float, int]:
        money = c.usd if c.usd is not None else float("inf")
        return (not c.headroom, money if by == "cost" else c.time_seconds, money, c.instances)

    return _explain_speed(sorted(practices, key=order), by)


def _differences(best: AdvisedLayout, other: AdvisedLayout) -> list[str]:
    """What the best layout does differently from another, and what each difference buys in the model."""
    out: list[str] = []
    b, o = best.performance, other.performance
    if b is None or o is None:
        return out
    if best.checkpointing != other.checkpointing:
        out.append("no activation checkpointing: no forward recomputed" if not best.checkpointing
                   else "activation checkpointing, which the other cannot fit without")
    if best.batch != other.batch:
        out.append(f"batch {best.batch} instead of {other.batch}: "
                   f"{'larger' if best.batch > other.batch else 'smaller'} matrices per step")
    if best.shard != other.shard or best.tp != other.tp:
        out.append(f"sharding {best.shard} x tensor {best.tp} instead of {other.shard} x {other.tp}: "
                   f"{b.communication_seconds + b.exposed_seconds:.2f} s of communication a step against "
                   f"{o.communication_seconds + o.exposed_seconds:.2f} s")
    if best.offloading != other.offloading:
        out.append("no activation offloading" if not best.offloading else "activation offloading")
    return out


def _explain_speed(ranked: list[AdvisedLayout], key: str) -> list[AdvisedLayout]:
    """Put the prediction first in each candidate's reasons, say why #1 wins over #2, and mark ties."""
    spread = published_fit().spread
    best = ranked[0]
    out: list[AdvisedLayout] = []
    for i, c in enumerate(ranked):
        reasons = list(c.reasons)
        tie = False
        if c.performance is not None and c.time is not None:
            p = c.performance
            cost = f", ${c.usd:,.0f}" if c.usd is not None else ""
            reasons.insert(0, f"predicted {p.tokens_per_second_per_gpu:,.0f} tokens/s per GPU (MFU {p.mfu * 100:.1f}%, "
                              f"{p.bound}-bound): {c.time_seconds / 86400:,.1f} days for {c.time.steps:,} steps{cost}")
            tie = i > 0 and abs(c.time_seconds / best.time_seconds - 1) <= spread
        out.append(replace(c, reasons=tuple(reasons), ties_with_best=tie))
    if len(out) > 1 and best.performance is not None:
        second = out[1]
        slower = second.time_seconds / best.time_seconds - 1
        why = "; ".join(_differences(best, second)) or "the same layout choices"
        tight = best.headroom and not second.headroom
        if tight:
            verdict = (f"#2 is predicted {abs(slower) * 100:.1f}% {'slower' if slower >= 0 else 'faster'} but "
                       f"leaves less than {1 - HEADROOM:.0%} of a GPU's memory free "
                       f"({second.memory.per_gpu_gb:.1f} of {second.memory.capacity_gb:.0f} GB), so it ranks after "
                       f"every layout that does; {why}")
        elif second.ties_with_best:
            verdict = (f"ties with #2 (predicted {abs(slower) * 100:.1f}% apart, within the model's leave-one-out "
                       f"spread of {spread * 100:.1f}%; the tie breaks by cost, then fewer instances): either will "
                       f"do; {why}")
        else:
            verdict = f"predicted {slower * 100:.1f}% faster than #2: {why}"
        order = "cheapest" if key == "cost" else "fastest"
        if not best.headroom:
            order += f" to train (no layout leaves {1 - HEADROOM:.0%} of a GPU's memory free)"
        else:
            order += " to train"
        out[0] = replace(out[0], reasons=(f"{order}: {verdict}", *out[0].reasons))
    return out


def _explain(ranked: list[AdvisedLayout]) -> list[AdvisedLayout]:
    """Attach the best practices' reasons to each candidate, and say why the best differs from the reference."""
    if not ranked:
        return ranked
    fewest = min(len(c.warnings) for c in ranked)
    clean = [c for c in ranked if len(c.warnings) == fewest]
    lowest_tp = min(c.tp for c in clean)
    lowest_shard = {tp: min(c.shard for c in clean if c.tp == tp) for tp in {c.tp for c in clean}}
    out = []
    for c in ranked:
        r = []
        low = lowest_shard.get(c.tp)
        if low is None or c.shard == low:
            r.append(f"lowest sharding degree that fits ({c.shard}): the least all-gather traffic")
        else:
            r.append(f"sharding degree {c.shard} communicates more than {low}, which also fits")
        if c.tp == 1:
            r.append("no tensor parallelism needed")
        elif c.tp == lowest_tp:
            r.append(f"tensor parallelism {c.tp}: the least that fits without warnings")
        else:
            r.append(f"tensor parallelism {c.tp} is more than needed ({lowest_tp} suffices)")
        if c.offloading:
            r.append(f"activation offloading keeps the sharding degree at {c.shard}")
        if not c.checkpointing:
            r.append("no activation checkpointing: faster, but AWS's best practices enable it for every model size")
        r.append(f"{c.memory.per_gpu_gb:.1f} of {c.memory.capacity_gb:.0f} GB per GPU; "
                 f"{c.global_batch_tokens:,} tokens per step")
        r.extend(f"warning {w}" for w in c.warnings)
        if c.reference:
            r.append("AWS's reference configuration")
        out.append(replace(c, reasons=tuple(r)))
    best, ref = out[0], next((c for c in out if c.reference), None)
    if ref is not None and not best.reference:
        why = []
        if best.shard < ref.shard:
            why.append(f"a sharding degree of {best.shard} instead of {ref.shard} communicates less")
        if best.tp < ref.tp:
            why.append(f"tensor parallelism {best.tp} instead of {ref.tp} avoids splitting layers")
        if ref.offloading and not best.offloading:
            why.append("it needs no activation offloading")
        if best.batch != ref.batch:
            why.append(f"batch {best.batch} per rank instead of {ref.batch}")
        above = (f"ranks above AWS's reference configuration (sharding {ref.shard}, tensor {ref.tp}, "
                 f"batch {ref.batch}): " + "; ".join(why or ["the best practices' order prefers it"]))
        out[0] = replace(best, reasons=(*best.reasons, above))
    return out


def advise(preset: str, instance_type: str = "ml.p4d.24xlarge", instances: int | None = None,
           seq_length: int = 4096, global_batch_tokens: int | None = None,
           precision: str = "bf16", budget: Budget | None = None) -> list[AdvisedLayout]:
    """Feasible configurations, best first (`budget.by`). Without `instances`, the smallest cluster whose largest
    fitting local batch reaches `global_batch_tokens` (the best practices' sharded-data-parallel step 2)."""
    budget = budget or Budget()
    if budget.by not in ORDERS:
        raise ArgumentError(f"{{by}}: {budget.by!r} is not one of {', '.join(ORDERS)}")
    if preset not in PRESETS:
        from launcher.spec.models import did_you_mean

        raise ArgumentError(f"{{model}}: unknown preset '{preset}'{did_you_mean(preset, PRESETS)}")
    if instance_type not in INSTANCES:
        raise ArgumentError(f"{{instance_type}}: {instance_type} is not one of {', '.join(INSTANCES)}")
    if instances is not None:
        return _search(preset, instance_type, instances, seq_length, precision, global_batch_tokens, budget)
    if global_batch_tokens is None:
        raise ArgumentError("give {instances}, or {global_batch_tokens} to derive the cluster size from it")
    for n in INSTANCE_COUNTS:
        found = _search(preset, instance_type, n, seq_length, precision, global_batch_tokens, budget)
        if found:
            return found
    raise ArgumentError(f"no cluster of up to {INSTANCE_COUNTS[-1]} instances reaches {global_batch_tokens:,} "
                        "tokens per step with a batch that fits; lower {global_batch_tokens} or {seq_length}")


def spec_yaml(preset: str, instance_type: str, seq_length: int, precision: str, best: AdvisedLayout,
              written_to: str | None = None) -> str:
    """A ready job spec for the recommendation, with the schema modeline editors use (the jobs/*.yaml one:
    the repository's schema file, relative to where the spec is written)."""
    import yaml

    from launcher.core.durations import compact
    from launcher.spec.schema import modeline

    cluster: dict[str, Any] = {"instance_type": instance_type, "instance_count": best.instances}
    if best.region:
        cluster["region"] = best.region
    # the limit the prediction fits in (the band's slow end with a margin), as `plan` would propose it
    cluster["max_run"] = compact(best.max_run) if best.max_run else "1d"
    training: dict[str, Any] = {"batch_size": best.batch, "precision": precision}
    if best.tokens:
        training["tokens"] = best.tokens
    body = {
        "name": re.sub(r"[^a-zA-Z0-9-]", "-", preset)[:47],
        "model": {"preset": preset, "seq_length": seq_length},
        "cluster": cluster,
        **({"framework": {"pytorch_version": best.pytorch_version}} if best.pytorch_version else {}),
        "smp": {"hybrid_shard_degree": best.shard, "tensor_parallel_degree": best.tp,
                "activation_checkpointing": best.checkpointing, "activation_offloading": best.offloading,
                "delayed_param_init": "auto", "backend": "auto"},
        "training": training,
        "data": {"train": "synthetic"},
        "output": {"path": "s3://${SMP_LAUNCH_BUCKET:-my-smp-bucket}/smp"},
    }
    header = modeline(written_to or "job.yaml") + "\n"
    header += "# Written by `smp-launch advise`:\n" + "".join(f"#   - {r}\n" for r in best.reasons)
    if best.too_long:
        header += f"#   - refused by `plan` as it stands: {best.too_long}\n"
    cost = best.cost
    if cost is not None and cost.usd is not None:
        header += f"#   - price: {cost.price_source}, {cost.price_date} (`plan` prices this spec the same way)\n"
    return header + yaml.safe_dump(body, sort_keys=False)
