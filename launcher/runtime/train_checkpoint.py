"""Sharded checkpoints with torch.distributed.checkpoint (DCP), laid out as AWS's SMP v2 examples do.

Layout: <dir>/step_00000500/ holds the DCP files and, once every rank has finished, a `.complete`
marker naming how the checkpoint was written (`sync` or `async`); a checkpoint without it (a job
stopped mid-save) is never resumed from. Under tensor (or expert) parallelism every TP rank holds a
different slice under the same parameter name, and one DCP save over the world would keep one of them:
each TP/EP rank saves into its own sub-folder (`tp{degree}-{tp_rank}`, `ep{degree}-{ep_rank}`), over
the FSDP process group that holds its slice, and only the replication-rank-0 ranks write (the other
replicas hold the same shards). Every rank loads its own sub-folder over the same group. SageMaker
syncs <dir> (/opt/ml/checkpoints) to the job's checkpoint S3 URI and restores it when a job restarts.

Two writers, each with the reader for what it wrote (a checkpoint is read back the way its marker
says it was written, so a job resumes from either kind):
- Blocking (`TorchWriter`): PyTorch's DCP. The coordinator of each save is the FSDP group's lowest
  global rank, the rank AWS's checkpoints.py (`get_coordinator_rank`) and its HyperPod adapter pass.
  A PyTorch whose DCP reads `coordinator_rank` as a rank within the group takes the group's own
  rank 0, which is that same process; an older one (SMP's images) is given it as AWS gives it.
- Asynchronous (`AsyncWriter`): SMP's torch.sagemaker.distributed.checkpoint (SMP 2.5.0 and later),
  as AWS's `_save_async_sharded` and the adapter's `SageMakerShardedCheckpointIO` call it:
  `async_save(..., process_group, coordinator_rank, queue)` returns once the shards are staged in host
  memory, and `queue.maybe_finalize_async_calls(blocking=True, process_group)` waits for the write. The
  marker is written only after that wait, on every host.
"""
import os
import re
import shutil
from dataclasses import dataclass

import torch
import torch.distributed as dist

MARKER = ".complete"
SYNC, ASYNC = "sync", "async"
_STEP_DIR = re.compile(r"^step_(\d{8})$")


def step_dir(root, step):
    return os.path.join(root, f"step_{step:08d}")


def lowest_rank(group):
    """The lowest global rank of a process group (None: the world): AWS's coordinator for saves and loads."""
    if group is None:
        return 0
    return min(dist.get_process_group_ranks(group))


@dataclass(frozen=True)
class Layout:
    """Where this rank's shards go and who writes them: from tsm.state and the FSDP model."""

    tp_degree: int = 1
    tp_rank: int = 0
    ep_degree: int = 1
    ep_rank: int = 0
    group: object = None  # the FSDP process group (None: the world)
    writer: bool = True   # replication rank 0
    coordinator: int = 0  # the lowest global rank of `group`


def shard_dir(root, step, layout):
    """This rank's folder of checkpoint `step`: per TP and EP rank when those degrees are above 1."""
    path = step_dir(root, step)
    if layout.tp_degree > 1:
        path = os.path.join(path, f"tp{layout.tp_degree}-{layout.tp_rank}")
    if layout.ep_degree > 1:
        path = os.path.join(path, f"ep{layout.ep_degree}-{layout.ep_rank}")
    return path


def _marker_text(root, step):
    try:
        with open(os.path.join(step_dir(root, step), MARKER), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def kind(root, step):
    """How checkpoint `step` was written: `sync` or `async` (a marker without a kind predates async saves)."""
    text = _marker_text(root, step) or ""
    words = text.split()
    return words[1] if len(words) > 1 else SYNC


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


def coordinator_is_group_rank():
    """Whether this PyTorch's DCP reads `coordinator_rank` as a rank within the process group (it maps it to a
    global rank itself), as PyTorch has since the fix of pytorch/pytorch#141825; before it, the collectives took
    it as a global rank while the coordinator test took it as a group rank, so only AWS's value fits there."""
    try:
        from torch.distributed.checkpoint.utils import _DistWrapper
    except ImportError:
        return False
    return "global_coordinator_rank" in _DistWrapper.__init__.__code__.co_names


class TorchWriter:
    """Blocking saves and loads with PyTorch's DCP, over the FSDP group, coordinated by its lowest rank."""

    kind = SYNC

    def __init__(self, group_rank_coordinator=None):
        self.group_rank_coordinator = (coordinator_is_group_rank() if group_rank_coordinator is None
                                       else group_rank_coordinator)

    def write(self, state, path, layout):
        import torch.distributed.checkpoint as dcp

        if self.group_rank_coordinator:
            dcp.save(state, checkpoint_id=path, process_group=layout.group)
        else:  # as AWS's checkpoints.py `_save_sharded` calls it
            dcp.save_state_dict(state, storage_writer=dcp.FileSystemWriter(path), process_group=layout.group,
                                coordinator_rank=layout.coordinator)

    def wait(self, layout):
        """Nothing is pending: `write` returned once the files were written."""

    def read(self, state, path, layout):
        import torch.distributed.checkpoint as dcp

        if self.group_rank_coordinator:
            dcp.load(state, checkpoint_id=path, process_group=layout.group)
        else:  # as AWS's checkpoints.py `_load_sharded` calls it
            dcp.load_state_dict(state, storage_reader=dcp.FileSystemReader(path), process_group=layout.group,
                                coordinator_rank=layout.coordinator)


class AsyncWriter:
    """SMP's asynchronous saves (torch.sagemaker.distributed.checkpoint), and its loader for what they wrote.

    `async_save`, `load` and `queue` are SMP's state_dict_saver.async_save, state_dict_loader.load and an
    async_utils.AsyncCallsQueue (locally, tsm_local's stand-ins for them)."""

    kind = ASYNC

    def __init__(self, async_save, load, queue):
        self.async_save, self.load, self.queue = async_save, load, queue

    def write(self, state, path, layout):
        self.async_save(state, checkpoint_id=path, process_group=layout.group, coordinator_rank=layout.coordinator,
                        queue=self.queue)

    def wait(self, layout):
        self.queue.maybe_finalize_async_calls(blocking=True, process_group=layout.group)

    def read(self, state, path, layout):
        self.load(state, checkpoint_id=path, process_group=layout.group, coordinator_rank=layout.coordinator)


def _mark(root, step, written_by, keep):
    """Every rank is done with checkpoint `step`: one process per host marks it complete and prunes old ones."""
    dist.barrier()
    if int(os.environ.get("LOCAL_RANK", 0)) == 0:
        top = step_dir(root, step)
        os.makedirs(top, exist_ok=True)
        with open(os.path.join(top, MARKER), "w", encoding="utf-8") as f:
            f.write(f"{step} {written_by}\n")
        prune(root, keep)
    dist.barrier()


class Checkpoints:
    """The job's checkpoints under `root`: saved by `writer`, the newest `keep` kept.

    With an asynchronous writer a save returns while its shards are still being written; `finish` waits
    for them and marks the checkpoint complete (the script calls it at its next progress line, before the
    next save and at the end). A blocking writer's save is complete when it returns."""

    def __init__(self, root, keep, layout, writer, readers=(), snapshots=False):
        self.root, self.keep, self.layout, self.writer = root, keep, layout, writer
        self.readers = {r.kind: r for r in (*readers, writer)}
        self.pending = None
        self.snapshots = snapshots  # local run: keep each save's state to compare the checkpoint with
        self.saved = {}

    def save(self, step, model, optimizer):
        """Write checkpoint `step` (replication-rank-0 ranks, per TP/EP rank); returns its folder."""
        self.finish()
        top = step_dir(self.root, step)
        if int(os.environ.get("LOCAL_RANK", 0)) == 0 and os.path.isdir(top) and _marker_text(self.root, step) is None:
            shutil.rmtree(top, ignore_errors=True)  # a save of this step a stopped run left unfinished
        dist.barrier()
        state = state_dicts(model, optimizer)  # every rank: FSDP's state dicts are collective
        if self.snapshots:
            self.saved[step] = local_tensors(state)
        if self.layout.writer:
            self.writer.write(state, shard_dir(self.root, step, self.layout), self.layout)
        self.pending = step
        if self.writer.kind == SYNC:
            self.finish()
        return top

    def finish(self):
        """Wait for the save in flight, if any, and mark it complete; returns its step (None: none was)."""
        step, self.pending = self.pending, None
        if step is None:
            return None
        self.writer.wait(self.layout)
        _mark(self.root, step, self.writer.kind, self.keep)
        return step

    def load(self, step, model, optimizer):
        """Load checkpoint `step` into the wrapped model and optimizer, in place, with the reader of the kind its
        marker names: every rank reads its own TP/EP sub-folder over its FSDP group, replicas included."""
        written_by = kind(self.root, step)
        reader = self.readers.get(written_by)
        if reader is None:
            raise RuntimeError(f"checkpoint {step_dir(self.root, step)} was written by SMP's asynchronous save and "
                               "this job cannot read it: its image's SMP predates 2.5.0")
        _, set_state_dict = _state_dict_api()
        state = state_dicts(model, optimizer)
        reader.read(state, shard_dir(self.root, step, self.layout), self.layout)
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


def _local_views(tree, prefix=""):
    """Each tensor in a (nested) state dict as a view of this rank's local shard, keyed as local_tensors keys it."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _local_views(value, f"{prefix}{key}/")
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            yield from _local_views(value, f"{prefix}{i}/")
    elif isinstance(tree, torch.Tensor):
        if hasattr(tree, "to_local"):
            tree = tree.to_local()
        elif hasattr(tree, "local_shards"):
            shards = tree.local_shards()
            if not shards:
                return
            tree = shards[0].tensor
        yield prefix.rstrip("/"), tree


def _put_back(model, optimizer, values):
    """Give the model and optimizer these local shards again (what local_tensors took)."""
    _, set_state_dict = _state_dict_api()
    state = state_dicts(model, optimizer)
    with torch.no_grad():
        for key, view in _local_views(state):
            view.copy_(values[key])
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])


def round_trip(checkpoints, step, model, optimizer):
    """Local-run check: perturb every value (so the load must change them), load checkpoint `step` and compare
    each local shard, bit for bit on every rank, with what it was when the save began (Checkpoints' snapshot;
    without one, now). Training's state is then put back: an asynchronous save is finished while training has
    gone on. Returns (equal on every rank, tensors compared on this rank)."""
    live = local_tensors(state_dicts(model, optimizer))
    saved = checkpoints.saved.pop(step, None) or live
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
        for per_param in optimizer.state.values():
            for value in per_param.values():
                if isinstance(value, torch.Tensor):
                    value.add_(1.0)
    checkpoints.load(step, model, optimizer)
    loaded = local_tensors(state_dicts(model, optimizer))
    equal = saved.keys() == loaded.keys() and all(
        saved[k].dtype == loaded[k].dtype and torch.equal(saved[k], loaded[k]) for k in saved)
    _put_back(model, optimizer, live)
    return everywhere(equal), len(saved)


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


def save_model(root, model, layout, writer=None):
    """The final model, sharded: the replication-rank-0 ranks each write their own shard (DCP, blocking), so no
    rank gathers the model; the file writer copies one tensor at a time to the host. Returns this rank's folder."""
    path = model_dir(root, layout)
    state = _model_state(model)  # every rank: FSDP's state dicts are collective
    if layout.writer:
        (writer or TorchWriter()).write(state, path, layout)
    dist.barrier()
    return path


def model_round_trip(path, model, layout, writer=None):
    """Local-run check: perturb the parameters, load the export back and compare every local shard with
    what was saved, on every rank."""
    saved = local_tensors(_model_state(model))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    state = _model_state(model)
    (writer or TorchWriter()).read(state, path, layout)
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    set_model_state_dict(model, state["model"])
    loaded = local_tensors(_model_state(model))
    equal = saved.keys() == loaded.keys() and all(torch.equal(saved[k], loaded[k]) for k in saved)
    return everywhere(equal)


def everywhere(flag):
    """Whether `flag` holds on every rank. The vote travels on the process group's own device: NCCL carries CUDA
    tensors only ("No backend type associated with device type cpu")."""
    on = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    vote = torch.tensor([1 if flag else 0], device=on)
    dist.all_reduce(vote, op=dist.ReduceOp.MIN)
    return bool(vote.item())
