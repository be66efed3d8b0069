"""`submit --local`: run the job's rendered entry script on this machine's CPUs before paying for GPUs.

The script runs under torchrun with gloo, with tsm_local standing in for torch.sagemaker, twice in
one checkpoint dir: the first run trains from scratch and checkpoints part-way, the second must
resume from that checkpoint and repeat the first run's losses bit for bit. With asynchronous
checkpoints the first run saves twice and is killed (SIGKILL) while its second save is in flight, as
a job stopped mid-save: the second run must resume from the first save, the one completed. Tensor
parallelism runs emulated on gloo (each TP rank holds its own slice), at the largest degree the
process count allows. What a CPU cannot run (context and expert parallelism, fp8, SMDDP/NCCL) is
reported as not exercised.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.core.errors import EXIT_OK, EXIT_PREFLIGHT, ArgumentError, UsageError
from launcher.local.checks import Check, RunRecord, final_model_check, judge_runs, not_exercised, substitutions
from launcher.local.launchers import launch
from launcher.spec.loader import LoadedSpec
from launcher.spec.models import JobSpec

DEFAULT_STEPS = 10
TINY_HIDDEN = 64
TINY_HEADS = 4
TINY = {"num_layers": 2, "hidden_width": TINY_HIDDEN, "num_heads": TINY_HEADS, "vocab_size": 256,
        "seq_length": 64}
TINY_MAX_BATCH = 4
HOST_LABEL = "[algo-1] "


@dataclass
class LocalRunResult:
    spec_file: str
    nproc: int
    tiny: bool
    exit_code: int
    local_changes: list[str]
    notes: list[str]
    not_exercised: list[dict[str, str]]
    checks: list[Check] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "spec_file": self.spec_file, "nproc": self.nproc, "tiny": self.tiny, "exit_code": self.exit_code,
            "local_changes": self.local_changes, "notes": self.notes, "not_exercised": self.not_exercised,
            "checks": [c.as_dict() for c in self.checks],
            "runs": [{"exit_code": r.exit_code, "wall_s": round(r.wall_s, 2), "losses": r.losses(), "killed": r.killed,
                      "hyperparameters": r.hyperparameters()} for r in self.runs],
        }


def tiny_overrides(spec: JobSpec, tensor_parallel: int = 1) -> list[str]:
    """Shrink the model to seconds-per-run size, keeping its type and its attention and MLP shape
    (widths divisible by 4 and at least one key/value head per tensor-parallel rank, so TP can split them)."""
    arch = spec.model.architecture()
    values: dict[str, Any] = dict(TINY)
    kv = max(1, TINY_HEADS * arch.num_key_value_heads // arch.num_heads, min(tensor_parallel, TINY_HEADS))
    values["num_key_value_heads"] = kv
    values["intermediate_size"] = max(8, 4 * round(TINY_HIDDEN * arch.intermediate_size / arch.hidden_width / 4))
    if arch.type == "mixtral":
        values["num_experts"] = min(arch.num_experts, 4)
        values["num_experts_per_tok"] = min(arch.num_experts_per_tok, 2)
    changes = [f"model.{k}={v}" for k, v in values.items()]
    if spec.training.batch_size > TINY_MAX_BATCH:
        changes.append(f"training.batch_size={TINY_MAX_BATCH}")
    return changes


def resume_step(max_steps: int, killed: bool = False) -> int:
    """The checkpoint a local run resumes from. A run that completes checkpoints once, past the middle, so the
    resumed run repeats a few steps; one killed mid-save checkpoints every this many steps and is killed while
    saving the second, before the last step."""
    return max(1, (max_steps - 1) // 2) if killed else max_steps // 2 + 1


def run_changes(spec: JobSpec, max_steps: int, killed: bool = False) -> list[str]:
    """Steps, logging and checkpointing sized for a few-second run that still saves and resumes."""
    changes = [f"training.max_steps={max_steps}", "training.log_every=1",
               f"training.checkpoint_every={resume_step(max_steps, killed)}"]
    if spec.training.tokens is not None:  # a token budget would set the steps again
        changes.append("training.tokens=null")
    warmup = spec.training.warmup_steps
    if warmup is not None and warmup > max_steps // 4:
        changes.append(f"training.warmup_steps={max_steps // 4}")
    return changes


def local_shard_degree(effective: int, nproc: int) -> int:
    """The spec's shard degree as far as nproc processes allow: the largest divisor of nproc not above it."""
    return max(d for d in range(1, nproc + 1) if nproc % d == 0 and d <= max(1, effective))


def local_tensor_parallel_degree(spec: JobSpec, nproc: int) -> int:
    """The spec's TP degree as far as nproc processes and the tiny model's 4 heads allow."""
    return local_shard_degree(min(spec.smp.tensor_parallel_degree, TINY_HEADS), nproc)


def smp_config(spec: JobSpec, shard: int, tensor_parallel: int = 1,
               taken: Sequence[str] | None = None) -> dict[str, Any]:
    """The SMP parameters the stand-in gets: the local degrees, and of the rest only those the job's image takes."""
    smp = spec.smp
    config = {"hybrid_shard_degree": shard, "tensor_parallel_degree": tensor_parallel, "context_parallel_degree": 1,
              "expert_parallel_degree": 1, "sm_activation_offloading": smp.sm_activation_offloading,
              "activation_loading_horizon": smp.activation_loading_horizon}
    return {k: v for k, v in config.items() if taken is None or k in taken}


def _require_torch() -> None:
    """Found, not imported: the ranks import them; importing them here cost this process ~3 CPU-s for nothing."""
    import importlib.util

    for name in ("torch", "transformers"):
        if importlib.util.find_spec(name) is None:
            raise UsageError(f"the local run needs torch and transformers ({name} is missing): "
                             "pip install 'smp-launch[local]'")


def write_token_files(directory: Path, data_format: str, vocab_size: int, rows: int, seq_length: int) -> None:
    """A small train channel in the spec's format, following the same learnable rule as synthetic data."""
    import numpy as np

    rng = np.random.default_rng(0)
    data = (rng.integers(0, vocab_size, (rows, 1)) + np.arange(seq_length)) % vocab_size
    directory.mkdir(parents=True, exist_ok=True)
    if data_format == "npy":
        np.save(directory / "part-00000.npy", data.astype(np.int32))
        return
    with open(directory / "part-00000.jsonl", "w", encoding="utf-8") as f:
        for row in data:
            f.write(json.dumps({"input_ids": [int(t) for t in row]}) + "\n")


def write_random_pretrained(directory: Path, spec: JobSpec) -> None:
    """A randomly initialised model of the spec's type and dimensions, in Hugging Face format."""
    import importlib

    from launcher.catalog.architecture import HF_CLASSES
    from launcher.render.files import hf_config

    arch_type = spec.model.architecture().type
    config_name, model_name, _ = HF_CLASSES[arch_type]
    module = importlib.import_module(f"transformers.models.{arch_type}.modeling_{arch_type}")
    config = getattr(module, config_name)(**hf_config(spec))
    getattr(module, model_name)(config).save_pretrained(directory)


def _kill(proc: subprocess.Popen, ranks: Sequence[int]) -> None:
    """SIGKILL every rank (torchrun starts each in a session of its own) and then torchrun itself."""
    import contextlib

    for pid in ranks:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _torchrun(src: Path, command: list[str], env: dict[str, str], echo: Callable[[str], None]) -> RunRecord:
    """Run train.py under torchrun as the backend's container starts it (launcher.local.launchers), labelling each
    line as SageMaker's log streams do. A run that reports it is holding mid-save (SMP_LAUNCH_LOCAL_HOLD_AT) is
    killed there with SIGKILL, every process of it."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1, start_new_session=True)
    record = RunRecord(exit_code=1, wall_s=0.0)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            if not record.add_line(line):
                echo(HOST_LABEL + line)
            elif record.of("held") and not record.killed:
                _kill(proc, record.of("held")[0]["pids"])
                record.killed = True
        record.exit_code = proc.wait()
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        raise
    record.wall_s = time.perf_counter() - started
    return record


def _fits_this_machine(spec: JobSpec, nproc: int) -> None:
    """Refuse a full-size model that cannot fit in this machine's memory, before torchrun is killed for it:
    each process builds the whole model in fp32 before FSDP shards it."""
    params = spec.model.architecture().parameters
    need = nproc * params * 4
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > 0.8 * have:
        raise ArgumentError(f"{spec.model.preset or spec.model.type} has {params / 1e9:.2f}B parameters: {nproc} "
                            f"processes need about {need / 2**30:.0f} GiB to build it, this machine has "
                            f"{have / 2**30:.0f} GiB; add {{tiny}} to run the same architecture at a small size")


def local_spec(spec_path: str, overrides: Sequence[str], tiny: bool, max_steps: int | None,
               nproc: int = 2) -> tuple[LoadedSpec, list[str]]:
    """The spec as the local run runs it, and the changes made to it for this machine."""
    from launcher.plan.build import blocking_errors, build_plan
    from launcher.spec import load_spec

    steps = DEFAULT_STEPS if max_steps is None else max_steps
    if steps < 3:
        raise ArgumentError("{max_steps} must be at least 3: the local run checkpoints part-way and resumes")
    base = load_spec(spec_path, overrides)
    plan = build_plan(base)
    refused = blocking_errors(plan)
    if refused:
        raise refused
    if not tiny:
        _fits_this_machine(base.spec, nproc)
    changes = run_changes(base.spec, steps, killed=plan.decisions.async_checkpoint)
    if tiny:
        changes = tiny_overrides(base.spec, local_tensor_parallel_degree(base.spec, nproc)) + changes
        if base.spec.smp.delayed_param_init == "auto":  # decided by size: keep the full model's answer
            delayed = build_plan(base).decisions.delayed_param_init
            changes.append(f"smp.delayed_param_init={str(delayed).lower()}")
    return load_spec(spec_path, [*overrides, *changes]), changes


def run_local(spec_path: str, overrides: Sequence[str] = (), *, tiny: bool = False, nproc: int = 2,
              max_steps: int | None = None, echo: Callable[[str], None] = print) -> LocalRunResult:
    """Render the job, run it twice with torchrun on CPU, and judge what the runs reported."""
    from launcher.plan.build import build_plan
    from launcher.render.files import write_source_dir

    if nproc < 1:
        raise ArgumentError("{nproc} must be at least 1")
    _require_torch()
    loaded, changes = local_spec(spec_path, overrides, tiny, max_steps, nproc)
    spec = loaded.spec
    decisions = build_plan(loaded).decisions
    killed = decisions.async_checkpoint  # the first run is killed mid-save, then resumed
    resume = resume_step(spec.training.max_steps, killed)
    tp = local_tensor_parallel_degree(spec, nproc)
    shard = local_shard_degree(decisions.hybrid_shard_degree, nproc // tp)
    notes = [f"hybrid shard degree {decisions.hybrid_shard_degree} ran as {shard} over {nproc} processes"
             + (f" ({nproc // tp} per tensor-parallel slice)" if tp > 1 else ""),
             *substitutions(spec, decisions, tp)]
    with tempfile.TemporaryDirectory(prefix="smp-launch-local-") as tmp:
        root = Path(tmp)
        env = {**os.environ, **spec.environment,
               "SMP_CONFIG_JSON": json.dumps(smp_config(spec, shard, tp, decisions.smp_parameters)),
               "SMP_LAUNCH_SMP_RELEASE": decisions.smp_release, "SMP_LAUNCH_LOCAL_RUN": "1",
               "SMP_LAUNCH_CHECKPOINT_DIR": str(root / "checkpoints"), "SM_MODEL_DIR": str(root / "model"),
               "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "ignore::FutureWarning",
               "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        # torchrun's own default for more than one process; set, torchrun prints no banner among the script's lines
        env.setdefault("OMP_NUM_THREADS", "1")
        if spec.data.train != "synthetic":
            rows = 4 * nproc * spec.training.batch_size
            write_token_files(root / "train", spec.data.format, spec.model.architecture().vocab_size, rows,
                              spec.model.seq_length)
            env["SM_CHANNEL_TRAIN"] = str(root / "train")
            env["SMP_LAUNCH_TOKEN_CACHE"] = str(root / "token-cache")  # JSON lines' cache, removed with the run
            notes.append(f"data.train {spec.data.train} was not downloaded: the script read {rows} generated "
                         f"sequences in {spec.data.format} format from its train channel")
        if spec.model.pretrained is not None and not Path(spec.model.pretrained).is_absolute():
            write_random_pretrained(root / "pretrained", spec)
            notes.append(f"model.pretrained {spec.model.pretrained!r} was not downloaded: rank 0 loaded a random "
                         "model of the same type and dimensions, and the other ranks received it from rank 0")
            overrides = [*overrides, f"model.pretrained={root / 'pretrained'}"]
            loaded, changes = local_spec(spec_path, overrides, tiny, max_steps, nproc)
            changes.append(overrides[-1])
            spec = loaded.spec
        plan = build_plan(loaded)
        started = launch(plan, nproc)
        src = root / started.folder
        write_source_dir(plan.source.files, src)
        env.update(started.env)
        notes.append(f"started as the {plan.backend.kind} backend's container starts it ({started.folder}/train.py)")
        result = LocalRunResult(spec_file=spec_path, nproc=nproc, tiny=tiny, exit_code=EXIT_OK,
                                 local_changes=changes, notes=notes,
                                 not_exercised=not_exercised(spec, decisions.backend, tp))
        hold = {"SMP_LAUNCH_LOCAL_HOLD_AT": str(2 * resume)} if killed else {}
        first = _torchrun(src, started.command, {**env, **hold}, echo)
        result.runs.append(first)
        if first.exit_code != 0 and not (killed and first.killed):
            result.exit_code = first.exit_code
            return result
        if killed:
            echo(f"killed the first run while it saved step {2 * resume} asynchronously; restarting in the same "
                 f"checkpoint dir: the run must resume from step {resume}, the save that completed")
        else:
            echo(f"restarting in the same checkpoint dir: the run must resume from step {resume}")
        second = _torchrun(src, started.command, env, echo)
        result.runs.append(second)
        model_saved = (root / "model" / "config.json").exists()
    result.checks = judge_runs(first, second, resume, spec.smp.activation_checkpointing, tp)
    result.checks.append(final_model_check(second, model_saved, spec.output.final_export))
    if second.exit_code != 0:
        result.exit_code = second.exit_code
    elif any(c.ok is False for c in result.checks):
        result.exit_code = EXIT_PREFLIGHT
    return result
