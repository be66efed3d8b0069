"""The memory model at long sequences against torchtitan's published measured peaks.

torchtitan's benchmark of Llama 3.1 on H100s (https://github.com/pytorch/torchtitan/blob/main/benchmarks/
llama3_h100_202412_torchtitan.md) reports each run's peak reserved GPU memory. The rows with full
activation checkpointing and no pipeline parallelism are the ones this model covers: Table 2 (Llama 3.1
8B, 8 GPUs, local batch 1, FSDP x CP, sequences of 32k to 256k) and Table 4 (Llama 3.1 70B, 256 GPUs,
FSDP 32 x TP 8, local batch 16; its sequence length, 8192, is train_configs/llama3_70b.toml's). torchtitan
shards parameters over FSDP x CP, so that product is the sharding degree here.

The model is run with torchtitan's own loss, not the entry script's: the bytes per logit are measured
now by tools/activation_measure.py (cross_entropy on pre-shifted labels; loss_parallel under TP, in a
one-rank process group), and its layers under TP keep their all-gathered inputs (DTensor sequence
parallelism). Goal: every estimate within 10% of the published figure. Results:
benchmarks/results/bench_memory.txt.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from launcher.rules.memory import ParallelLayout, estimate  # noqa: E402
from launcher.spec.presets import PRESETS  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "bench_memory.txt"
TOOL = REPO / "tools" / "activation_measure.py"
GOAL = 0.10
# (table, model, FSDP, CP, TP, sequence, local batch, published GiB)
PUBLISHED = (
    ("2", "llama3-8b", 8, 1, 1, 32768, 1, 83.9),
    ("2", "llama3-8b", 4, 2, 1, 65536, 1, 84.2),
    ("2", "llama3-8b", 2, 4, 1, 131072, 1, 84.0),
    ("2", "llama3-8b", 1, 8, 1, 262144, 1, 84.5),
    ("4", "llama3-70b", 32, 1, 8, 8192, 16, 71.9),
)


def _tool():
    spec = importlib.util.spec_from_file_location("activation_measure", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def measured_losses() -> dict[str, float]:
    """torchtitan's loss per logit, and loss_parallel's in a fresh process (it starts a process group)."""
    plain = _tool().loss_bytes_per_logit("torchtitan")
    code = (f"import importlib.util, sys; s = importlib.util.spec_from_file_location('m', {str(TOOL)!r}); "
            "m = importlib.util.module_from_spec(s); sys.modules['m'] = m; s.loader.exec_module(m); "
            "print(m.run_loss_parallel())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {"plain": plain, "loss_parallel": float(out.strip().splitlines()[-1])}


def main() -> int:
    losses = measured_losses()
    lines = [f"# {Path(__file__).name}: estimate vs torchtitan's published peak (GiB), Llama 3.1, H100, full AC",
             f"# loss bytes per logit measured now: cross_entropy {losses['plain']:.2f}, "
             f"loss_parallel {losses['loss_parallel']:.2f}",
             f"{'table':5} {'model':10} {'FSDP':>4} {'CP':>3} {'TP':>3} {'seq':>7} {'batch':>5} {'published':>9} "
             f"{'estimate':>8} {'error':>7}  peak terms"]
    ok = True
    for table, model, fsdp, cp, tp, seq, batch, published in PUBLISHED:
        lay = ParallelLayout("ml.p5.48xlarge", shard_degree=fsdp * cp, tensor_parallel=tp, context_parallel=cp,
                             seq_length=seq, batch_size=batch, sp_saves_gathered_inputs=True,
                             loss_bytes_per_logit=losses["loss_parallel" if tp > 1 else "plain"])
        e = estimate(PRESETS[model].architecture, lay)
        error = e.per_gpu_gb / published - 1
        ok = ok and abs(error) <= GOAL
        terms = ", ".join(f"{k} {v:.1f}" for k, v in e.breakdown.items())
        lines.append(f"{table:5} {model:10} {fsdp:>4} {cp:>3} {tp:>3} {seq:>7} {batch:>5} {published:>9.1f} "
                     f"{e.per_gpu_gb:>8.1f} {error:>+7.1%}  {terms}")
    lines.append(f"goal: every estimate within {GOAL:.0%} of the published peak: {'met' if ok else 'NOT met'}")
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
