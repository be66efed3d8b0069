"""Run the 7B job's rendered entry script on one GPU with asynchronous checkpoints: save, kill, resume.

What `submit jobs/llama7b.yaml --local --tiny --max-steps 6` runs on CPUs, here on CUDA with NCCL and without
the SMP library (tsm_local stands in for torch.sagemaker, its async_save on PyTorch's DCP): the script is
tests/goldens/local-tiny-7b (a test holds it to what the local run renders) and its helper modules are
launcher/runtime/. It needs only PyTorch with CUDA, transformers and accelerate, and this repository; no
smp-launch install. The first run saves at steps 2 and 4 and is killed (SIGKILL, every rank) while step 4's
save is in flight; the second must resume from step 2, repeat step 3's loss bit for bit and finish.
Prints one PASS or FAIL line per check and ends with PASS or FAIL; the exit code is 0 only when all pass.

    python3 tools/gpu_check_async_ckpt.py          # on the GPU machine
    python3 tools/gpu_check_async_ckpt.py --cpu    # the same on CPUs with gloo, to try the check itself
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "goldens" / "local-tiny-7b"
RUNTIME = REPO / "launcher" / "runtime"
MARK = "SMP_LOCAL_RUN "
HOLD_AT, RESUME_AT, MAX_STEPS = 4, 2, 6  # the golden saves every 2 of 6 steps
TIMEOUT_S = 240


def run(src: Path, env: dict[str, str], hold: bool) -> tuple[int, list[dict], list[str], bool]:
    """One torchrun of train.py on one GPU; a run that reports it is holding mid-save is killed there."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "train.py"]
    run_env = {**env, **({"SMP_LAUNCH_LOCAL_HOLD_AT": str(HOLD_AT)} if hold else {})}
    proc = subprocess.Popen(cmd, cwd=src, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1, start_new_session=True)
    facts, lines, killed = [], [], False
    deadline = time.monotonic() + TIMEOUT_S
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        lines.append(line)
        print("  | " + line, flush=True)
        if line.startswith(MARK):
            fact = json.loads(line[len(MARK):])
            facts.append(fact)
            if fact.get("check") == "held":
                for pid in fact["pids"]:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            lines.append(f"TIMEOUT after {TIMEOUT_S} s")
            break
    return proc.wait(), facts, lines, killed


def of(facts: list[dict], check: str) -> list[dict]:
    return [f for f in facts if f.get("check") == check]


def main(argv: list[str]) -> int:
    import torch

    cpu = "--cpu" in argv

    results: list[tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        results.append((name, ok, detail))
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)

    if not cpu and not torch.cuda.is_available():
        print("FAIL no CUDA device: this check needs one GPU (--cpu tries it on CPUs)")
        return 1
    device = "CPU" if cpu else torch.cuda.get_device_name(0)
    print(f"torch {torch.__version__}, {device}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-check-async-") as tmp:
        root = Path(tmp)
        src = root / "src"
        src.mkdir()
        for name in ("train.py", "train_secrets.py", "distribution.json"):
            shutil.copy(GOLDEN / name, src / name)
        for module in ("train_data.py", "train_checkpoint.py", "tsm_local.py"):
            shutil.copy(RUNTIME / module, src / module)
        ckpt = root / "checkpoints"
        smp = {"hybrid_shard_degree": 1, "tensor_parallel_degree": 1, "context_parallel_degree": 1,
               "expert_parallel_degree": 1, "sm_activation_offloading": False, "activation_loading_horizon": 2}
        env = {**os.environ, **({"CUDA_VISIBLE_DEVICES": ""} if cpu else {}),
               "SMP_CONFIG_JSON": json.dumps(smp), "SMP_LAUNCH_SMP_RELEASE": "2.7.0",
               "SMP_LAUNCH_LOCAL_RUN": "1", "SMP_LAUNCH_CHECKPOINT_DIR": str(ckpt), "SM_MODEL_DIR": str(root / "model"),
               "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "ignore::FutureWarning", "OMP_NUM_THREADS": "1"}

        print("run 1: trains, saves at steps 2 and 4, killed while step 4 is being saved", flush=True)
        code1, first, lines1, killed = run(src, env, hold=True)
        backend = "gloo" if cpu else "nccl"
        check(f"the script ran with {backend}", any(f"process group: {backend}" in x for x in lines1),
              next((x for x in lines1 if "process group:" in x), "no process group line"))
        check("run 1 was killed mid-save", killed and code1 != 0, f"exit {code1}")
        trip = of(first, "checkpoint_round_trip")
        check("step 2's asynchronous checkpoint loads back the state its save began with",
              bool(trip) and trip[0]["step"] == RESUME_AT and trip[0]["equal"] and trip[0]["kind"] == "async",
              json.dumps(trip[:1]))
        marker = ckpt / f"step_{RESUME_AT:08d}" / ".complete"
        check("step 2 is marked complete, asynchronous",
              marker.exists() and marker.read_text() == f"{RESUME_AT} async\n",
              marker.read_text().strip() if marker.exists() else "no marker")
        unfinished = ckpt / f"step_{HOLD_AT:08d}"
        check("step 4, killed mid-save, is not marked complete", not (unfinished / ".complete").exists(),
              f"{unfinished.name}: {sorted(p.name for p in unfinished.iterdir()) if unfinished.exists() else []}")

        print("run 2: resumes in the same checkpoint dir", flush=True)
        code2, second, lines2, _ = run(src, env, hold=False)
        check("run 2 finished", code2 == 0, f"exit {code2}")
        resumed = of(second, "resumed")
        check("run 2 resumed from step 2 (the completed save), not step 4",
              bool(resumed) and resumed[0]["step"] == RESUME_AT and resumed[0].get("kind") == "async",
              json.dumps(resumed))
        before = {f["step"]: f["loss"] for f in of(first, "step")}
        after = {f["step"]: f["loss"] for f in of(second, "step")}
        check("step 3's loss repeats bit for bit", 3 in before and before.get(3) == after.get(3),
              f"run 1 {before.get(3)!r}, run 2 {after.get(3)!r}")
        close = 4 in before and 4 in after and abs(before[4] - after[4]) <= 1e-2 * abs(before[4])
        check("step 4's loss repeats (within 1%: a GPU's backward may order its sums differently)", close,
              f"run 1 {before.get(4)!r}, run 2 {after.get(4)!r}")
        done = [s for s in (4, 6) if (ckpt / f"step_{s:08d}" / ".complete").exists()]
        check("run 2 completed its saves of steps 4 and 6 asynchronously", done == [4, 6] and all(
            (ckpt / f"step_{s:08d}" / ".complete").read_text() == f"{s} async\n" for s in done), f"complete: {done}")
        trips = of(second, "checkpoint_round_trip")
        check("run 2's checkpoints load back bit for bit", bool(trips) and all(t["equal"] for t in trips),
              ", ".join(f"step {t['step']} {'equal' if t['equal'] else 'DIFFER'}" for t in trips))
        model = of(second, "final_model")
        check("the final model loads into LlamaForCausalLM", bool(model) and bool(model[0]["loads"]),
              json.dumps(model[:1]))
    ok = all(r[1] for r in results)
    print("PASS" if ok else "FAIL", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
