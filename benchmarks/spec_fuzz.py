"""Fuzz the spec loader and `--set` through the real CLI entry point, in-process.

Each input (a spec file's bytes and a list of `--set` expressions) goes through `validate`; an input
that `validate` refuses also goes through `submit`, whose AWS calls are counted at a proxy. The
invariants: no traceback, no run past the time limit, a documented exit code, and no AWS call for
an invalid input. Used by benchmarks/reliability.py and tests/test_reliability_short.py.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import tempfile
import time
import typing
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

EXIT_CODES = {0, 1, 2, 3, 4, 5, 130}
BASE = {"name": "demo", "model": {"preset": "llama2-7b"}, "cluster": {"region": "us-west-2"},
        "output": {"path": "s3://my-bucket/smp"}, "role": "Good"}
SET_VALUES = ["010", "0x1F", "1e400", "-0", ".inf", ".nan", "&a [*a, *a]", "*x", "!!python/object/apply:os.system [id]",
              "${HOME}", "${SMP_FUZZ_UNSET:-1}", "${SMP_FUZZ_UNSET}", "[1, {a: b}]", "{", "'", "\"\\x00\"", "~", "",
              "yes", "2h", "s3://b-1/'\"x", "\u202e\u0007\x1b]0;t\x07"]


SECRET_MARK = "$6$saltsalt$hashhashhash"  # the content of a non-spec file that must never be echoed
ESCAPED = "escaped"  # the file a template that escaped Jinja's sandbox creates
# Secrets the hand-written inputs hand the loader (by variable, or as literal credentials): never echoed either.
SECRET_VARS = {"FUZZ_DB_PASSWORD": "31337421", "FUZZ_HF_TOKEN": "hf_" + "Zq7" * 199,
               "FUZZ_SESSION": "IQoJb3JpZ2luX2VjEJr" + "Kx9/" * 60}
ACCESS_KEY = "AKIA" + "QX7Z" * 4
LEAK_MARKS = (SECRET_MARK, ACCESS_KEY, *(v[:16] for v in SECRET_VARS.values()))


class TooSlow(Exception):
    pass


def spec_paths() -> list[str]:
    """Every dotted key of the spec schema (from the pydantic models), for the fuzzer to aim at."""
    from pydantic import BaseModel

    from launcher.spec.models import JobSpec

    def model_in(annotation: Any):
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation
        for arg in typing.get_args(annotation):
            found = model_in(arg)
            if found is not None:
                return found
        return None

    out: list[str] = []

    def walk(cls, prefix: str) -> None:
        for name, f in cls.model_fields.items():
            path = f"{prefix}{name}"
            out.append(path)
            sub = model_in(f.annotation)
            if sub is not None:
                walk(sub, path + ".")

    walk(JobSpec, "")
    return out


def values() -> st.SearchStrategy:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=-2, max_value=2 ** 70),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
                        st.sampled_from(["llama2-7b", "ml.p4d.24xlarge", "s3://my-bucket/x", "synthetic", "auto",
                                         "smddp", "bf16", "1h", "us-west-2", "Good"]))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                        max_leaves=12)


def inputs(paths: list[str]) -> st.SearchStrategy:
    """(spec file bytes, --set list)."""
    import yaml

    def build(edits, raw_tail, encoding) -> bytes:
        data: dict = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
        for path, value in edits:
            node = data
            parts = path.split(".")
            for part in parts[:-1]:
                if not isinstance(node.get(part), dict):
                    node[part] = {}
                node = node[part]
            node[parts[-1]] = value
        text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False) + raw_tail
        return text.encode(encoding, errors="replace")

    key = st.one_of(st.sampled_from(paths), st.text(min_size=1, max_size=12))
    spec = st.builds(build, st.lists(st.tuples(key, values()), max_size=5),
                     st.one_of(st.just(""), st.text(max_size=30)), st.sampled_from(["utf-8", "utf-8", "latin-1"]))
    raw = st.binary(max_size=200)
    set_value = st.one_of(st.sampled_from(SET_VALUES), st.text(max_size=20))
    sets = st.lists(st.builds(lambda k, v: f"{k}={v}", key, set_value), max_size=3)
    return st.tuples(st.one_of(spec, spec, raw), sets)


def corpus(folder: Path) -> list[tuple[str, bytes, list[str]]]:
    """Hand-written hostile inputs, one per way bad input has to be refused: (label, spec bytes, --set list)."""
    import yaml

    ok = yaml.safe_dump(BASE).encode()
    bomb = b"a: &a [x, x, x, x, x, x, x, x, x]\n" + b"".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n".encode()
        for i in range(8))
    secret = folder / "shadow"
    secret.write_text(f"root:{SECRET_MARK}:19000:0:99999:7:::\n")
    fifo = folder / "endless.yaml"
    if not fifo.exists():
        os.mkfifo(fifo)
    escape = folder / "escape-tpl"  # a team template that runs a shell command if it renders unsandboxed
    escape.mkdir(exist_ok=True)
    (escape / "train.py.j2").write_text("{{ cycler.__init__.__globals__.os.system('touch %s') }}\n"
                                        % (folder / ESCAPED))
    chain_dir = folder / "chain"
    chain_dir.mkdir(exist_ok=True)
    for i in range(3000):
        (chain_dir / f"{i}.yaml").write_text(f"extends: {i + 1}.yaml\n" if i < 2999 else "smp: {}\n")
    return [
        ("alias bomb", ok + bomb, []),
        ("Latin-1 bytes", ok + "description: caf\u00e9\n".encode("latin-1"), []),
        ("UTF-16 with BOM", yaml.safe_dump(BASE).encode("utf-16"), []),
        ("NUL byte", ok + b"description: a\x00b\n", []),
        ("ESC byte", ok + b"description: a\x1b[2Jb\n", []),
        ("nesting past the recursion limit", ok + b"description: " + b"[" * 5000 + b"]" * 5000 + b"\n", []),
        ("extends chain of 3000 files", b"extends: chain/0.yaml\n" + ok, []),
        ("batch_size 4194304", ok, ["training.batch_size=4194304"]),
        ("batch_size 10**30", ok, ["training.batch_size=" + "1" + "0" * 30]),
        ("extends a non-spec file", b"extends: shadow\n" + ok, []),
        ("extends a file that never ends", b"extends: endless.yaml\n" + ok, []),
        ("--set alias bomb", ok, ["description=" + bomb.decode().replace("\n", ", ").join("{}")]),
        ("--set extends", ok, ["extends=shadow"]),
        ("instance_count 010", ok, ["cluster.instance_count=010"]),
        ("seed beyond 2**32", ok, ["training.seed=" + str(2 ** 40)]),
        ("--set path of 1,000 parts", ok, [".".join(["a"] * 1000) + "=1"]),
        ("--set path of 20,000 parts", ok, [".".join(["a"] * 20000) + "=1"]),
        ("numeric secret in a number field", ok, ["cluster.instance_count=${FUZZ_DB_PASSWORD}"]),
        ("600-character token in environment", ok, ["environment.FUZZ_HF_TOKEN=${FUZZ_HF_TOKEN}"]),
        ("session token under a plain name", ok, ["environment.SESSION=${FUZZ_SESSION}"]),
        ("session token in a hyperparameter", ok, ["hyperparameters.token=${FUZZ_SESSION}"]),
        ("access key id in a tag", ok, [f"tags.team={ACCESS_KEY}"]),
        ("access key id in a hyperparameter", ok + f"hyperparameters: {{key: {ACCESS_KEY}}}\n".encode(), []),
        ("hyperparameter the SDK sets (sagemaker_program)", ok, ["hyperparameters.sagemaker_program=evil.py"]),
        ("hyperparameter the SDK sets (mp_parameters)", ok + b"hyperparameters: {mp_parameters: '{}'}\n", []),
        ("team template escaping to a shell", ok + b"templates: escape-tpl\n", []),
    ]


class Runner:
    """Runs one input through the CLI in-process, with a time limit and the proxy's call count."""

    def __init__(self, folder: Path, proxy, time_limit_s: float):
        self.folder, self.proxy, self.limit = folder, proxy, time_limit_s
        self.tracebacks: list[str] = []
        self.slow: list[str] = []
        self.bad_exit: list[str] = []
        self.calls: list[str] = []
        self.leaks: list[str] = []
        self.invalid = 0
        self.counts: dict[tuple[str, str], int] = {}
        self.aws_calls_on_invalid = 0
        self.n = 0

    def cli(self, args: list[str]) -> tuple[int | str, str]:
        from launcher.cli import main

        out, err = io.StringIO(), io.StringIO()
        armed = [True]

        def alarm(*_):
            if armed[0]:
                raise TooSlow()

        def call() -> int | str:
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    main(args)
                return 0
            except SystemExit as exc:
                return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except TooSlow:
                raise
            except RecursionError:
                return "traceback: RecursionError"
            except Exception as exc:  # noqa: BLE001 - a traceback is what we are looking for
                return f"traceback: {type(exc).__name__}: {str(exc)[:120]}"

        old = signal.signal(signal.SIGALRM, alarm)
        code: int | str = "slow"
        try:
            try:
                signal.setitimer(signal.ITIMER_REAL, self.limit)
                code = call()
            finally:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
        except TooSlow:
            code = "slow"
        return code, out.getvalue() + err.getvalue()

    def check(self, label: str, spec: bytes, sets: list[str]) -> None:
        self.n += 1
        path = self.folder / f"fuzz-{self.n}.yaml"
        path.write_bytes(spec)
        set_args = [a for s in sets for a in ("--set", s)]
        shown = f"{label}: {spec[:60]!r} {sets!r}"[:200]
        code, text = self.cli(["validate", str(path), *set_args])
        self._judge(shown, "validate", code, text)
        if code == 2:
            self.invalid += 1
            before = len(self.proxy.calls)
            code, text = self.cli(["submit", str(path), *set_args])
            self._judge(shown, "submit", code, text)
            made = len(self.proxy.calls) - before
            if made:
                self.aws_calls_on_invalid += made
                self.calls.append(f"{shown} -> submit made {made} AWS calls")
        path.unlink()

    def _judge(self, shown: str, command: str, code, text: str) -> None:
        if (self.folder / ESCAPED).exists():
            self._add(self.leaks, f"{command} ran a template's shell command here", shown)
            (self.folder / ESCAPED).unlink()
        if any(mark in text for mark in LEAK_MARKS):
            self._add(self.leaks, f"{command} echoed another file's content or a secret", shown)
        if code == "slow":
            self._add(self.slow, f"{command} > {self.limit:.0f} s", shown)
        elif isinstance(code, str) or "Traceback" in text:
            self._add(self.tracebacks, f"{command}: {code if isinstance(code, str) else 'Traceback printed'}", shown)
        elif code not in EXIT_CODES:
            self._add(self.bad_exit, f"{command} exit {code}", shown)

    def _add(self, found: list[str], what: str, shown: str) -> None:
        """Every failure of a hand-written input; one entry per kind of failure of the generated ones
        (numbers, bytes and quoted text folded), with its first example."""
        label = shown.split(":", 1)[0]
        kind = (label, re.sub(r"'[^']*'|0x[0-9a-f]+|#x[0-9a-f]+|\d+", "_", what)[:100])
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if self.counts[kind] == 1:
            found.append(f"{what} -- first seen on {shown}")


@contextlib.contextmanager
def _environment(proxy, folder: Path):
    saved = dict(os.environ)
    os.environ.update({"AWS_ENDPOINT_URL": proxy.url, "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-west-2",
                       "AWS_REGION": "us-west-2", "XDG_STATE_HOME": str(folder / "state"), "NO_COLOR": "1",
                       "AWS_MAX_ATTEMPTS": "1", "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
                       "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull, **SECRET_VARS})
    for k in ("SMP_LAUNCH_ROLE", "SMP_LAUNCH_BUCKET", "AWS_PROFILE"):
        os.environ.pop(k, None)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)


def run(examples: int, seed_value: int, time_limit_s: float, proxy, with_corpus: bool = True) -> dict:
    """Fuzz `examples` generated inputs (and the corpus); returns what broke an invariant."""
    import launcher.submission.create  # noqa: F401 - warm the SDK import so it does not count against the time limit

    with tempfile.TemporaryDirectory(prefix="smp-fuzz-") as tmp, _environment(proxy, Path(tmp)):
        folder = Path(tmp)
        runner = Runner(folder, proxy, time_limit_s)
        hand = corpus(folder) if with_corpus else []
        for label, spec, sets in hand:
            runner.check(label, spec, sets)

        @seed(seed_value)
        @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck))
        @given(inputs(spec_paths()))
        def generated(case):
            runner.check("generated", *case)

        if examples:
            t0 = time.monotonic()
            generated()
            elapsed = time.monotonic() - t0
        else:
            elapsed = 0.0
    return {"examples": examples, "seed": seed_value, "corpus": len(hand), "time_limit_s": time_limit_s,
            "tracebacks": runner.tracebacks, "slow": runner.slow, "bad_exit": runner.bad_exit,
            "calls": runner.calls, "leaks": runner.leaks, "failures": sum(runner.counts.values()),
            "invalid": runner.invalid,
            "aws_calls_on_invalid": runner.aws_calls_on_invalid,
            "elapsed_s": round(elapsed, 1)}
