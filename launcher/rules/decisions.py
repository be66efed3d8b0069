"""What `auto` settings and SMP's own defaults resolve to.

The plan, the rules, the memory model and the rendered entry script all read these, so they never
disagree. Sources: the SMP v2 reference (hybrid_shard_degree), the SMP v2 best practices (delayed
parameter init, SMDDP) and AWS's SMP v2 example scripts (use_smp_implementation, delayed_param).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from launcher.catalog.architecture import MODEL_TYPES
from launcher.catalog.smp import (
    ASYNC_CHECKPOINT_SINCE,
    CP_COMM_TYPE_SINCE,
    FRAMEWORKS,
    INSTANCES,
    OFFLOADING_CLIP_SINCE,
    SMP_PARAMETERS,
    carries,
    smp_parameters_taken,
)
from launcher.rules.memory import build_copies
from launcher.rules.topology import Topology
from launcher.spec.models import JobSpec

DELAYED_INIT_THRESHOLD = 60e9  # best practices: "above 60 billion parameters use delayed parameter initialization"
FP32_BYTES = 4
GIB = 1 << 30
# Hugging Face architectures tsm.transform converts (SMP v2 tensor-parallelism page: GPT-NeoX, Llama,
# Mistral, Mixtral); every model type smp-launch renders is one of them.
SMP_MODELS = MODEL_TYPES
# The architectures SMP runs context parallelism for (SMP v2 context-parallelism page: GPT-NeoX, Llama, Mistral).
CONTEXT_PARALLEL_MODELS = ("llama", "mistral", "gpt_neox")
# hybrid_shard_degree 0 with tensor_parallel_degree 1: SMP falls back to native FSDP, where HYBRID_SHARD
# shards within one node and "is equivalent to hybrid_shard_degree of 8" (SMP v2 reference).
NATIVE_HYBRID_SHARD_DEGREE = 8


@dataclass(frozen=True)
class Decisions:
    world_size: int
    hybrid_shard_degree: int      # effective: what the job really shards over, 0 resolved as SMP resolves it
    backend: str                  # smddp | nccl
    delayed_param_init: bool
    transform: bool               # the model runs SMP's implementation (tsm.transform)
    sharding_strategy: str        # the FSDP strategy the script asks for; SMP rewrites its groups
    shard_reason: str             # how hybrid_shard_degree became the effective degree
    delayed_reason: str           # why delayed parameter init is on or off
    backend_reason: str           # why the backend is the one it is
    smp_release: str              # the SMP library in the image the job runs on
    smp_parameters: tuple[str, ...]  # the SMP parameters the distribution sends
    offloading: str               # none | pytorch (PyTorch's offload wrapper) | smp (SMP's own offloading)
    grad_clip: str                # smp (torch.sagemaker.grad_norm.clip_grad_norm_) | fsdp (FSDP's own)
    clip_reason: str              # why that clip
    async_checkpoint: bool        # checkpoints saved with SMP's async_save, training going on meanwhile
    checkpoint_reason: str        # why they are saved the way they are
    cp_comm_type: str | None      # what the script passes tsm.transform as cp_comm_type (None: nothing)

    def to_dict(self) -> dict:
        return asdict(self)


def effective_shard_degree(spec: JobSpec, topology: Topology) -> int:
    """The degree the job shards over, as the SMP v2 reference defines hybrid_shard_degree.

    N > 0 is N. 0 with tensor_parallel_degree > 1: SMP picks the largest degree TP and the world
    allow. 0 with TP 1: native FSDP decides from the script's strategy; the script renders
    HYBRID_SHARD (as AWS's example scripts do), which shards over one node: 8 GPUs.
    """
    smp = spec.smp
    if smp.hybrid_shard_degree > 0:
        return smp.hybrid_shard_degree
    if smp.tensor_parallel_degree > 1:
        return max(1, topology.max_shard_degree)
    return min(topology.world_size, NATIVE_HYBRID_SHARD_DEGREE, topology.gpus_per_instance)


def shard_reason(spec: JobSpec, world: int, shard: int) -> str:
    smp = spec.smp
    if smp.hybrid_shard_degree > 0:
        return f"hybrid_shard_degree {shard} as set"
    if smp.tensor_parallel_degree > 1:
        return (f"hybrid_shard_degree 0 with tensor_parallel_degree {smp.tensor_parallel_degree}: SMP picks the "
                f"largest degree, world {world} // {smp.tensor_parallel_degree} = {shard}")
    where = f"({shard} GPUs), not over the {world} GPUs" if world > shard else f"(all {shard} GPUs of this job)"
    return (f"hybrid_shard_degree 0 with tensor_parallel_degree 1: SMP falls back to native PyTorch FSDP, and "
            f"the script's HYBRID_SHARD shards within each node {where}")


def tensor_parallel_only(spec: JobSpec, shard: int) -> bool:
    return shard == 1 and spec.smp.tensor_parallel_degree > 1


# AWS's SMP v2 fine-tuning notebooks set distributed_backend "nccl" (the training scripts default to smddp), and
# train_lib.py follows FSDP's sync_module_states broadcast with a barrier "to reduce extra memory usage with SMDDP
# backend after the broadcast":
# https://github.com/aws/amazon-sagemaker-examples/blob/2d519b52c3a2c2361f2b87f0d3de46fd6c0232a5/%20%20%20%20%20%20build_and_train_models/sm-distributed_model_parallel_v2/shared-scripts/train_lib.py
FINE_TUNING_NCCL = ("fine-tuning from pretrained weights: rank 0 broadcasts them with FSDP's sync_module_states, "
                    "after which SMDDP holds extra GPU memory (AWS's train_lib.py), so AWS's fine-tuning examples "
                    "run on NCCL")


# What backend auto's SMDDP on P4 rests on, and what speaks against it (SMP024): AWS's SMP v2 best practices and
# example scripts (distributed_backend defaults to smddp), and the SMP 2.8.0 image (PyTorch 2.5.1) still carries
# SMDDP 2.6.0; AWS's newest SMP code, the HyperPod training adapter v1.4.0, accepts "nccl" only (config_schemas.py),
# and awsome-distributed-training dropped its SMP and SMDDP test cases (commit 305a69b1, March 2025).
SMDDP_GROUNDS = ("SMDDP follows AWS's SMP v2 best practices and example scripts, and the PyTorch 2.5.1 image "
                 "(SMP 2.8.0) still carries SMDDP 2.6.0; AWS's newest SMP code, the SageMaker HyperPod training "
                 "adapter, runs NCCL only and AWS dropped its SMDDP test cases: set smp.backend: nccl to follow it")


def auto_backend(spec: JobSpec, shard: int) -> str:
    """SMDDP where its AllGather exists (P4) except tensor-parallel-only jobs and fine-tuning; NCCL elsewhere."""
    return "smddp" if not backend_blocker(spec, shard) else "nccl"


def backend_blocker(spec: JobSpec, shard: int) -> str | None:
    """Why SMDDP is not the backend auto picks, or None where it is."""
    instance = INSTANCES[spec.cluster.instance_type]
    if not instance.smddp:
        return f"SMDDP does not support {instance.name}"
    if tensor_parallel_only(spec, shard):
        return "tensor-parallel-only jobs must use NCCL"
    if spec.model.pretrained is not None:
        return FINE_TUNING_NCCL
    return None


def backend_reason(spec: JobSpec, shard: int) -> str:
    if spec.smp.backend != "auto":
        return f"backend {spec.smp.backend} as set"
    blocker = backend_blocker(spec, shard)
    return blocker or f"SMDDP's AllGather is available on {spec.cluster.instance_type}"


def smp_parameters_sent(spec: JobSpec) -> tuple[str, ...]:
    """The SMP parameters the distribution carries: those the image's SMP release takes, plus any the spec sets
    away from SMP's default (the advisor refuses those, naming the field, so the plan still shows them); never
    one left unset (random_seed: SMP has no default to send)."""
    taken = smp_parameters_taken(spec.framework.pytorch_version)
    smp = spec.smp
    return tuple(name for name, (default, _) in SMP_PARAMETERS.items()
                 if getattr(smp, name) is not None and (name in taken or getattr(smp, name) != default))


def needs_transform(spec: JobSpec) -> list[str]:
    """The features that only run on SMP's implementation."""
    smp = spec.smp
    needs = [f"{name} {d}" for name, d in (("tensor_parallel_degree", smp.tensor_parallel_degree),
                                            ("context_parallel_degree", smp.context_parallel_degree),
                                            ("expert_parallel_degree", smp.expert_parallel_degree)) if d > 1]
    if spec.training.precision == "fp8":
        needs.append("precision fp8")
    return needs


def uses_transform(spec: JobSpec) -> bool:
    """The model runs SMP's implementation (tsm.transform)."""
    return spec.model.architecture().type in SMP_MODELS and (
        spec.model.use_smp_implementation or bool(needs_transform(spec)))


def host_copies_gib(spec: JobSpec) -> float:
    """Host memory the ranks of one instance need to build the model in fp32 without delayed init,
    counting the copy tsm.transform makes while the Hugging Face model is alive."""
    instance = INSTANCES[spec.cluster.instance_type]
    copies = build_copies(uses_transform(spec), spec.smp.tensor_parallel_degree)
    return instance.gpus * copies * FP32_BYTES * spec.model.architecture().parameters / GIB


def _copies_text(spec: JobSpec) -> str:
    instance = INSTANCES[spec.cluster.instance_type]
    if not uses_transform(spec):
        return f"{instance.gpus} fp32 copies"
    tp = spec.smp.tensor_parallel_degree
    second = "a second one" if tp == 1 else f"a 1/{tp} slice"
    return f"{instance.gpus} fp32 copies and {second} each from tsm.transform"


def delayed_init(spec: JobSpec) -> tuple[bool, str]:
    setting = spec.smp.delayed_param_init
    if setting != "auto":
        return bool(setting), f"delayed_param_init {str(setting).lower()} as set"
    params = spec.model.architecture().parameters
    instance = INSTANCES[spec.cluster.instance_type]
    copies = host_copies_gib(spec)
    if params > DELAYED_INIT_THRESHOLD:
        return True, f"{params / 1e9:.1f}B parameters is above 60B"
    if copies > instance.host_memory_gib:
        return True, (f"{instance.gpus} ranks each building the model in fp32{_transform_note(spec)} need "
                      f"{copies:,.0f} GiB of host memory; {instance.name} has {instance.host_memory_gib:,} GiB")
    return False, (f"{params / 1e9:.1f}B parameters (60B or less) and {_copies_text(spec)} "
                   f"({copies:,.0f} GiB) fit the {instance.host_memory_gib:,} GiB of host memory")


def _transform_note(spec: JobSpec) -> str:
    return " (and tsm.transform's copy beside the Hugging Face model)" if uses_transform(spec) else ""


def offloading(spec: JobSpec) -> str:
    """Whose activation offloading runs: PyTorch's offload wrapper unless the spec asks for SMP's."""
    smp = spec.smp
    if not smp.activation_offloading:
        return "none"
    return "smp" if smp.sm_activation_offloading else "pytorch"


def clipping(spec: JobSpec, transform: bool) -> tuple[str, str]:
    """Which clip_grad_norm_ the script calls, and why. SMP's counts every tensor- and expert-parallel slice once;
    before SMP 2.8.0 it did not support activation offloading (release notes), and where there are no slices
    FSDP's own gives the same total norm, so the script takes FSDP's there. With slices the advisor refuses
    the combination (SMP103)."""
    if not transform:
        return "fsdp", "Hugging Face's model: FSDP's clip_grad_norm_ over the sharded parameters"
    smp = spec.smp
    release = FRAMEWORKS[spec.framework.pytorch_version].smp
    sliced = smp.tensor_parallel_degree > 1 or smp.expert_parallel_degree > 1
    if smp.activation_offloading and not sliced and not carries(spec.framework.pytorch_version,
                                                                   OFFLOADING_CLIP_SINCE):
        return "fsdp", (f"SMP {release}'s clip_grad_norm_ does not support activation offloading (fixed in SMP "
                        f"{OFFLOADING_CLIP_SINCE}); with no tensor- or expert-parallel slices FSDP's own clip "
                        "gives the same total norm")
    return "smp", "SMP's clip_grad_norm_: one total norm over every tensor- and expert-parallel slice"


def checkpoint_saving(spec: JobSpec) -> tuple[bool, str]:
    """Whether checkpoints are saved asynchronously (SMP's async_save, SMP 2.5.0 and later), and why."""
    setting = spec.training.async_checkpoint
    version = spec.framework.pytorch_version
    release = FRAMEWORKS[version].smp
    if setting is False:
        return False, "training.async_checkpoint false as set: every rank waits while its shards are written"
    if carries(version, ASYNC_CHECKPOINT_SINCE):
        how = "as set" if setting is True else "auto"
        return True, (f"{how}: SMP {release} saves asynchronously (torch.sagemaker.distributed.checkpoint "
                      "async_save): training goes on while each rank's shards are written")
    if setting is True:  # refused by the advisor (SMP104); the script would save blocking
        return False, (f"training.async_checkpoint true as set, but SMP {release} has no asynchronous save "
                       f"(SMP {ASYNC_CHECKPOINT_SINCE} and later)")
    return False, (f"auto: SMP {release} has no asynchronous save (SMP {ASYNC_CHECKPOINT_SINCE} and later), so every "
                   "rank waits while its shards are written")


def context_parallel_comm(spec: JobSpec, transform: bool) -> str | None:
    """The cp_comm_type the script passes tsm.transform: SMP 2.6.0's parameter (AWS's scripts pass it, p2p by
    default), for the models SMP runs context parallelism for; none on an older release, for other models or
    without SMP's implementation."""
    if (not transform or spec.model.architecture().type not in CONTEXT_PARALLEL_MODELS
            or not carries(spec.framework.pytorch_version, CP_COMM_TYPE_SINCE)):
        return None
    return spec.smp.cp_comm_type or "p2p"


def decide(spec: JobSpec, topology: Topology | None = None) -> Decisions:
    topology = topology or Topology.of(spec)
    world = topology.world_size
    shard = effective_shard_degree(spec, topology)
    smp = spec.smp
    backend = auto_backend(spec, shard) if smp.backend == "auto" else smp.backend
    delayed, why = delayed_init(spec)
    transform = uses_transform(spec)
    strategy = "NO_SHARD" if shard == 1 else "HYBRID_SHARD"
    clip, clip_why = clipping(spec, transform)
    saved_async, saved_why = checkpoint_saving(spec)
    return Decisions(world_size=world, hybrid_shard_degree=shard, backend=backend,
                     delayed_param_init=delayed, transform=transform, sharding_strategy=strategy,
                     shard_reason=shard_reason(spec, world, shard), delayed_reason=why,
                     backend_reason=backend_reason(spec, shard),
                     smp_release=FRAMEWORKS[spec.framework.pytorch_version].smp,
                     smp_parameters=smp_parameters_sent(spec), offloading=offloading(spec),
                     grad_clip=clip, clip_reason=clip_why, async_checkpoint=saved_async,
                     checkpoint_reason=saved_why, cp_comm_type=context_parallel_comm(spec, transform))
