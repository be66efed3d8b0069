"""Predicted peak GPU memory per rank for an SMP v2 (FSDP + optional TP/CP/EP) training step.

The model is analytic and deliberately simple; each term cites where it comes from:
- Model states: mixed-precision AdamW keeps 16 bytes per parameter (bf16/fp16 weights and grads,
  fp32 master weights, two fp32 moments): Rajbhandari et al. 2020, "ZeRO", section 3.1. FSDP shards
  them over the sharding degree, tensor parallelism splits them over the TP degree, and expert
  parallelism splits the experts over the EP degree.
- FSDP gathered units: one decoder layer is all-gathered in 16-bit at a time, plus the prefetched
  next one (forward_prefetch / BACKWARD_PRE with limit_all_gathers) and its unsharded gradient
  before the reduce-scatter; the root unit (embeddings, LM head) stays gathered through the step.
- Activations, Hugging Face layers (use_smp_implementation false): bytes per s*b*h per layer MEASURED on
  CPU by tools/activation_measure.py, which counts the storages autograd saves for the real
  transformers layer classes in bf16 with sdpa attention (the kernel family a GPU also uses: none of
  them keeps the s x s scores); tests/test_memory.py re-measures them with the installed transformers.
  RMSNorm's fp32 upcast and SwiGLU's three projections are why they exceed the textbook figure.
- Activations, SMP's implementation (tsm.transform: Transformer Engine layers with flash attention) cannot
  run on a CPU, so its figure is an ESTIMATE: Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models", equation 1 without the 5*a*s/h score term, 34 bytes per
  s*b*h, divided by t under tensor (sequence) parallelism; a mixture of experts adds the MLP's 19 for
  each further expert a token is routed to.
  With full activation checkpointing only each layer's input is kept (2 bytes per s*b*h, measured for
  reentrant checkpointing), plus one layer recomputed at a time; with offloading only
  `loading_horizon` layer inputs stay on the GPU (SMP's offloading: activation_loading_horizon; PyTorch's
  offload wrapper: the one layer backward has reached). Context parallelism splits the sequence,
  so s becomes s/cp.
- Logits and loss: the peak bytes per logit (b*s*V) of the loss's forward and backward, MEASURED on CPU by
  tools/activation_measure.py (`loss_bytes_per_logit`: the allocator's peak, kernels' temporaries
  included). The entry script takes the model's own loss (transformers' ForCausalLMLoss, as AWS's
  train_lib.py does): bf16 logits, their fp32 upcast, a shifted fp32 copy and the fp32 log-softmax are
  alive at once, 14 bytes; cross_entropy on labels shifted by the loader (torchtitan) peaks at 12 in
  backward, and torch's vocabulary-parallel loss_parallel at 16. Split over t (vocabulary-parallel) and
  cp. The LM head also keeps its bf16 input for backward, the whole sequence under sequence parallelism.
  With activation checkpointing the loss and the backward's recomputed layer never coexist, so the peak
  counts the larger of the two.
- Sequence parallelism under TP: the checkpointed layer inputs are split over t (above). A recomputed
  layer keeps Korthikanti's 34/t when its column-parallel linears all-gather their input again in
  backward (Transformer Engine, SMP's layers); DTensor's sequence parallelism (torchtitan) saves the two
  gathered bf16 inputs (attention's and the MLP's), 4 bytes per s*b*h of the whole sequence.
- Optimizer step: PyTorch's multi-tensor (foreach) AdamW, the default on GPUs, allocates one fp32 temporary
  per local parameter (the square root of the second moment, torch/optim/adam.py `_multi_tensor_adam`):
  4 bytes per sharded parameter, an estimate. It happens after backward has freed the activations,
  so the peak is the larger of the forward/backward transient and this one.
- Framework: the CUDA context and NCCL/SMDDP buffers (about 1.1 GB measured on A100/H100 nodes by
  PyTorch users; a constant here) and allocator fragmentation (10% of the peak phase's transient memory).
Figures are GiB and are called GB in the output, like the GPUs' nominal "40 GB".

Host memory per instance (`host_estimate`), the larger of two moments, in GiB:
- Building the model: without delayed parameter init every rank of the instance builds the whole model
  in fp32 (4 bytes per parameter), and tsm.transform builds SMP's copy (its tensor-parallel slice) while
  the Hugging Face model is still alive, so a transformed rank holds 1 + 1/t copies at its peak. With
  delayed init the parameters stay on the meta device; a pretrained start loads them on rank 0 only
  (AWS's train_lib.py: `create_model` with `pretrained_model_weights` on rank 0, `init_empty_weights`
  elsewhere), and without the transform the script keeps a clone of rank 0's state for the broadcast.
- The final export (`output.save_final_model`): `full` gathers the fp32 state dict on rank 0
  (FSDP's FULL_STATE_DICT with rank0_only and offload_to_cpu, as AWS's checkpoints.py `_save_full`
  does); `sharded` has every rank write its own shard with torch.distributed.checkpoint, whose file
  writer copies one tensor at a time to the host (`_SerialCpuLoader`).
The rest of each process (libraries, CUDA's host side, a few GiB per rank) is not counted.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.catalog.architecture import Architecture
from launcher.catalog.smp import INSTANCES
from launcher.core.frozen import freeze

GIB = float(1 << 30)
BYTES_PER_PARAM_STATE = 16
HALF = 2
ACT_BYTES_PER_SBH = 34      # SMP implementation: Korthikanti et al. 2022, eq. 1 without the score term (estimate)
MLP_BYTES_PER_SBH = 19      # the MLP's share of those 34 (its input, the 4h activation and its input, the mask);
                            # a mixture of experts keeps it once per expert a token is routed to (estimate)
# Hugging Face layers, bf16, sdpa attention, not checkpointed: measured on CPU with transformers 4.46.3 (the
# `local` extra's pin, inside every SMP image's range) and torch 2.13.0 by `python tools/activation_measure.py`
# (tests/test_memory.py re-measures them). transformers 5.24.0 gave mistral 49.09 and mixtral 85.55.
HF_ACT_BYTES_PER_SBH = {"llama": 45.56, "mistral": 49.59, "mixtral": 89.97, "gpt_neox": 36.06}
CKPT_BYTES_PER_SBH = 2      # a checkpointed layer's bf16 input: measured (reentrant checkpointing), every type
ADAM_STEP_BYTES_PER_PARAM = 4  # foreach AdamW's fp32 temporary per local parameter (estimate)
LOGIT_BYTES = 14            # measured: transformers' causal-LM loss, 2 bf16 + 4 upcast + 4 shifted + 4 log-softmax
LM_HEAD_INPUT_BYTES_PER_SBH = 2   # the LM head's bf16 input, kept for backward (the whole sequence under SP)
SP_GATHERED_BYTES_PER_SBH = 4     # DTensor SP: the gathered inputs of attention's and the MLP's linears (bf16)
CUDA_CONTEXT_GB = 1.1
FRAGMENTATION = 0.10
FP32 = 4                    # bytes of an fp32 parameter: how ranks build, hold and export the model on the host


@dataclass(frozen=True)
class ParallelLayout:
    """The parallel layout (sharding, tensor, context and expert degrees) and step shape an estimate is for."""

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
    smp_implementation: bool = True  # tsm.transform replaced the Hugging Face layers
    delayed_param_init: bool = True  # parameters start on the meta device (host memory only)
    pretrained: bool = False         # rank 0 loads pretrained weights (host memory only)
    final_export: str = "none"       # output.save_final_model resolved: none | sharded | full
    loss_bytes_per_logit: float = LOGIT_BYTES  # the loss implementation's measured peak per logit
    sp_saves_gathered_inputs: bool = False     # under TP, a layer keeps its all-gathered inputs (DTensor SP)


@dataclass(frozen=True)
class HostMemoryEstimate:
    """Peak host (CPU) memory of the busiest instance, GiB, and which moment it is in (None: no moment holds any
    of the model there, as with delayed parameter init and no final export)."""

    per_instance_gib: float
    capacity_gib: float
    breakdown: Mapping[str, float]
    peak_phase: str | None = "model build"

    def __post_init__(self) -> None:
        object.__setattr__(self, "breakdown", freeze(self.breakdown))

    @property
    def fits(self) -> bool:
        return self.per_instance_gib <= self.capacity_gib

    def to_dict(self) -> dict[str, Any]:
        return {"per_instance_gib": round(self.per_instance_gib, 1), "capacity_gib": self.capacity_gib,
                "fits": self.fits, "peak_phase": self.peak_phase,
                "breakdown": {k: round(v, 1) for k, v in self.breakdown.items()}}


@dataclass(frozen=True)
class MemoryEstimate:
    per_gpu_gb: float
    capacity_gb: float
    breakdown: Mapping[str, float]  # read-only, like `sources`
    peak_phase: str = "forward/backward"
    sources: Mapping[str, str] | None = None
    host: HostMemoryEstimate | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "breakdown", freeze(self.breakdown))
        object.__setattr__(self, "sources", freeze(self.sources))

    @property
    def fits(self) -> bool:
        return self.per_gpu_gb <= self.capacity_gb

    @property
    def utilisation(self) -> float:
        return self.per_gpu_gb / self.capacity_gb

    def to_dict(self) -> dict[str, Any]:
        return {"per_gpu_gb": round(self.per_gpu_gb, 2), "capacity_gb": self.capacity_gb, "fits": self.fits,
                "peak_phase": self.peak_phase,
                "breakdown": {k: round(v, 2) for k, v in self.breakdown.items()},
                "sources": dict(self.sources or {}),
                "host": self.host.to_dict() if self.host else None}


def model_states(arch: Architecture, lay: ParallelLayout) -> float:
    """Sharded weights, gradients and AdamW moments, in bytes (ZeRO's 16 bytes per parameter)."""
    expert = 0
    if arch.num_experts > 1:
        expert = arch.num_layers * (arch.layer_parameters() - arch.layer_parameters(experts=0))
    dense = arch.parameters - expert
    per_rank = dense / (lay.shard_degree * lay.tensor_parallel)
    per_rank += expert / (lay.shard_degree * lay.tensor_parallel * lay.expert_parallel)
    return BYTES_PER_PARAM_STATE * per_rank


def gathered_units(arch: Architecture, lay: ParallelLayout) -> float:
    """16-bit parameters FSDP holds unsharded: two layer units (current + prefetched), one unit's
    unsharded gradient, and the root unit. Nothing is gathered when nothing is sharded."""
    if lay.shard_degree <= 1:
        return 0.0
    experts_on_rank = max(1, arch.num_experts // lay.expert_parallel) if arch.num_experts > 1 else None
    layer = arch.layer_parameters(experts=experts_on_rank) / lay.tensor_parallel
    root = (arch.embedding_parameters + arch.hidden_width) / lay.tensor_parallel
    return HALF * (3 * layer + root)


def layer_bytes_per_sbh(arch: Architecture, lay: ParallelLayout) -> float:
    """What one un-checkpointed layer keeps, per s*b*h: measured for HF layers, estimated for SMP's."""
    if not lay.smp_implementation:
        return HF_ACT_BYTES_PER_SBH[arch.type]
    routed = arch.num_experts_per_tok if arch.num_experts > 1 else 1
    return ACT_BYTES_PER_SBH + (routed - 1) * MLP_BYTES_PER_SBH


def _sbh(arch: Architecture, lay: ParallelLayout) -> float:
    return lay.seq_length / lay.context_parallel * lay.batch_size * arch.hidden_width


def layer_activations(arch: Architecture, lay: ParallelLayout) -> float:
    """One layer's activations while it runs (or is recomputed) with autograd recording."""
    full = layer_bytes_per_sbh(arch, lay) * _sbh(arch, lay) / lay.tensor_parallel
    if lay.tensor_parallel > 1 and lay.sp_saves_gathered_inputs:
        full += SP_GATHERED_BYTES_PER_SBH * _sbh(arch, lay)
    return full


def kept_activations(arch: Architecture, lay: ParallelLayout) -> float:
    """What the layers keep for backward once forward is done: every layer's activations without
    checkpointing, else the checkpointed inputs (only the loading horizon's when offloading)."""
    if not lay.activation_checkpointing:
        return arch.num_layers * layer_activations(arch, lay)
    kept = min(arch.num_layers, lay.loading_horizon) if lay.activation_offloading else arch.num_layers
    return kept * CKPT_BYTES_PER_SBH * _sbh(arch, lay) / lay.tensor_parallel


def activations(arch: Architecture, lay: ParallelLayout) -> float:
    """Kept activations plus, with checkpointing, the one layer recomputed at a time."""
    recomputed = layer_activations(arch, lay) if lay.activation_checkpointing else 0.0
    return kept_activations(arch, lay) + recomputed


def logits(arch: Architecture, lay: ParallelLayout) -> float:
    """The loss's peak over the (t-, cp-split) logits, plus the LM head's kept input."""
    loss = lay.loss_bytes_per_logit * lay.batch_size * lay.seq_length * arch.vocab_size / (
        lay.tensor_parallel * lay.context_parallel)
    return loss + LM_HEAD_INPUT_BYTES_PER_SBH * _sbh(arch, lay)


def forward_backward(arch: Architecture, lay: ParallelLayout) -> float:
    """The step's transient peak: gathered parameters and kept activations, plus the loss; with
    checkpointing the recomputed layer comes after the loss's backward, so the larger of the two."""
    kept = kept_activations(arch, lay)
    if lay.activation_checkpointing:
        return gathered_units(arch, lay) + kept + max(layer_activations(arch, lay), logits(arch, lay))
    return gathered_units(arch, lay) + kept + logits(arch, lay)


def optimizer_step(arch: Architecture, lay: ParallelLayout) -> float:
    """The AdamW step's temporary: 4 bytes per parameter this rank holds (a quarter of its model states)."""
    return model_states(arch, lay) * ADAM_STEP_BYTES_PER_PARAM / BYTES_PER_PARAM_STATE


def sources(lay: ParallelLayout) -> dict[str, str]:
    """Which figures were measured on CPU and which are estimates, for `plan` to say."""
    if lay.smp_implementation:
        act = "estimate: Korthikanti et al. 2022 for SMP's Transformer Engine layers (not runnable on CPU)"
    else:
        act = "measured on CPU: autograd's saved tensors of the transformers layer class (bf16, sdpa)"
    if lay.activation_checkpointing:
        act += "; checkpointed layer inputs measured on CPU"
    return {
        "model_states": "estimate: 16 bytes per parameter (ZeRO, mixed-precision AdamW)",
        "gathered_params": "estimate: FSDP holds two layers and one layer's gradient unsharded, plus the root",
        "activations": act,
        "logits_and_loss": (f"measured on CPU: {lay.loss_bytes_per_logit:g} bytes per logit at the loss's peak "
                            "(transformers' causal-LM loss), plus the LM head's input; with checkpointing the peak "
                            "counts the larger of the loss and the recomputed layer"),
        "optimizer_step": "estimate: foreach AdamW's fp32 temporary, 4 bytes per local parameter",
        "framework": "estimate: CUDA context and collectives 1.1 GB plus 10% fragmentation",
    }


def build_copies(smp_implementation: bool, tensor_parallel: int) -> float:
    """fp32 copies of the whole model one rank holds while it builds it without delayed init: its own,
    plus tsm.transform's tensor-parallel slice made while the Hugging Face model is alive."""
    return 1.0 + (1.0 / tensor_parallel if smp_implementation else 0.0)


def host_build_bytes(arch: Architecture, lay: ParallelLayout) -> float:
    """The busiest instance's host memory while the ranks build the model."""
    copies = build_copies(lay.smp_implementation, lay.tensor_parallel)
    if lay.pretrained:  # rank 0 alone holds weights; the script clones them for the broadcast without the transform
        return FP32 * arch.parameters * (copies if lay.smp_implementation else 2.0)
    if lay.delayed_param_init:
        return 0.0
    return INSTANCES[lay.instance_type].gpus * FP32 * arch.parameters * copies


def host_export_bytes(arch: Architecture, lay: ParallelLayout) -> float:
    """The busiest instance's host memory while the final model is written."""
    if lay.final_export == "full":
        return FP32 * arch.parameters  # rank 0 gathers every fp32 weight (offload_to_cpu)
    if lay.final_export == "sharded":  # each rank copies one tensor of its own shard to the host at a time
        largest = arch.hidden_width * max(arch.vocab_size, arch.intermediate_size)
        return INSTANCES[lay.instance_type].gpus * FP32 * largest / (lay.shard_degree * lay.tensor_parallel)
    return 0.0


def host_estimate(arch: Architecture, lay: ParallelLayout) -> HostMemoryEstimate:
    """Peak host memory of the busiest instance: model build or final export, whichever is larger."""
    parts = {"model_build": host_build_bytes(arch, lay) / GIB, "final_export": host_export_bytes(arch, lay) / GIB}
    phase: str | None = "model build" if parts["model_build"] >= parts["final_export"] else "final export"
    if not any(parts.values()):
        phase = None  # a step that is off (the export) or holds nothing there (delayed init) is never named
    return HostMemoryEstimate(per_instance_gib=max(parts.values()),
                              capacity_gib=INSTANCES[lay.instance_type].host_memory_gib,
                              breakdown=parts, peak_phase=phase)


def estimate(arch: Architecture, lay: ParallelLayout) -> MemoryEstimate:
    """Peak memory per GPU with a breakdown (GB); compare with the GPU's capacity.

    The peak is model states plus the larger of two phases' transients: forward/backward (gathered
    parameters, kept activations, and the loss or the recomputed layer: `forward_backward`) or the optimizer
    step (AdamW's temporary), plus the framework.
    """
    parts = {
        "model_states": model_states(arch, lay) / GIB,
        "gathered_params": gathered_units(arch, lay) / GIB,
        "activations": activations(arch, lay) / GIB,
        "logits_and_loss": logits(arch, lay) / GIB,
        "optimizer_step": optimizer_step(arch, lay) / GIB,
    }
    step = forward_backward(arch, lay) / GIB
    phase, transient = ("forward/backward", step) if step >= parts["optimizer_step"] else (
        "optimizer step", parts["optimizer_step"])
    parts["framework"] = CUDA_CONTEXT_GB + FRAGMENTATION * transient
    return MemoryEstimate(per_gpu_gb=parts["model_states"] + transient + parts["framework"],
                          capacity_gb=INSTANCES[lay.instance_type].gpu_memory_gb, breakdown=parts,
                          peak_phase=phase, sources=sources(lay), host=host_estimate(arch, lay))
