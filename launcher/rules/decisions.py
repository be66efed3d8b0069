"""What `auto` settings resolve to, per the seed's general settings (seed README points 3 and 4).

The plan, the rules and the rendered entry script all read these, so they never disagree.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from launcher.catalog import INSTANCES
from launcher.spec.models import JobSpec

DELAYED_INIT_THRESHOLD = 60e9  # seed: "above 60 billion parameters use delayed parameter initialization"


@dataclass(frozen=True)
class Decisions:
    world_size: int
    hybrid_shard_degree: int      # effective: what SMP shards over once 0 ("SMP decides") is resolved
    backend: str                  # smddp | nccl
    delayed_param_init: bool
    transform: bool               # tsm.transform is needed (TP, CP, EP or fp8)
    sharding_strategy: str        # the FSDP strategy the script asks for; SMP rewrites its groups

    def as_dict(self) -> dict:
        return asdict(self)


def effective_shard_degree(spec: JobSpec, world: int) -> int:
    """hybrid_shard_degree 0 means SMP picks the largest degree the other degrees leave (smp_v2.md 1.2, rule 8)."""
    smp = spec.smp
    if smp.hybrid_shard_degree > 0:
        return smp.hybrid_shard_degree
    return max(1, world // (smp.tensor_parallel_degree * smp.expert_parallel_degree))


def tensor_parallel_only(spec: JobSpec, shard: int) -> bool:
    return shard == 1 and spec.smp.tensor_parallel_degree > 1


def auto_backend(spec: JobSpec, shard: int) -> str:
    """SMDDP where its AllGather exists (P4) except tensor-parallel-only jobs; NCCL elsewhere."""
    instance = INSTANCES[spec.cluster.instance_type]
    return "smddp" if instance.smddp and not tensor_parallel_only(spec, shard) else "nccl"


def decide(spec: JobSpec) -> Decisions:
    instance = INSTANCES[spec.cluster.instance_type]
    world = spec.cluster.instance_count * instance.gpus
    shard = effective_shard_degree(spec, world)
    smp = spec.smp
    backend = auto_backend(spec, shard) if smp.backend == "auto" else smp.backend
    params = spec.model.architecture().parameters
    delayed = params > DELAYED_INIT_THRESHOLD if smp.delayed_param_init == "auto" else bool(smp.delayed_param_init)
    transform = (smp.tensor_parallel_degree > 1 or smp.context_parallel_degree > 1
                 or smp.expert_parallel_degree > 1 or spec.training.precision == "fp8")
    strategy = "NO_SHARD" if shard == 1 else "HYBRID_SHARD"
    return Decisions(world_size=world, hybrid_shard_degree=shard, backend=backend,
                     delayed_param_init=delayed, transform=transform, sharding_strategy=strategy)
