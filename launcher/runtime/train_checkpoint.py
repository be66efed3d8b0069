"""Sharded checkpoints with torch.distributed.checkpoint (DCP), laid out as AWS's SMP v2 examples do.

Layout: <dir>/step_00000500/ holds the DCP files and, once every rank has finished, a `.complete`
marker; a checkpoint without it (a job stopped mid-save) is never resumed from. Under tensor (or
expert) parallelism every TP rank holds a different slice under the same parameter name, and one DCP
save over the world would keep one of them: each TP/EP rank saves into its own sub-folder
(`tp{degree}-{tp_rank}`, `ep{degree}-{ep_rank}`), over the FSDP process group that holds its slice,
and only the replication-rank-0 ranks write (the other replicas hold the same shards). Every rank
loads its own sub-folder over the same group. SageMaker syncs <dir> (/opt/ml/checkpoints) to the
job's checkpoint S3 URI and restores it when a job restarts.
"""
import os
import re
import shutil
from dataclasses import dataclass

import torch
import torch.distributed as dist

MARKER = ".complete"
_STEP_DIR = re.compile(r"^step_(\d{8})$")


def step_dir(root, step):
    return os.path.join(root, f"step_{step:08d}")


@dataclass(frozen=True)
class Layout:
    """Where this rank's shards go and who writes them: from tsm.state and the FSDP model."""

    tp_degree: int = 1
    tp_rank: int = 0
    ep_degree: int = 1
    ep_rank: int = 0
    group: object = None  # the FSDP process group (None: the world)
    writer: bool = True   # replication rank 0


def shard_dir(root, step, layout):
    """This rank's folder of checkpoint `step`: per TP and EP rank when those degrees are above 1."""
    path = step_dir(root, step)
    if layout.tp_degree > 1:
        path = os.path.join(path, f"tp{layout.tp_degree}-{layout.tp_rank}")
    if layout.ep_degree > 1:
        path = os.path.join(path, f"ep{layout.ep_degree}-{layout.ep_rank}")
    return path


def complete_steps(root):
    """Steps of the complete checkpoints under root, oldest first."""
    if not os.path.isdir(root):
        return []
    steps = []
    for name in os.listdir(root):
        m = _STEP_DIR.match(name)
        if m and os.path.exists(os.path.join(root, name, MARKER)):
            steps.append(int(m.group(1)))
    return sorted(steps)


def latest_step(root):
    steps = complete_steps(root)
    return steps[-1] if steps else None


def prune(root, keep):
    """Delete all but the newest `keep` complete checkpoints, and any incomplete older ones."""
    steps = complete_steps(root)
    newest = steps[-1] if steps else None
    for step in steps[:-keep]:
        shutil.rmtree(step_dir(root, step), ignore_errors=True)
    for name in os.listdir(root) if os.path.isdir(root) else ():
        m = _STEP_DIR.match(name)
        if m and int(m.group(1)) not in steps and newest is not None and int(m.group(1)) < newest:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _state_dict_api():
    try:
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    except ImportError as exc:  # PyTorch < 2.2
        raise RuntimeError("sharded checkpoints need PyTorch 2.2 or newer "
                           "(torch.distributed.checkpoint.state_dict)") from exc
    return get_state_dict, set_state_dict


def state_dicts(model, optimizer):
    """The sharded model and optimizer state dicts, keyed by the model's own parameter names."""
    get_state_dict, _ = _state_dict_api()
    model_sd, optim_sd = get_state_dict(model, optimizer)
    return {"model": model_sd, "optimizer": optim_sd}


def save(root, step, model, optimizer, keep, layout):
    """Write checkpoint `step` (replication-rank-0 ranks, per TP/EP rank), mark it complete once every
    rank is done, and prune old ones (one pruner per host)."""
    import torch.distributed.checkpoint as dcp

    path = shard_dir(root, step, layout)
    state = state_dicts(model, optimizer)  # every rank: FSDP's state dicts are collective
    if layout.writer:
        dcp.save(state, checkpoint_id=path, process_group=layout.group)
    dist.barrier()
    if int(os.environ.get("LOCAL_RANK", 0)) == 0:
        top = step_dir(root, step)
        os.makedirs(top, exist_ok=True)
        with open(os.path.join(top, MARKER), "w", encoding="utf-8") as f:
            f.write(f"{step}\n")
        prune(root, keep)
    dist.barrier()
    return step_dir(root, step)


def load(root, step, model, optimizer, layout):
    """Load checkpoint `step` into the wrapped model and optimizer, in place: every rank reads its own
    TP/EP sub-folder over its FSDP group, replicas included."""
    import torch.distributed.checkpoint as dcp

    _, set_state_dict = _state_dict_api()
    state = state_dicts(model, optimizer)
    dcp.load(state, checkpoint_id=shard_dir(root, step, layout), process_group=layout.group)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])


def local_tensors(tree, prefix=""):
    """Each tensor in a (nested) state dict as this rank's local shard, keyed by its path."""
    out = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            out.update(local_tensors(value, f"{prefix}{key}/"))
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            out.update(local_tensors(value, f"{prefix}{i}/"))
    elif isinstance(tree, torch.Tensor):
        if hasattr(tree, "to_local"):
            tree = tree.to_local()
        elif hasattr(tree, "local_shards"):
            shards = tree.local_shards()
            tree = shards[0].tensor if shards else torch.empty(0)
        out[prefix.rstrip("/")] = tree.detach().clone()
    return out


def round_trip(root, step, model, optimizer, layout):
    """Local-run check: perturb every parameter and optimizer state, load checkpoint `step` back,
    and compare each local shard with what was saved, bit for bit, on every rank.
    Returns (equal on every rank, tensors compared on this rank)."""
    saved = local_tensors(state_dicts(model, optimizer))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
        for per_param in optimizer.state.values():
            for value in per_param.values():
                if isinstance(value, torch.Tensor):
                    value.add_(1.0)
    load(root, step, model, optimizer, layout)
    loaded = local_tensors(state_dicts(model, optimizer))
    equal = saved.keys() == loaded.keys() and all(
        saved[k].dtype == loaded[k].dtype and torch.equal(saved[k], loaded[k]) for k in saved)
    everywhere = torch.tensor([1 if equal else 0])
    dist.all_reduce(everywhere, op=dist.ReduceOp.MIN)
    return bool(everywhere.item()), len(saved)


def model_dir(root, layout):
    """This rank's folder of the final model export: per TP and EP rank like a checkpoint's."""
    path = root
    if layout.tp_degree > 1:
        path = os.path.join(path, f"tp{layout.tp_degree}-{layout.tp_rank}")
    if layout.ep_degree > 1:
        path = os.path.join(path, f"ep{layout.ep_degree}-{layout.ep_rank}")
    return path


def _model_state(model):
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return {"model": get_model_state_dict(model)}


def save_model(root, model, layout):
    """The final model, sharded: the replication-rank-0 ranks each write their own shard (DCP), so no rank
    gathers the model; the file writer copies one tensor at a time to the host. Returns this rank's folder."""
    import torch.distributed.checkpoint as dcp

    path = model_dir(root, layout)
    state = _model_state(model)  # every rank: FSDP's state dicts are collective
    if layout.writer:
        dcp.save(state, checkpoint_id=path, process_group=layout.group)
    dist.barrier()
    return path


def model_round_trip(path, model, layout):
    """Local-run check: perturb the parameters, load the export back and compare every local shard with
    what was saved, on every rank."""
    import torch.distributed.checkpoint as dcp

    saved = local_tensors(_model_state(model))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    state = _model_state(model)
    dcp.load(state, checkpoint_id=path, process_group=layout.group)
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    set_model_state_dict(model, state["model"])
    loaded = local_tensors(_model_state(model))
    equal = saved.keys() == loaded.keys() and all(torch.equal(saved[k], loaded[k]) for k in saved)
    everywhere = torch.tensor([1 if equal else 0])
    dist.all_reduce(everywhere, op=dist.ReduceOp.MIN)
    return bool(everywhere.item())
