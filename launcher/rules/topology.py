"""How many GPUs a job has and how they divide: computed once from the spec, read by the plan and the rules.

Data parallelism is what the tensor and context degrees leave of the world (the SMP v2 reference:
https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-v2-reference.html);
each data-parallel rank takes `batch_size` sequences a step. A what-if (another tensor degree, another batch)
is `dataclasses.replace(topology, ...)`; a topology given only its cluster and sequence length is plain data
parallelism, one sequence per rank.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from launcher.catalog.smp import INSTANCES
from launcher.spec.models import JobSpec


@dataclass(frozen=True)
class Topology:
    instance_count: int
    gpus_per_instance: int
    tensor_parallel: int = 1
    context_parallel: int = 1
    expert_parallel: int = 1
    batch_size: int = 1
    seq_length: int = field(kw_only=True)  # every caller knows it: no default to fall back on silently

    @classmethod
    def of(cls, spec: JobSpec) -> Topology:
        smp = spec.smp
        return cls(instance_count=spec.cluster.instance_count,
                   gpus_per_instance=INSTANCES[spec.cluster.instance_type].gpus,
                   tensor_parallel=smp.tensor_parallel_degree, context_parallel=smp.context_parallel_degree,
                   expert_parallel=smp.expert_parallel_degree, batch_size=spec.training.batch_size,
                   seq_length=spec.model.seq_length)

    @property
    def world_size(self) -> int:
        return self.instance_count * self.gpus_per_instance

    @property
    def data_parallel_degree(self) -> int:
        return max(1, self.world_size // (self.tensor_parallel * self.context_parallel))

    @property
    def max_shard_degree(self) -> int:
        """The largest sharding degree the tensor and expert degrees leave room for."""
        return self.world_size // (self.tensor_parallel * self.expert_parallel)

    @property
    def global_batch_sequences(self) -> int:
        return self.data_parallel_degree * self.batch_size

    @property
    def global_batch_tokens(self) -> int:
        return self.global_batch_sequences * self.seq_length
