"""A stand-in for `torch.sagemaker` (SMP v2) when the library is not installed: the local preflight.

It provides the few names the entry script uses (init, state, transform, is_initialized) and owns
the sharding layout SMP would impose: HYBRID_SHARD gets an explicit 2-D device mesh
(replicate, shard), because FSDP's default hybrid groups silently become NO_SHARD on a CPU.
Tensor, context and expert parallelism need SMP's kernels; asking for them here is an error,
never a silent degree of 1.
"""
import json
import os
import sys
from types import SimpleNamespace

import torch
import torch.distributed as dist

LOCAL_PREFLIGHT = True
UNSUPPORTED = ("tensor_parallel_degree", "context_parallel_degree", "expert_parallel_degree")

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


def init(config=None):
    """Mirror `tsm.init`: read the SMP parameters once the process group exists."""
    global _initialized
    if not dist.is_initialized():
        raise RuntimeError("tsm_local.init() needs torch.distributed.init_process_group() first")
    params = _load_config(config)
    for key in UNSUPPORTED:
        if int(params.get(key, 1)) > 1:
            raise RuntimeError(
                f"{key}={params[key]} needs SMP v2 on GPUs; the local preflight cannot run it. "
                "`smp-launch submit --local` runs with degree 1 and reports it as not exercised.")
    world = dist.get_world_size()
    rank = dist.get_rank()
    shard = int(params.get("hybrid_shard_degree", 0)) or world
    if shard > world or world % shard:
        raise RuntimeError(f"hybrid_shard_degree {shard} must divide the local world size {world}")
    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    mesh = None
    if shard > 1:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device_type, (world // shard, shard), mesh_dim_names=("replicate", "shard"))
    state.__dict__.update(
        rank=rank, world_size=world, local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        hybrid_shard_degree=shard, device_mesh=mesh,
        tensor_parallel_degree=1, tp_size=1, tp_rank=0, tp_process_group=None,
        context_parallel_degree=1, cp_size=1, cp_rank=0,
        expert_parallel_degree=1, ep_size=1, ep_rank=0,
        sm_activation_offloading=bool(params.get("sm_activation_offloading", True)),
        activation_loading_horizon=int(params.get("activation_loading_horizon", 2)),
        world_process_group=dist.group.WORLD,
    )
    _initialized = True
    if rank == 0:
        print(f"LOCAL PREFLIGHT: torch.sagemaker is not installed; tsm_local stands in for it "
              f"(world {world}, hybrid shard degree {shard}, tensor/context/expert degree 1, "
              f"{device_type} device mesh {'(%d, %d)' % (world // shard, shard) if mesh else 'none'})",
              file=sys.stderr, flush=True)
    return state


def is_initialized():
    return _initialized


def transform(model, device=None, dtype=None, config=None, load_state_dict_from_rank0=False, **kwargs):
    """Identity: with tensor, context and expert degree 1 there is nothing to convert."""
    if not _initialized:
        raise RuntimeError("call tsm_local.init() before transform()")
    return model
