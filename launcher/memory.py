"""Predicted peak GPU memory per rank for an SMP v2 (FSDP + optional TP/CP/EP) training step.

The model is analytic and deliberately simple; each term cites where it comes from:
- Model states: mixed-precision AdamW keeps 16 bytes per parameter (bf16/fp16 weights and grads,
  fp32 master weights, two fp32 moments): Rajbhandari et al. 2020, "ZeRO", section 3.1. FSDP shards
  them over the sharding degree, tensor parallelism splits them over the TP degree, and expert
  parallelism splits the experts over the EP degree.
- FSDP gathered units: one decoder layer is all-gathered in 16-bit at a time, plus the prefetched
  next one (forward_prefetch / BACKWARD_PRE with limit_all_gathers) and its unsharded gradient
  before the reduce-scatter; the root unit (embeddings, LM head) stays gathered through the step.
- Activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", equations 1-2: a layer stores s*b*h*(34 + 5*a*s/h) bytes in 16-bit; flash attention drops
  the 5*a*s/h score term, and tensor parallelism with sequence parallelism divides the rest by t.
  With full activation checkpointing only each layer's input (2*s*b*h bytes) is kept, plus one layer
  recomputed at a time; with offloading only `activation_loading_horizon` layer inputs stay on the
  GPU. Context parallelism splits the sequence, so s becomes s/cp.
- Logits and loss: b*s*V logits in 16-bit, their fp32 upcast for the loss, the fp32 log-softmax
  saved for backward and the fp32 gradient: 14 bytes per logit, split over t and cp.
- Framework: the CUDA context and NCCL/SMDDP buffers (about 1.1 GB measured on A100/H100 nodes by
  PyTorch users; a constant here) and allocator fragmentation (10% of the transient memory).
Figures are GiB and are called GB in the output, like the GPUs' nominal "40 GB".
"""
from __future__ import annotations

from dataclasses import dataclass

from launcher.architecture import Architecture
from launcher.catalog import INSTANCES

GIB = float(1 << 30)
BYTES_PER_PARAM_STATE = 16
HALF = 2
ACT_BYTES_PER_SBH = 34      # Korthikanti et al. 2022, eq. 1 without the attention-score term
CKPT_BYTES_PER_SBH = 2      # a checkpointed layer input, 16-bit
LOGIT_BYTES = 14            # 2 (bf16) + 4 (fp32 upcast) + 4 (log-softmax) + 4 (grad)
CUDA_CONTEXT_GB = 1.1
FRAGMENTATION = 0.10


@dataclass(frozen=True)
class Layout:
    """The parallel layout and step shape the estimate is for."""

    instance_type: str
    shard_degree: int
    tensor_parallel: int = 1
    context_parallel: int = 1
    expert_parallel: int = 1
    batch_size: int = 1
    seq_length: int = 4096
    activation_checkpointing: bool = True
    activation_offloading: bool = False
    loading_horizon: int = 2


@dataclass(frozen=True)
class Estimate:
    per_gpu_gb: float
    capacity_gb: float
    breakdown: dict[str, float]

    @property
    def fits(self) -> bool:
        return self.per_gpu_gb <= self.capacity_gb

    @property
    def utilisation(self) -> float:
        return self.per_gpu_gb / self.capacity_gb

    def as_dict(self) -> dict:
        return {"per_gpu_gb": round(self.per_gpu_gb, 2), "capacity_gb": self.capacity_gb, "fits": self.fits,
                "breakdown": {k: round(v, 2) for k, v in self.breakdown.items()}}


def model_states(arch: Architecture, lay: Layout) -> float:
    """Sharded weights, gradients and AdamW moments, in bytes (ZeRO's 16 bytes per parameter)."""
    expert = 0
    if arch.num_experts > 1:
        expert = arch.num_layers * (arch.layer_parameters() - arch.layer_parameters(experts=0))
    dense = arch.parameters - expert
    per_rank = dense / (lay.shard_degree * lay.tensor_parallel)
    per_rank += expert / (lay.shard_degree * lay.tensor_parallel * lay.expert_parallel)
    return BYTES_PER_PARAM_STATE * per_rank


def gathered_units(arch: Architecture, lay: Layout) -> float:
    """16-bit parameters FSDP holds unsharded: two layer units (current + prefetched), one unit's
    unsharded gradient, and the root unit. Nothing is gathered when nothing is sharded."""
    if lay.shard_degree <= 1:
        return 0.0
    experts_on_rank = max(1, arch.num_experts // lay.expert_parallel) if arch.num_experts > 1 else None
    layer = arch.layer_parameters(experts=experts_on_rank) / lay.tensor_parallel
    root = (arch.embedding_parameters + arch.hidden_width) / lay.tensor_parallel
    return HALF * (3 * layer + root)


def activations(arch: Architecture, lay: Layout) -> float:
    s = lay.seq_length / lay.context_parallel
    sbh = s * lay.batch_size * arch.hidden_width
    full_layer = ACT_BYTES_PER_SBH * sbh / lay.tensor_parallel
    if not lay.activation_checkpointing:
        return arch.num_layers * full_layer
    kept = min(arch.num_layers, lay.loading_horizon) if lay.activation_offloading else arch.num_layers
    return kept * CKPT_BYTES_PER_SBH * sbh / lay.tensor_parallel + full_layer


def logits(arch: Architecture, lay: Layout) -> float:
    return LOGIT_BYTES * lay.batch_size * lay.seq_length * arch.vocab_size / (
        lay.tensor_parallel * lay.context_parallel)


def estimate(arch: Architecture, lay: Layout) -> Estimate:
    """Peak memory per GPU with a breakdown (GB); compare with the GPU's capacity."""
    parts = {
        "model_states": model_states(arch, lay) / GIB,
        "gathered_params": gathered_units(arch, lay) / GIB,
        "activations": activations(arch, lay) / GIB,
        "logits_and_loss": logits(arch, lay) / GIB,
    }
    transient = parts["gathered_params"] + parts["activations"] + parts["logits_and_loss"]
    parts["framework"] = CUDA_CONTEXT_GB + FRAGMENTATION * transient
    return Estimate(per_gpu_gb=sum(parts.values()),
                    capacity_gb=INSTANCES[lay.instance_type].gpu_memory_gb, breakdown=parts)
