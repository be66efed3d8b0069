"""The rule registry and how rules run: each rule is one small function over a Context."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from launcher.catalog.architecture import Architecture
from launcher.catalog.smp import FRAMEWORKS, INSTANCES, FrameworkVersion, InstanceType
from launcher.core.enums import StrEnum
from launcher.core.errors import Mark
from launcher.predict import Cost, Performance, TrainingTime, Workload
from launcher.rules.decisions import Decisions, decide
from launcher.rules.memory import MemoryEstimate, ParallelLayout, estimate
from launcher.rules.topology import Topology
from launcher.spec.models import JobSpec

MAX_SECONDS = 10**9  # longer than any limit SageMaker takes


class Severity(StrEnum):
    """How much an advisory weighs, most first: an error blocks submit; a warning and an info advise."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


_ORDER = {s: i for i, s in enumerate(Severity)}


@dataclass(frozen=True)
class Finding:
    message: str
    field: str = ""


@dataclass(frozen=True)
class Advisory:
    """What a rule found in a spec: `error` blocks submit; `warning` and `info` advise.

    `field` is the spec's field path it points at; `mark` (not part of the JSON) is where that field
    is written, when the plan was built from a file."""

    rule: str
    severity: Severity
    message: str
    field: str = ""
    source: str = ""
    mark: Mark | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity(self.severity))

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "severity": self.severity.value, "message": self.message, "field": self.field,
                "source": self.source}


Check = Callable[["Context"], Iterable[Finding] | None]


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    title: str
    source: str
    check: Check


RULES: list[Rule] = []


def rule(rule_id: str, severity: Severity, title: str, source: str) -> Callable[[Check], Check]:
    """Register a check; ids are unique and severities fixed, so docs/rules.md can list them."""
    assert isinstance(severity, Severity), severity
    assert all(r.id != rule_id for r in RULES), rule_id

    def register(fn: Check) -> Check:
        RULES.append(Rule(rule_id, severity, title, source, fn))
        return fn

    return register


class Context:
    """A validated spec and what follows from it, computed once and shared by every rule."""

    def __init__(self, spec: JobSpec, region: str | None, topology: Topology | None = None,
                 env: Mapping[str, str] | None = None):
        self.spec = spec
        self.env = env  # where this account's calibration and cached prices are read (None: os.environ)
        self.topology = topology or Topology.of(spec)
        self.region = region
        self.smp = spec.smp
        self.arch: Architecture = spec.model.architecture()
        self.instance: InstanceType = INSTANCES[spec.cluster.instance_type]
        self.framework: FrameworkVersion = FRAMEWORKS[spec.framework.pytorch_version]
        self.decisions: Decisions = decide(spec, self.topology)
        self.world = self.decisions.world_size
        self.shard = self.decisions.hybrid_shard_degree
        self.seq = spec.model.seq_length

    def layout(self, **changes: Any) -> ParallelLayout:
        base = ParallelLayout(instance_type=self.instance.name, shard_degree=self.shard,
                              tensor_parallel=self.smp.tensor_parallel_degree,
                              context_parallel=self.smp.context_parallel_degree,
                              expert_parallel=self.smp.expert_parallel_degree,
                              batch_size=self.spec.training.batch_size, seq_length=self.seq,
                              activation_checkpointing=self.smp.activation_checkpointing,
                              activation_offloading=self.smp.activation_offloading,
                              loading_horizon=self.loading_horizon,
                              smp_implementation=self.decisions.transform,
                              delayed_param_init=self.decisions.delayed_param_init,
                              pretrained=self.spec.model.pretrained is not None,
                              final_export=self.spec.output.final_export)
        return dataclasses.replace(base, **changes)

    @property
    def loading_horizon(self) -> int:
        """Layers whose checkpointed inputs are on the GPU at once while offloading: SMP's offloading keeps
        activation_loading_horizon of them (it prefetches); PyTorch's offload wrapper brings back one, when
        backward reaches it."""
        return self.smp.activation_loading_horizon if self.decisions.offloading == "smp" else 1

    @cached_property
    def memory(self) -> MemoryEstimate:
        return estimate(self.arch, self.layout())

    def workload(self) -> Workload:
        """The layout as the step-time model sees it."""
        from launcher.predict.hardware import NODE_NETWORK_GBPS

        s = self.smp
        return Workload(self.arch, self.instance.gpu, self.spec.cluster.instance_count, self.instance.gpus,
                        NODE_NETWORK_GBPS[self.instance.name], self.seq, self.spec.training.batch_size,
                        shard_degree=self.shard, tensor_parallel=s.tensor_parallel_degree,
                        context_parallel=s.context_parallel_degree, expert_parallel=s.expert_parallel_degree,
                        checkpointing=1.0 if s.activation_checkpointing else 0.0,
                        offloading=s.activation_offloading, offload_prefetch=self.decisions.offloading == "smp",
                        precision=self.spec.training.precision,
                        smddp=self.decisions.backend == "smddp")

    @cached_property
    def performance(self) -> Performance | None:
        """Predicted speed (this account's factor applied where `calibrate` stored one); None for a layout
        whose degrees do not divide the world, or an instance type launcher.predict.hardware has no figures for."""
        from launcher.predict import account_factors, predict
        from launcher.predict.hardware import GPUS, NODE_NETWORK_GBPS

        if not self.topology_ok or self.instance.name not in NODE_NETWORK_GBPS or self.instance.gpu not in GPUS:
            return None  # no figure means anything, or no hardware figures to predict with

        found = predict(self.workload())
        mine = account_factors(self.env).get(self.instance.name)
        return found.scaled(mine.factor, mine.describe()) if mine else found

    @cached_property
    def training_time(self) -> TrainingTime | None:
        perf = self.performance
        if perf is None:
            return None
        from launcher.predict import steps_from, training_time

        t = self.spec.training
        how = steps_from(self.spec, self.topology.global_batch_tokens)
        return training_time(self.workload(), perf.step_seconds, t.max_steps, how, t.checkpoint_every,
                             self.spec.cluster.spot, self.decisions.async_checkpoint)

    @cached_property
    def time_band(self) -> tuple[TrainingTime, TrainingTime] | None:
        """The time to train at the speed band's fast and slow ends: (shortest, longest)."""
        perf, time = self.performance, self.training_time
        if perf is None or time is None:
            return None
        from launcher.predict.budget import at_speed

        low, high = perf.band
        tokens = perf.step_seconds * perf.tokens_per_second_per_gpu  # per GPU a step
        every, spot = self.spec.training.checkpoint_every, self.spec.cluster.spot
        return (at_speed(time, self.workload(), tokens / high, every, spot),
                at_speed(time, self.workload(), tokens / low, every, spot))

    @property
    def max_run_set(self) -> bool:
        """Whether the spec (or a --set) gives cluster.max_run; without it the plan proposes one."""
        return "max_run" in self.spec.cluster.model_fields_set

    @cached_property
    def max_run(self) -> int:
        """The MaxRuntimeInSeconds the job gets: the spec's, else the one proposed from the prediction (the
        band's slow end with a margin), else the spec's default where nothing is predicted."""
        band, wait = self.time_band, self.spec.cluster.max_wait
        if self.max_run_set:
            return self.spec.cluster.max_run
        if band is None:
            return min(self.spec.cluster.max_run, wait or self.spec.cluster.max_run)
        from launcher.predict.budget import proposed_max_run

        return min(proposed_max_run(band[1].total_seconds), wait or MAX_SECONDS)

    @cached_property
    def cost(self) -> Cost | None:
        time = self.training_time
        if time is None:
            return None
        from launcher.predict import cost

        c = self.spec.cluster
        return cost(c.instance_type, c.instance_count, self.region, c.spot, time.total_seconds, self.env)

    @property
    def topology_ok(self) -> bool:
        s = self.smp
        degrees = (s.tensor_parallel_degree, s.context_parallel_degree, s.expert_parallel_degree, self.shard)
        return (all(d <= self.world and self.world % d == 0 for d in degrees)
                and self.world % (self.shard * s.tensor_parallel_degree * s.expert_parallel_degree) == 0)


def run_rules(spec: JobSpec, region: str | None, topology: Topology | None = None,
              env: Mapping[str, str] | None = None) -> tuple[list[Advisory], Context]:
    """Run every rule; return advisories (errors first) and the context they saw (`env`: where this account's
    calibration and cached prices are read, os.environ by default)."""
    ctx = Context(spec, region, topology, env)
    found = [Advisory(r.id, r.severity, f.message, f.field, r.source) for r in RULES for f in _run(r, ctx)]
    found.sort(key=lambda a: (_ORDER[a.severity], a.rule))
    return found, ctx


def _run(r: Rule, ctx: Context) -> Iterator[Finding]:
    yield from r.check(ctx) or ()
