"""Hostile specs are refused about as fast as a good spec is validated, in-process, measured in one run.

Goal: bad input gets one line and exit 2, fast: each hostile input takes well under 2 s, and no more
than a few times validating jobs/llama7b.yaml (the anchor) takes. The inputs are those a naive loader
spends minutes, gigabytes or forever on: a 700-byte alias bomb, `training.batch_size: 4194304`, 10**30.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from launcher.core.errors import SpecError  # noqa: E402
from launcher.plan.build import build_plan  # noqa: E402
from launcher.spec import load_spec  # noqa: E402

MINIMAL = "name: demo\nmodel: {preset: llama2-7b}\ncluster: {region: us-west-2}\noutput: {path: s3://my-bucket/smp}\n"
RUNS = 5


def _bomb(levels: int) -> str:
    lines = ["  a0: &a0 [x,x,x,x,x,x,x,x,x]"]
    lines += [f"  a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "hyperparameters:\n" + "\n".join(lines) + "\n"


def cases(tmp: Path) -> list[tuple[str, Path, list[str]]]:
    def spec(name: str, text: str | bytes) -> Path:
        path = tmp / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    base = spec("base.yaml", MINIMAL)
    chain = [spec(f"c{i}.yaml", f"extends: c{i + 1}.yaml\n") for i in range(3000)]
    spec("c3000.yaml", MINIMAL)
    return [
        ("alias bomb, 9**12 values in ~700 bytes", spec("bomb.yaml", MINIMAL + _bomb(12)), []),
        ("--set alias bomb", base, ["tags=[&a [x,x,x,x,x,x,x,x,x], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], "
                                    "&c [*b,*b,*b,*b,*b,*b,*b,*b,*b], [*c,*c,*c,*c,*c,*c,*c,*c,*c]]"]),
        ("nesting 100000 deep", spec("deep.yaml", MINIMAL + "description: " + "[" * 100000 + "]" * 100000), []),
        ("extends chain of 3000 files", chain[0], []),
        ("Latin-1 byte", spec("latin.yaml", MINIMAL.encode() + b"description: caf\xe9\n"), []),
        ("256 KiB of comment", spec("big.yaml", MINIMAL + "#" + "x" * 262000 + "\n"), []),
        ("training.batch_size=1048576 (memory fix-up)", base, ["training.batch_size=1048576"]),
        ("training.batch_size=10**30", base, ["training.batch_size=" + "1" + "0" * 30]),
    ]


def timed(path: Path, overrides: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        try:
            build_plan(load_spec(path, overrides))
        except SpecError:
            pass
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    anchor = timed(REPO / "jobs" / "llama7b.yaml", [])
    print(f"median of {RUNS} runs in-process (load_spec + build_plan), Python {sys.version.split()[0]}")
    print(f"{'input':45} {'wall s':>8} {'x anchor':>9}  verdict (goal: under 2 s)")
    print(f"{'jobs/llama7b.yaml (anchor)':45} {anchor:8.3f} {1:9.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, overrides in cases(Path(tmp)):
            t = timed(path, overrides)
            print(f"{name:45} {t:8.3f} {t / anchor:9.2f}  {'ok' if t < 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
