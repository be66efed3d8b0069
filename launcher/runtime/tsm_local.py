"""A stand-in for `torch.sagemaker` (SMP v2) when the library is not installed: the local CPU run.

It provides the names the entry script uses (init, state, transform, is_initialized, clip_grad_norm_,
DelayedParamIniter, the layer classes TransformerLayer, MultiheadAttention and MoELayer, te_checkpoint) and owns
the layout SMP would impose:
- transform() leaves each decoder layer as a TransformerLayer (SMP's transformed model holds its own
  TransformerLayer in their place, MoE models' too), its attention as a MultiheadAttention (Transformer Engine's
  class under SMP) and a mixture-of-experts block as a MoELayer, so the script wraps and checkpoints
  the same classes it does under SMP;
- ranks are grouped as SMP groups them: the ranks of one tensor-parallel group are consecutive
  (tp_rank = rank % tp), so a data-parallel rank is rank // tp, as AWS's examples compute it;
- FSDP runs over the ranks holding the same tensor-parallel slice, with an explicit (replicate, shard)
  device mesh, because FSDP's default hybrid groups silently become NO_SHARD on a CPU;
- tensor parallelism is emulated on gloo: transform() splits each attention and MLP projection
  Megatron-style (column- then row-parallel), so every TP rank holds its own slice under the same
  parameter name, the forward pass all-reduces over the TP group, and clip_grad_norm_ counts the
  slices of every TP rank and the replicated parameters once, as SMP's does.
Context and expert parallelism need SMP's kernels; asking for them here is an error, never a silent
degree of 1. Where $SMP_LAUNCH_SMP_RELEASE names an SMP release before 2.5.0, tsm.state has no
context-parallel attributes and there is no asynchronous save, as that release has neither: a script
reading them fails here as on its image.
SMP's asynchronous checkpointing (torch.sagemaker.distributed.checkpoint: state_dict_saver.async_save,
state_dict_loader.load, async_utils.AsyncCallsQueue) is stood in for by `async_save`, `load_checkpoint` and
`AsyncCallsQueue`, on PyTorch's own DCP async_save: the shards are staged in host memory before it returns
and written by a thread, over a gloo group of the same ranks so that the writes' collectives never meet
training's. Each refuses a coordinator_rank other than the group's lowest global rank, the one AWS passes.
"""
import contextlib
import json
import os
import sys
from types import SimpleNamespace

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

STAND_IN = True  # the entry script tells this module from SMP by it
UNSUPPORTED = ("context_parallel_degree", "expert_parallel_degree")
CONTEXT_PARALLEL_SINCE = (2, 5, 0)  # SMP's release notes: context parallelism came with SMP 2.5.0
ASYNC_SAVE_SINCE = (2, 5, 0)  # and asynchronous checkpoint saves
# Per Hugging Face model type: the projections split by output rows (column-parallel) and by input
# columns (row-parallel). Mixtral's experts (Linear w1/w2/w3 in transformers 4, fused 3-D tensors in 5)
# stay whole.
TP_PLAN = {
    "llama": (("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"), ("o_proj", "down_proj")),
    "mistral": (("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"), ("o_proj", "down_proj")),
    "mixtral": (("q_proj", "k_proj", "v_proj"), ("o_proj",)),
    "gpt_neox": (("query_key_value", "dense_h_to_4h"), ("dense", "dense_4h_to_h")),
}

# The attention module holds these projections; transformers 4.x's reshapes its q/k/v and its output by
# the widths it stored at construction (5.x's infer them from the tensors), so a TP rank's copy of them
# counts its own heads.
ATTENTION_INPUTS = ("q_proj", "query_key_value")
ATTENTION_WIDTHS = ("num_heads", "num_key_value_heads", "num_attention_heads", "hidden_size")

state = SimpleNamespace()
_initialized = False


def _load_config(config):
    """The SMP parameters: the argument, $SMP_CONFIG_JSON (JSON text or a file), or distribution.json here."""
    if isinstance(config, dict):
        return dict(config)
    source = config or os.environ.get("SMP_CONFIG_JSON")
    if source is None:
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distribution.json")
        with open(here, encoding="utf-8") as f:
            return json.load(f)["smdistributed"]["modelparallel"]["parameters"]
    if source.lstrip().startswith("{"):
        return json.loads(source)
    with open(source, encoding="utf-8") as f:
        return json.load(f)


class Ranker:
    """SMP's rank arithmetic for a world of (replicate, shard, tp) with tp innermost."""

    def __init__(self, world, tp, shard):
        self.world, self.tp, self.shard = world, tp, shard

    def get_tp_rank(self, rank):
        return rank % self.tp

    def get_dp_rank(self, rank):
        return rank // self.tp

    def get_rep_rank(self, rank):
        """Which copy of the sharded state this rank holds: 0 for the ranks that write checkpoints."""
        return self.get_dp_rank(rank) // self.shard if self.shard > 1 else 0

    def get_rep_groups(self):
        """The ranks holding the same shard of the same TP slice."""
        groups: dict[tuple[int, int], list[int]] = {}
        for rank in range(self.world):
            key = (self.get_tp_rank(rank), self.get_dp_rank(rank) % self.shard if self.shard > 1 else rank)
            groups.setdefault(key, []).append(rank)
        return sorted(groups.values())


def init(config=None):
    """Mirror `tsm.init`: read the SMP parameters once the process group exists, and build the groups."""
    global _initialized
    if not dist.is_initialized():
        raise RuntimeError("tsm_local.init() needs torch.distributed.init_process_group() first")
    params = _load_config(config)
    for key in UNSUPPORTED:
        if int(params.get(key, 1)) > 1:
            raise RuntimeError(
                f"{key}={params[key]} needs SMP v2 on GPUs; the local run cannot run it. "
                "`smp-launch submit --local` runs with degree 1 and reports it as not exercised.")
    world = dist.get_world_size()
    rank = dist.get_rank()
    tp = int(params.get("tensor_parallel_degree", 1))
    if tp < 1 or world % tp:
        raise RuntimeError(f"tensor_parallel_degree {tp} must divide the local world size {world}")
    dp = world // tp
    shard = int(params.get("hybrid_shard_degree", 0)) or dp
    if shard > dp or dp % shard:
        raise RuntimeError(f"hybrid_shard_degree {shard} must divide the local data-parallel size {dp} "
                           f"(world {world} / tensor parallel degree {tp})")
    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    mesh, dp_mesh, tp_group = None, None, None
    if tp > 1:
        from torch.distributed.device_mesh import init_device_mesh

        full = init_device_mesh(device_type, (dp // shard, shard, tp), mesh_dim_names=("replicate", "shard", "tp"))
        mesh = full["replicate", "shard"] if shard > 1 else None
        dp_mesh = full["replicate"] if shard == 1 else None
        tp_group = full["tp"].get_group()
    elif shard > 1:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device_type, (world // shard, shard), mesh_dim_names=("replicate", "shard"))
    ranker = Ranker(world, tp, shard)
    state.__dict__.update(
        rank=rank, world_size=world, local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        hybrid_shard_degree=shard, device_mesh=mesh, dp_mesh=dp_mesh, ranker=ranker,
        tensor_parallel_degree=tp, tp_size=tp, tp_rank=ranker.get_tp_rank(rank), tp_process_group=tp_group,
        context_parallel_degree=1, cp_size=1, cp_rank=0,
        expert_parallel_degree=1, ep_size=1, ep_rank=0,
        sm_activation_offloading=bool(params.get("sm_activation_offloading", True)),
        activation_loading_horizon=int(params.get("activation_loading_horizon", 2)),
        world_process_group=dist.group.WORLD, tp_partition={}, get_rng_state_tracker=_rng_state_tracker,
    )
    release = os.environ.get("SMP_LAUNCH_SMP_RELEASE")
    if release and tuple(int(p) for p in release.split(".")) < CONTEXT_PARALLEL_SINCE:
        for name in ("context_parallel_degree", "cp_size", "cp_rank"):
            state.__dict__.pop(name, None)
    _initialized = True
    if rank == 0:
        layout = f"(replicate {dp // shard}, shard {shard}, tp {tp})" if tp > 1 else (
            f"(replicate {world // shard}, shard {shard})" if mesh else "none")
        print(f"LOCAL RUN: torch.sagemaker is not installed; tsm_local stands in for it "
              f"(world {world}, hybrid shard degree {shard}, tensor parallel degree {tp}"
              f"{' emulated on gloo' if tp > 1 else ''}, context/expert degree 1, {device_type} device mesh {layout})",
              file=sys.stderr, flush=True)
    return state


def _rng_state_tracker():
    """SMP's tsm.state.get_rng_state_tracker: Transformer Engine's checkpoint asks it for the TP-parallel RNG
    states; the stand-in has none beyond PyTorch's own, which non-reentrant checkpointing restores itself."""
    return None


def is_initialized():
    return _initialized


def fsdp_arguments(strategy):
    """FSDP's process groups as SMP sets them for this rank: its TP slice's data-parallel ranks only."""
    from torch.distributed.fsdp import ShardingStrategy

    if state.hybrid_shard_degree == 1:
        out = {"sharding_strategy": ShardingStrategy.NO_SHARD}
        if state.dp_mesh is not None:
            out["device_mesh"] = state.dp_mesh
        return out
    return {"sharding_strategy": strategy, "device_mesh": state.device_mesh} if state.device_mesh else {}


class _CopyToTensorParallel(torch.autograd.Function):
    """Identity forward; the input's gradient is summed over the TP group (each rank saw part of it)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTensorParallel(torch.autograd.Function):
    """Sum of the ranks' partial outputs forward; the gradient passes through unchanged."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous().clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class TensorParallelLinear(nn.Module):
    """This rank's slice of a Linear: `column` keeps out_features/tp output rows, `row` in_features/tp inputs."""

    def __init__(self, linear, style, tp_size, tp_rank, group):
        super().__init__()
        self.style, self.tp_size, self.tp_rank, self.group = style, tp_size, tp_rank, group
        self.out_features, self.in_features = linear.out_features, linear.in_features
        dim = 0 if style == "column" else 1
        if linear.weight.shape[dim] % tp_size:
            raise RuntimeError(f"cannot split a {tuple(linear.weight.shape)} projection {tp_size} ways")
        self.weight = nn.Parameter(self._slice(linear.weight.detach(), dim).clone())
        bias = linear.bias
        if bias is None:
            self.bias = None
        elif style == "column":
            self.bias = nn.Parameter(self._slice(bias.detach(), 0).clone())
        else:
            self.bias = nn.Parameter(bias.detach().clone())

    def _slice(self, tensor, dim):
        size = tensor.shape[dim] // self.tp_size
        return tensor.narrow(dim, self.tp_rank * size, size)

    def sharded_parameters(self):
        """The parameters that differ per TP rank (a row-parallel bias is replicated)."""
        return [self.weight] + ([self.bias] if self.bias is not None and self.style == "column" else [])

    def init_from_full(self, materialise):
        """Initialise the full-size Linear as the model would (`materialise` takes it on the meta device) and
        keep this rank's slice: every rank draws the same random numbers, so replicated parameters stay
        equal and the slices tile one full matrix."""
        full = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None, device="meta")
        materialise(full)
        with torch.no_grad():
            dim = 0 if self.style == "column" else 1
            self.weight.copy_(self._slice(full.weight, dim))
            if self.bias is not None:
                self.bias.copy_(self._slice(full.bias, 0) if self.style == "column" else full.bias)

    def forward(self, x):
        if self.style == "column":
            return F.linear(_CopyToTensorParallel.apply(x, self.group), self.weight, self.bias)
        out = _ReduceFromTensorParallel.apply(F.linear(x, self.weight), self.group)
        return out + self.bias if self.bias is not None else out


class TransformerLayer(nn.Module):
    """SMP's torch.sagemaker.tensor_parallel.transformer.TransformerLayer, as a class the stand-in's transformed
    decoder layers are instances of (their own class is kept as the first base, so they run unchanged)."""


class MultiheadAttention(nn.Module):
    """Transformer Engine's transformer_engine.pytorch.attention.MultiheadAttention, the attention of SMP's layer."""


class MoELayer(nn.Module):
    """SMP's torch.sagemaker.moe.moe_layer.MoELayer, the mixture-of-experts block of SMP's MoE layer."""


_MARKED: dict[tuple[type, type], type] = {}


def _mark(module, marker):
    """Make module an instance of marker too: a subclass of its own class and marker, with the same name, so its
    parameters, forward and state-dict keys stay Hugging Face's."""
    cls = type(module)
    if isinstance(module, marker):
        return
    key = (cls, marker)
    if key not in _MARKED:
        _MARKED[key] = type(cls.__name__, (cls, marker), {"__module__": cls.__module__,
                                                          "__qualname__": cls.__qualname__})
    module.__class__ = _MARKED[key]


def _mark_layers(model):
    """The decoder layers (the entries of the model's `layers` list), their attention and their MoE block."""
    for name, module in model.named_modules():
        if not (isinstance(module, nn.ModuleList) and name.rsplit(".", 1)[-1] == "layers"):
            continue
        for layer in module:
            _mark(layer, TransformerLayer)
            for child_name, child in layer.named_children():
                if child_name in ("self_attn", "attention"):
                    _mark(child, MultiheadAttention)
                elif "SparseMoe" in type(child).__name__:
                    _mark(child, MoELayer)


def te_checkpoint(function, *args, distribute_saved_activations=False, get_rng_state_tracker=None, tp_group=None,
                  use_reentrant=True, **kwargs):
    """Transformer Engine's checkpoint (transformer_engine.pytorch.checkpoint) as far as a CPU goes: PyTorch's,
    reentrant or not as asked. Its RNG tracker and TP group matter only for distributed saved activations."""
    from torch.utils.checkpoint import checkpoint

    return checkpoint(function, *args, use_reentrant=use_reentrant, **kwargs)


def _broadcast_from_rank0(model):
    """SMP's load_state_dict_from_rank0: rank 0's real weights reach every rank before the split."""
    device = next((t.device for t in model.parameters() if not t.is_meta), torch.device("cpu"))
    for module in model.modules():
        if any(t.is_meta for t in (*module.parameters(recurse=False), *module.buffers(recurse=False))):
            module.to_empty(device=device, recurse=False)
    with torch.no_grad():
        for tensor in (*model.parameters(), *model.buffers()):
            dist.broadcast(tensor.data, src=0)


def _split_attention_widths(attention, name, tp):
    """This rank's share of the head counts and widths the attention module keeps as plain integers."""
    for attr in ATTENTION_WIDTHS:
        value = getattr(attention, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            if value % tp:
                raise RuntimeError(f"{name}.{attr}={value} cannot be split {tp} ways for tensor parallelism")
            setattr(attention, attr, value // tp)


def transform(model, device=None, dtype=None, config=None, load_state_dict_from_rank0=False, **kwargs):
    """Leave SMP's layer classes in place of the decoder layers (see _mark_layers), then split the model's
    projections across the TP group (none at tensor parallel degree 1)."""
    if not _initialized:
        raise RuntimeError("call tsm_local.init() before transform()")
    if load_state_dict_from_rank0 and dist.get_world_size() > 1:
        _broadcast_from_rank0(model)
    _mark_layers(model)
    if state.tp_size == 1:
        return model
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in TP_PLAN:
        raise RuntimeError(f"tensor parallelism is not emulated for model type {model_type!r}")
    column, row = TP_PLAN[model_type]
    replacements = []
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(module, nn.Linear) and ".layers." in f".{name}" and leaf in (*column, *row):
            replacements.append((name, module, "column" if leaf in column else "row"))
    for name, module, style in replacements:
        parent_name, _, leaf = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, leaf, TensorParallelLinear(module, style, state.tp_size, state.tp_rank,
                                                   state.tp_process_group))
        if leaf in ATTENTION_INPUTS:
            _split_attention_widths(parent, parent_name, state.tp_size)
        state.tp_partition[f"{name}.weight"] = 0 if style == "column" else 1
        if module.bias is not None and style == "column":
            state.tp_partition[f"{name}.bias"] = 0
    return model


def _is_norm(module):
    """A normalisation layer, told by its class name as transformers 5's own `_init_weights` tells them
    (RMSNorm classes are custom per model and hold no initialiser of their own)."""
    name = type(module).__name__
    return "LayerNorm" in name or "RMSNorm" in name


class DelayedParamIniter:
    """SMP's DelayedParamIniter, locally: FSDP's param_init_fn gives each module that still has meta tensors
    the values the model's constructor would have given it (for a TP slice: the full matrix's, sliced).

    A module's constructor initialises it in three places, and this runs them in the same order:
    torch's own layers their `reset_parameters`; the model's `post_init` its `_init_weights`; and a
    custom layer its `__init__`, whose values accelerate's init_empty_weights throws away. transformers
    5's `_init_weights` covers its norm layers, 4.x's (the range the SMP images pin) does not: their
    RMSNorm weights are `torch.ones` in `__init__`. So a tensor nothing above wrote (seen by a NaN
    sentinel) gets the norm rule transformers 5 applies itself (weight 1, bias 0), and anything else
    is an error naming it rather than a run on uninitialised memory. Tensors the constructor already
    built on a real device (buffers, under include_buffers=False) keep their values."""

    def __init__(self, model, init_method_using_config=None, verbose=False):
        self.model = model
        self.init_weights = model._init_weights
        self.device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else (
            torch.device("cpu"))

    def materialise(self, module):
        """Give `module`'s own meta tensors storage and their constructor's values; returns their names."""
        names = [n for n, t in (*module.named_parameters(recurse=False), *module.named_buffers(recurse=False))
                 if t.is_meta]
        if not names:
            return names
        module._apply(lambda t: torch.empty_like(t, device=self.device) if t.is_meta else t, recurse=False)
        fresh = {n: getattr(module, n) for n in names}
        with torch.no_grad():
            for tensor in fresh.values():
                if tensor.is_floating_point():
                    tensor.fill_(float("nan"))
            resets = callable(getattr(module, "reset_parameters", None))
            if resets:
                module.reset_parameters()
            self.init_weights(module)
            for name, tensor in fresh.items():
                unwritten = bool(tensor.isnan().any()) if tensor.is_floating_point() else not resets
                if not unwritten:
                    continue
                if _is_norm(module) and name in ("weight", "bias"):
                    tensor.fill_(1.0 if name == "weight" else 0.0)
                else:
                    raise RuntimeError(
                        f"{type(module).__name__}.{name}: neither reset_parameters nor the model's _init_weights "
                        "initialises it, so delayed init cannot give it its constructor's value")
        return names

    def get_param_init_fn(self):
        def param_init_fn(module):
            for sub in module.modules():
                if isinstance(sub, TensorParallelLinear):
                    if any(t.is_meta for t in sub.parameters(recurse=False)):
                        sub.to_empty(device=self.device, recurse=False)
                        sub.init_from_full(self.materialise)
                else:
                    self.materialise(sub)

        return param_init_fn

    def get_post_param_init_fn(self):
        return None

    @contextlib.contextmanager
    def validate_params_and_buffers_inited(self):
        yield
        meta = [n for n, t in (*self.model.named_parameters(), *self.model.named_buffers()) if t.is_meta]
        if meta:
            raise RuntimeError(f"still on the meta device after FSDP's init: {', '.join(meta[:3])}")


def _tensor_parallel_ids(model):
    return {id(p) for m in model.modules() if isinstance(m, TensorParallelLinear) for p in m.sharded_parameters()}


def clip_grad_norm_(model, max_norm, norm_type=2.0):
    """SMP's clip_grad_norm_: one total norm for the whole model on every rank. FSDP's own reduces over
    its group only, so under TP each TP rank would see a different norm. Here the squares of this rank's
    FSDP shard are summed over the FSDP group (not under NO_SHARD, whose ranks hold whole copies), the
    TP-sliced ones also over the TP group, and the replicated ones once."""
    from torch.distributed.fsdp import ShardingStrategy

    if float(norm_type) != 2.0:
        raise ValueError("the local stand-in clips by the 2-norm only")
    sliced_ids = _tensor_parallel_ids(model)
    grads = [(id(p), p.grad) for p in model.parameters() if p.grad is not None]
    sums = torch.zeros(2, dtype=torch.float64)
    for pid, grad in grads:
        sums[0 if pid in sliced_ids else 1] += grad.detach().double().pow(2).sum().cpu()
    group = getattr(model, "process_group", None)
    # NCCL carries CUDA tensors only: the sums travel on the GPU there, and come back for the arithmetic below.
    on = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else sums.device
    if group is not None and getattr(model, "sharding_strategy", None) != ShardingStrategy.NO_SHARD:
        moved = sums.to(on)
        dist.all_reduce(moved, group=group)
        sums = moved.cpu()
    if state.tp_size > 1:
        sliced = sums[:1].to(on)
        dist.all_reduce(sliced, group=state.tp_process_group)
        sums[0] = sliced.cpu()[0]
    total = sums.sum().sqrt()
    coef = float(max_norm) / (float(total) + 1e-6)
    if coef < 1.0:
        with torch.no_grad():
            for _, grad in grads:
                grad.mul_(coef)
    return total.float()


def full_model_state_dict(state_dict):
    """SMP gathers the TP slices of a full state dict; here the ranks of the first TP group (FSDP's
    rank-0s, which hold the gathered slices) concatenate them onto global rank 0."""
    if state.tp_size == 1 or state.ranker.get_dp_rank(dist.get_rank()) != 0:
        return state_dict
    merged = dict(state_dict)
    for name, dim in sorted(state.tp_partition.items()):
        local = state_dict[name].contiguous()
        parts = [torch.empty_like(local) for _ in range(state.tp_size)]
        dist.all_gather(parts, local, group=state.tp_process_group)
        merged[name] = torch.cat(parts, dim=dim)
    return merged


def _release():
    release = os.environ.get("SMP_LAUNCH_SMP_RELEASE")
    return tuple(int(p) for p in release.split(".")) if release else None


def _check_coordinator(process_group, coordinator_rank):
    """SMP's saver and loader take the coordinator as a global rank; AWS passes the group's lowest."""
    ranks = sorted(dist.get_process_group_ranks(process_group)) if process_group is not None else [0]
    if coordinator_rank != ranks[0]:
        raise RuntimeError(f"coordinator_rank {coordinator_rank} is not the lowest global rank of the process "
                           f"group {ranks}, the rank AWS's checkpoints.py and HyperPod adapter pass")
    return ranks


_IO_GROUPS: dict[tuple[int, ...], object] = {}


def _io_group(ranks):
    """A gloo group of the same ranks for the background writes (created once, by those ranks alone)."""
    key = tuple(ranks)
    if key not in _IO_GROUPS:
        _IO_GROUPS[key] = dist.new_group(list(key), backend="gloo", use_local_synchronization=True)
    return _IO_GROUPS[key]


class AsyncCallsQueue:
    """SMP's torch.sagemaker.distributed.checkpoint.async_utils.AsyncCallsQueue: the saves in flight."""

    def __init__(self):
        self.pending = []

    def maybe_finalize_async_calls(self, blocking=False, process_group=None):
        """Finish the saves in flight: with blocking, wait for every one, then meet the group's other ranks;
        without, finish only if every one is done already. Returns how many were finished."""
        if not blocking and not all(future.done() for future in self.pending):
            return 0
        done, self.pending = self.pending, []
        for future in done:
            future.result()
        if blocking and dist.is_initialized():
            dist.barrier(group=process_group)
        return len(done)


def async_save(state_dict, checkpoint_id=None, process_group=None, coordinator_rank=0, queue=None, **kwargs):
    """SMP's state_dict_saver.async_save, on PyTorch's DCP: returns once the state is staged in host memory."""
    import torch.distributed.checkpoint as dcp

    release = _release()
    if release and release < ASYNC_SAVE_SINCE:
        raise RuntimeError(f"SMP {os.environ['SMP_LAUNCH_SMP_RELEASE']} has no asynchronous save (SMP 2.5.0 and "
                           "later)")
    if queue is None:
        raise RuntimeError("async_save needs the AsyncCallsQueue that will finish it")
    ranks = _check_coordinator(process_group, coordinator_rank)
    group = _io_group(ranks) if process_group is not None else None
    queue.pending.append(dcp.async_save(state_dict, checkpoint_id=checkpoint_id, process_group=group))


def load_checkpoint(state_dict, checkpoint_id=None, process_group=None, coordinator_rank=0, **kwargs):
    """SMP's state_dict_loader.load, on PyTorch's DCP (this PyTorch reads its coordinator as the group's rank 0,
    the same process as the lowest global rank that SMP's loader is given)."""
    import torch.distributed.checkpoint as dcp

    _check_coordinator(process_group, coordinator_rank)
    dcp.load(state_dict, checkpoint_id=checkpoint_id, process_group=process_group)
