"""Hostile specs are refused about as fast as a good spec is validated, in-process, measured in one run.

Goal: bad input gets one line and exit 2, fast: each hostile input takes well under 2 s, and no more
than a few times validating jobs/llama7b.yaml (the anchor) takes. The inputs are those a naive loader
spends minutes, gigabytes or forever on: a 700-byte alias bomb, `training.batch_size: 4194304`, 10**30;
and those a naive planner obeys: a hyperparameter the SDK would silently replace, a team template that
reaches Python's internals to run a shell command, one that links to a credentials file, one that writes
a credential into the job's source. Each of those must be refused, and the shell command must not run.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from launcher.core.errors import LauncherError  # noqa: E402
from launcher.plan.build import build_plan  # noqa: E402
from launcher.spec import load_spec  # noqa: E402

MINIMAL = "name: demo\nmodel: {preset: llama2-7b}\ncluster: {region: us-west-2}\noutput: {path: s3://my-bucket/smp}\n"
RUNS = 5


def _bomb(levels: int) -> str:
    lines = ["  a0: &a0 [x,x,x,x,x,x,x,x,x]"]
    lines += [f"  a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "hyperparameters:\n" + "\n".join(lines) + "\n"


ESCAPE = "{{ cycler.__init__.__globals__.os.system('touch %s') }}"  # a way out of an unsandboxed template
ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's documentation example of an access key id


def _team(tmp: Path, name: str, files: dict[str, str | Path]) -> str:
    """A team templates folder; a Path value is a link to that file."""
    folder = tmp / name
    folder.mkdir()
    for file, text in files.items():
        if isinstance(text, Path):
            (folder / file).symlink_to(text)
        else:
            (folder / file).write_text(text)
    return f"templates={folder}"


def cases(tmp: Path) -> list[tuple[str, Path, list[str]]]:
    def spec(name: str, text: str | bytes) -> Path:
        path = tmp / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    spec("credentials", f"[default]\naws_access_key_id = {ACCESS_KEY}\n")  # what a link template points at

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


def obeyed(tmp: Path) -> list[tuple[str, Path, list[str]]]:
    """Inputs a naive planner obeys: each must be refused (and the shell command must not run)."""
    base = tmp / "base.yaml"
    credentials = tmp / "credentials"
    return [
        ("hyperparameter sagemaker_program (the SDK's)", base, ["hyperparameters.sagemaker_program=evil.py"]),
        ("template escaping to a shell", base, [_team(tmp, "escape", {"train.py.j2": ESCAPE % (tmp / "ran")})]),
        ("template linking to a credentials file", base, [_team(tmp, "link", {"requirements.txt.j2": credentials})]),
        ("template writing a credential", base, [_team(tmp, "leak", {"requirements.txt.j2": f"# {ACCESS_KEY}\n"})]),
    ]


def timed(path: Path, overrides: list[str]) -> tuple[float, bool]:
    """The median time to load and plan (or refuse), and whether it was refused every time."""
    times, refused = [], True
    for _ in range(RUNS):
        t0 = time.perf_counter()
        try:
            plan = build_plan(load_spec(path, overrides))
            plan.source  # noqa: B018 (renders the source as a submit would)
            refused = False
        except LauncherError:
            pass
        times.append(time.perf_counter() - t0)
    return statistics.median(times), refused


def main() -> None:
    anchor, _ = timed(REPO / "jobs" / "llama7b.yaml", [])
    print(f"median of {RUNS} runs in-process (load_spec + build_plan + the source rendered), "
          f"Python {sys.version.split()[0]}")
    print(f"{'input':45} {'wall s':>8} {'x anchor':>9}  verdict (goal: under 2 s; the last four refused)")
    print(f"{'jobs/llama7b.yaml (anchor)':45} {anchor:8.3f} {1:9.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        found = [(c, False) for c in cases(Path(tmp))] + [(c, True) for c in obeyed(Path(tmp))]
        for (name, path, overrides), must_refuse in found:
            t, refused = timed(path, overrides)
            ran = (Path(tmp) / "ran").exists()
            verdict = ("RAN A SHELL COMMAND" if ran else "NOT REFUSED" if must_refuse and not refused
                       else "ok" if t < 2 else "MISSED")
            print(f"{name:45} {t:8.3f} {t / anchor:9.2f}  {verdict}")


if __name__ == "__main__":
    main()
