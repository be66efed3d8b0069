"""Per-rank peak memory of the training data reader as the corpus grows: 0.1, 1 and 4 GB of token files.

Each reader runs in a fresh process as one rank of eight (data-parallel rank 3, sequences of 4096,
batches of 8) and draws 50 batches; its peak resident memory (VmHWM) above what it held after importing
numpy and torch is the figure. The anchor is the reader this project shipped before, which parsed the
whole channel into one int64 array on every rank (its source is read from git, commit 13c071c), measured
in the same run on the corpora it can hold. Goal: the reader's peak stays flat, within 1.5x of the
0.1 GB figure at 4 GB, and what the rank owns (anonymous memory) stays under 16 MiB, while the old one
grows with the corpus.

Corpora are generated in a temporary directory and deleted afterwards: .npy files of int32 tokens (at
most 256 MiB each) at every size, and JSON lines at 0.1 and 1 GB only (generating and parsing 4 GB of
JSON text takes this 2-core machine tens of minutes; the reader reads the same int32 cache either way).
JSON lines are converted once per host by `prepare`, whose own peak is measured too. The old reader is
measured up to 1 GB: at 4 GB it needs about 12 GB (the int64 copy plus the file), most of this machine.
Results: benchmarks/results/bench_data.txt.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "bench_data.txt"
OLD_COMMIT = "13c071c"
SIZES_GB = (0.1, 1.0, 4.0)
JSONL_SIZES_GB = (0.1, 1.0)
OLD_MAX_GB = 1.0
OWNED_MAX_MIB = 16
FILE_BYTES = 256 << 20
VOCAB = 32000
SEQ, BATCH, DP_SIZE, DP_RANK, STEPS = 4096, 8, 8, 3, 50

PROBE = """
import json, sys, time
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))
import numpy, torch
sys.path.insert(0, sys.argv[1])
import {module} as data
base, anon = status("VmRSS"), status("RssAnon")
start = time.perf_counter()
{body}
print(json.dumps({{"peak": status("VmHWM") - base, "anon": status("RssAnon") - anon,
                  "seconds": time.perf_counter() - start}}))
"""
READ = """batches = data.TokenFileBatches(sys.argv[2], sys.argv[3], {seq}, {batch}, 0, {rank}, {size}, **{extra})
for step in range(1, {steps} + 1):
    assert batches.batch(step).shape == ({batch}, {seq})""".format(seq=SEQ, batch=BATCH, rank=DP_RANK, size=DP_SIZE,
                                                                 steps=STEPS, extra="{extra}")


def _write_npy(directory: Path, gb: float) -> None:
    tokens = int(gb * 1e9) // 4
    per_file = FILE_BYTES // 4
    start = 0
    while start < tokens:
        count = min(per_file, tokens - start)
        out = np.lib.format.open_memmap(directory / f"part{start // per_file:05d}.npy", mode="w+", dtype=np.int32,
                                        shape=(count,))
        for lo in range(0, count, 1 << 24):
            hi = min(count, lo + (1 << 24))
            out[lo:hi] = (np.arange(start + lo, start + hi, dtype=np.int64) * 7919) % VOCAB
        out.flush()
        del out
        start += count


def _write_jsonl(directory: Path, gb: float) -> None:
    target, written, index = int(gb * 1e9), 0, 0
    row = ",".join(str(t) for t in range(1000, 1000 + 2048))
    line = ('{"input_ids": [' + row + "]}\n").encode()
    lines_per_file = max(1, FILE_BYTES // len(line))
    while written < target:
        with open(directory / f"part{index:05d}.jsonl", "wb") as f:
            n = min(lines_per_file, max(1, (target - written) // len(line)))
            f.write(line * n)
            written += n * len(line)
        index += 1


def _probe(module_dir: Path, module: str, body: str, *args: str) -> dict:
    code = PROBE.format(module=module, body=body)
    out = subprocess.run([sys.executable, "-c", code, str(module_dir), *args], capture_output=True, text=True,
                         check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def _old_reader(tmp: Path) -> Path:
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{OLD_COMMIT}:launcher/runtime/train_data.py"],
                            capture_output=True, text=True, check=True).stdout
    directory = tmp / "old"
    directory.mkdir()
    (directory / "old_train_data.py").write_text(source)
    return directory


def main() -> int:
    rows = []
    runtime = REPO / "launcher" / "runtime"
    with tempfile.TemporaryDirectory(prefix="bench-data-") as name:
        tmp = Path(name)
        old = _old_reader(tmp)
        for fmt, sizes in (("npy", SIZES_GB), ("jsonl", JSONL_SIZES_GB)):
            for gb in sizes:
                corpus = tmp / f"{fmt}-{gb:g}"
                corpus.mkdir()
                started = time.perf_counter()
                (_write_npy if fmt == "npy" else _write_jsonl)(corpus, gb)
                made = time.perf_counter() - started
                cache = tmp / f"cache-{fmt}-{gb:g}"
                row = {"format": fmt, "gb": gb, "generated_s": round(made, 1)}
                if fmt == "jsonl":
                    prep = _probe(runtime, "train_data", "data.prepare(sys.argv[2], 'jsonl', sys.argv[3])",
                                  str(corpus), str(cache))
                    row["prepare_peak_mib"], row["prepare_s"] = prep["peak"] / 2**20, prep["seconds"]
                extra = json.dumps({"cache_dir": str(cache)}) if fmt == "jsonl" else "{}"
                new = _probe(runtime, "train_data", READ.format(extra=extra), str(corpus), fmt)
                row["reader_peak_mib"], row["reader_anon_mib"] = new["peak"] / 2**20, new["anon"] / 2**20
                row["reader_s"] = new["seconds"]
                if gb <= OLD_MAX_GB:
                    before = _probe(old, "old_train_data", READ.format(extra="{}"), str(corpus), fmt)
                    row["old_peak_mib"], row["old_anon_mib"] = before["peak"] / 2**20, before["anon"] / 2**20
                    row["old_s"] = before["seconds"]
                rows.append(row)
                print(json.dumps(row), flush=True)
                shutil.rmtree(corpus)
                shutil.rmtree(cache, ignore_errors=True)
    lines = [f"# {Path(__file__).name}: per-rank memory (MiB above the imports) of the token-file reader, "
             f"rank {DP_RANK}",
             f"# of {DP_SIZE}, seq {SEQ}, batch {BATCH}, {STEPS} batches. peak: VmHWM (resident, any kind);",
             "# owned: RssAnon after the batches (what the rank holds itself); prepare: converting JSON lines,",
             f"# once per host; old: the reader of commit {OLD_COMMIT}.",
             f"{'format':6} {'GB':>5} {'peak':>8} {'owned':>8} {'prepare':>8} {'old peak':>9} {'old owned':>10} "
             f"{'read s':>7} {'prep s':>7} {'old s':>7}"]
    for r in rows:
        def cell(key: str, width: int, digits: int = 1, r: dict = r) -> str:
            return f"{r[key]:>{width}.{digits}f}" if key in r else f"{'-':>{width}}"
        lines.append(f"{r['format']:6} {r['gb']:>5g} {cell('reader_peak_mib', 8)} {cell('reader_anon_mib', 8)} "
                     f"{cell('prepare_peak_mib', 8)} {cell('old_peak_mib', 9)} {cell('old_anon_mib', 10)} "
                     f"{cell('reader_s', 7, 2)} {cell('prepare_s', 7, 2)} {cell('old_s', 7, 2)}")
    verdicts = []
    for fmt, sizes in (("npy", SIZES_GB), ("jsonl", JSONL_SIZES_GB)):
        mine = [r for r in rows if r["format"] == fmt]
        growth = mine[-1]["reader_peak_mib"] / max(mine[0]["reader_peak_mib"], 1e-9)
        owned = max(r["reader_anon_mib"] for r in mine)
        ok = growth <= 1.5 and owned <= OWNED_MAX_MIB
        verdicts.append(ok)
        lines.append(f"{fmt}: peak at {sizes[-1]:g} GB is {growth:.2f}x the peak at {sizes[0]:g} GB (goal <= 1.5x), "
                     f"owned at most {owned:.1f} MiB (goal <= {OWNED_MAX_MIB} MiB): {'met' if ok else 'NOT met'}")
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
