"""Mutation testing of every product module: would the suite notice a realistic one-token bug?

    python benchmarks/mutation.py [--budget-s 900] [--seed 11] [--module memory] [--list] [--map FILE]

First the whole suite runs once in a copy of the tree under coverage, each test its own coverage context (the
`--map` step; its result can be kept and reused with --map FILE): that says, for every line of every module,
which tests run it, how long each took and whether it passed. Each mutant changes one thing in one module (a
comparison flipped, `+` for `-`, an integer off by one, `and` for `or`, a `not` dropped, a `return` or `raise`
removed, True for False, a condition negated), found by walking the module's syntax tree, and runs against EVERY
test that runs its line and passed unmutated, those whose own text names what the line holds first, then those in
files that import the module, then the fastest (pytest stops at the first failure: the order decides only how
soon a kill is known). A mutant on a line no test runs is "uncovered" and counts as a survivor: nothing would
notice it. Mutants are sampled in a seeded order, round-robin over the modules, until the time budget is spent. A
mutant is killed when a test fails or the run passes three times its tests' own time.

Every module under launcher/ is mutated except launcher/runtime/, the job's own code, which runs only inside
torchrun's worker processes: the CPU local runs check it, at minutes a run. The map follows the Python
subprocesses a test starts (the end-to-end tests run the installed `smp-launch`), so a line that only a
subprocess runs belongs to the test that started it.

The working tree is never written: everything runs in a copy under a temporary folder, and the original
files' hashes are checked at the end. The score, per module, and the survivors are printed and saved to
benchmarks/results/mutation.json, which docs/reliability.md quotes.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import functools
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "mutation.json"
COPIED = ("launcher", "emulator", "tests", "jobs", "schema", "docs", "templates", "tools", "benchmarks", "setup.cfg",
          "setup.py", "MANIFEST.in", "Makefile", "pyproject.toml", "README.md", "mkdocs.yml")

EXCLUDED = ("launcher/runtime/",)  # see the docstring
MAP_PLUGIN = "benchmarks.coverage_map"


def product_modules() -> list[str]:
    """Every module of the package with code in it, but the excluded ones."""
    out = []
    for path in sorted((REPO / "launcher").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(EXCLUDED) or not _sites(ast.parse(path.read_text())):
            continue
        out.append(rel)
    return out


_NEVER_UNSAFE = ("sanitize's _escape sees only _UNSAFE_CLASS's characters (and a backslash), none of them at U+00FF, "
                 "U+0100, U+E000, U+FFFF or U+10000: only those tell these bounds apart")
# Mutants that cannot change behaviour, found by reading them: (module, the line's code, change) -> why.
EQUIVALENT = {
    ("launcher/local/run.py", "record = RunRecord(exit_code=1, wall_s=0.0)", "1 -> 2"):
        "the exit code is always set from proc.wait() before the record is returned; Ctrl-C re-raises instead",
    ("launcher/spec/loader.py",
     """f"{shown(text)} from {value}: {clean(getattr(exc, 'problem', exc), limit=200)}"))""", "200 -> 201"):
        "scalar() on plain text fails only for an integer of more than 40 digits or a `<<`, both worded in well "
        "under 200 characters",
    ("launcher/spec/loader.py", "return []", "return X -> return None"):
        "every unknown key pydantic reports sits under JobSpec or one of its section models, so the walk never "
        "meets a field that is not a model",
    ("launcher/jobs/late_check.py", "return 0  # nothing to sweep yet", "0 -> 1"):
        "_sweeps runs only with Insights given up; check() reads the calls spent only in its Insights wait loop, "
        "and finish() drops them",
    ("launcher/jobs/late_check.py", "w.histogram, w.part = False, True  # not the counts asked for: split evenly "
     "instead", "False -> True"):
        "_split_even replaces the window by parts or makes it a sweep window; _sweep_window never reads histogram",
    ("launcher/jobs/late_check.py", "w.histogram, w.done = False, True  # nothing arrived late in it after all",
     "False -> True"):
        "nothing reads histogram on a window that is done",
    ("launcher/jobs/late_check.py", "for a, b in zip(edges, edges[1:], strict=False) if b > a]", "> -> >="):
        "the edges are strictly increasing (at least a second apart, between the window's ends), so b > a and "
        "b >= a are both always true",
    ("launcher/catalog/prices.py", 'json.dump({"version": CACHE_VERSION, "prices": rows}, f, indent=1)', "1 -> 2"):
        "the price cache's indentation: json reads it back the same, and no output shows the file's bytes",
    ("launcher/rules/checks.py", "if tp <= s.tensor_parallel_degree or ctx.world % (tp * cp):", "<= -> <"):
        "the current degree's global batch is over the limit by definition, so it is never suggested",
    ("launcher/submission/role.py", 'repo_account = image.split(".", 1)[0] if image else SMP_IMAGE_ACCOUNT', "1 -> 2"):
        "the first part of a split does not depend on how many more splits are made",
    ("launcher/spec/loader.py", "return str(path)", "return X -> return None"):
        "os.path.relpath raises ValueError only for paths on different Windows drives",
    ("launcher/rules/checks.py", "gb = _fits(ctx, shard_degree=shard) if shard > ctx.shard else None", "> -> >="):
        "SMP060 fires only when the current degree does not fit, so trying it again finds nothing",
    ("launcher/rules/memory.py",
     "experts_on_rank = max(1, arch.num_experts // lay.expert_parallel) if arch.num_experts > 1 else None", "> -> >="):
        "a dense model has num_experts 1, and layer_parameters(experts=1) is its dense layer",
    ("launcher/rules/engine.py", "return fn", "return X -> return None"):
        "the registry keeps the function; nothing calls a check through its module-level name",
    ("launcher/render/files.py",
     '"max_position_embeddings": max(spec.model.seq_length, preset.max_position_embeddings if preset else 0),',
     "0 -> 1"): "seq_length is at least 1, so max() never picks the 0 or the 1",
    ("launcher/rules/checks.py", "if ep > 1 and ctx.arch.num_experts % ep:", "> -> >="):
        "any number of experts is divisible by 1",
    ("launcher/spec/loader.py", "return Mark(file, 1, 1)", "1 -> 2"):
        "every spec has a mark for its root (), so this fallback is never reached",
    ("launcher/render/templates.py", "lstrip_blocks=True,", "True -> False"):
        "no template indents a block tag today: every rendered file stays byte-identical (the goldens)",
    ("launcher/rules/decisions.py", "NATIVE_HYBRID_SHARD_DEGREE = 8", "8 -> 9"):
        "used only in min(world, 8, gpus) and every instance in the catalog has 8 GPUs",
    ("launcher/spec/loader.py",
     "elif isinstance(node, list) and part.isdigit() and int(part) < len(node):", "< -> <="):
        "pydantic reports only list indices it visited, so an index never equals the list's length",
    ("launcher/spec/loader.py", 'fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))', "0 -> 1"):
        "the default is for platforms without O_NONBLOCK; every POSIX system has it",
    ("launcher/rules/memory.py",
     'phase, transient = ("forward/backward", step) if step >= parts["optimizer_step"] else (',
     ">= -> >"): "at exact equality both branches give the same transient; only the label could differ",
    ("launcher/cli/present.py", 'notes += [w.split(":", 1)[0] for w in candidate.warnings]', "1 -> 2"):
        "the first part of a split does not depend on how many more splits are made",
    ("launcher/cli/prices.py", "region_name = report.rows[0].region if report.rows else region", "0 -> 1"):
        "every instance type has two rows, on-demand and spot, all in the one region the report is for",
    ("launcher/core/sanitize.py", "if 0xD800 <= code <= 0xDFFF:", "57343 -> 57344"): _NEVER_UNSAFE,
    ("launcher/core/sanitize.py", "if code <= 0xFF:", "<= -> <"): _NEVER_UNSAFE,
    ("launcher/core/sanitize.py", "if code <= 0xFF:", "255 -> 256"): _NEVER_UNSAFE,
    ("launcher/core/sanitize.py", "if code <= 0xFFFF:", "<= -> <"): _NEVER_UNSAFE,
    ("launcher/core/sanitize.py", "if code <= 0xFFFF:", "65535 -> 65536"): _NEVER_UNSAFE,
    ("launcher/cli/app.py", "print(record.getMessage(), file=sys.stderr, flush=True)", "True -> False"):
        "stderr is line-buffered on every Python smp-launch supports (3.9 on), and print ends the line",
    ("launcher/cli/logprint.py", 'return line.stream.split("/", 1)[0]', "1 -> 2"):
        "the first part of a split does not depend on how many more splits are made",
    ("launcher/core/state.py",
     'fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO opens without waiting for a writer',
     "0 -> 1"):
        "the default is for platforms without O_NONBLOCK; every POSIX system has it",
    ("launcher/core/state.py", "data = f.read(MAX_BYTES + 1)", "1 -> 2"):
        "any read past the limit tells a larger file: one byte past it or two",
    ("launcher/api.py", "rows.sort(key=lambda r: r.created or 0, reverse=True)", "0 -> 1"):
        "a job's created time is epoch seconds of this century: no row falls between 0 and 1",
    ("launcher/rules/decisions.py", "if copies > instance.host_memory_gib:", "> -> >="):
        "the two differ only for a model of exactly host_memory_gib * 2**25 parameters (no real model)",
    ("launcher/spec/models.py",
     "close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)", "1 -> 2"):
        "get_close_matches returns its best match first whatever n, and only that one is used",
    ("launcher/render/distribution.py",
     "close = difflib.get_close_matches(key, list(PARAMETERS), n=1, cutoff=0.6)", "1 -> 2"):
        "get_close_matches returns its best match first whatever n, and only that one is used",
    ("launcher/render/templates.py",
     "close = difflib.get_close_matches(path.name, base.names, n=1, cutoff=0.6)", "1 -> 2"):
        "get_close_matches returns its best match first whatever n, and only that one is used",
    ("launcher/rules/advise.py",
     "if cluster.world_size % tp or arch.num_heads % tp or arch.num_key_value_heads % tp:", "or -> and"):
        "a shortcut: the rules refuse a tensor degree that does not divide the world or the heads (checks.py), and "
        "every preset's heads divide by every TP choice",
    ("launcher/plan/sweep.py",
     'sets = tuple(f"{s.key}={value}" for s, (value, _) in zip(sweeps, combo, strict=True))', "True -> False"):
        "combo is one element of itertools.product over the sweeps, so it has exactly one value per sweep",
    ("launcher/plan/sweep.py", "choices = [list(zip(s.values, s.columns, strict=True)) for s in sweeps]",
     "True -> False"): "parse_sweep appends a value and its column together, so the two have the same length",
    ("launcher/predict/fit.py", "@lru_cache(maxsize=1)", "1 -> 2"):
        "published_fit takes no arguments, so its cache holds one entry whatever its size",
    ("launcher/render/templates.py", "return str(path)", "return X -> return None"):
        "os.path.relpath raises ValueError only for paths on different Windows drives",
    ("launcher/render/progress.py", "return {f: float(v) for f, v in zip(FIELDS, m.groups(), strict=True)}",
     "True -> False"): "LINE_RE has exactly one group per field, so the two always have the same length",
    ("launcher/orchestrate/batch.py",
     "return batch.account_check(plan, clients, options, skip_role_check=skip_role_check)",
     "return X -> return None"): "run_queue calls its `check` only for what it raises and drops what it returns",
    ("launcher/jobs/queued.py",
     "status = status_of(clients, describe_service_job(clients, item.job_arn or item.job_id))", "or -> and"):
        "a DescribeServiceJob answer always has jobArn, and jobId takes the id or the ARN alike",
    ("launcher/jobs/queued.py", "return last", "return X -> return None"):
        "training_jobs always ends by yielding a QueueState, on which the loop returns: this line is never reached",
    ("launcher/orchestrate/provenance.py", 'tags = [t for t in plan.estimator.tags if t["Key"] != GIT_COMMIT_TAG] + '
     "old_commit[:1] + [", "1 -> 2"): "tag keys are unique on a SageMaker resource: at most one git-commit tag",
}

CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
            ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult}
SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.In: "in",
          ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
          ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.And: "and", ast.Or: "or"}


@dataclass
class Mutant:
    module: str
    index: int          # the index-th mutation site of the module, in tree-walk order
    line: int
    change: str
    status: str = "not run"   # killed | survived | uncovered (survived: no test runs it) | timeout (killed) | not run
    seconds: float = 0.0
    tests: int = 0            # the tests it ran against


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _sites(tree: ast.AST) -> list[tuple[ast.AST, str, object]]:
    """Every place a mutation applies: (node, description, how), in a stable walk order."""
    docs = _docstring_nodes(tree)
    out: list[tuple[ast.AST, str, object]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in CMP_SWAP:
                    new = CMP_SWAP[type(op)]
                    out.append((node, f"{SYMBOL[type(op)]} -> {SYMBOL[new]}", ("cmp", i)))
        elif isinstance(node, ast.BinOp) and type(node.op) in BIN_SWAP:
            if isinstance(node.op, ast.Add) and any(isinstance(s, ast.Constant) and isinstance(s.value, str)
                                                    for s in (node.left, node.right)):
                continue  # string concatenation: "a" - "b" is only a TypeError, not a realistic bug
            new = BIN_SWAP[type(node.op)]
            out.append((node, f"{SYMBOL[type(node.op)]} -> {SYMBOL[new]}", ("bin",)))
        elif isinstance(node, ast.BoolOp):
            new = "or" if isinstance(node.op, ast.And) else "and"
            out.append((node, f"{SYMBOL[type(node.op)]} -> {new}", ("bool",)))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            out.append((node, "drop `not`", ("not",)))
        elif isinstance(node, ast.Constant) and id(node) not in docs:
            if isinstance(node.value, bool):
                out.append((node, f"{node.value} -> {not node.value}", ("bool_const",)))
            elif isinstance(node.value, int):
                out.append((node, f"{node.value} -> {node.value + 1}", ("int",)))
        elif isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and not node.value.value):  # `return False` ~ `return None`
            out.append((node, "return X -> return None", ("return",)))
        elif isinstance(node, ast.Raise):
            out.append((node, "drop `raise`", ("raise",)))
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            out.append((node, "if C -> if not C", ("negate_if",)))
    return out


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _apply(node: ast.AST, how: tuple) -> None:
    kind = how[0]
    if kind == "cmp":
        node.ops[how[1]] = CMP_SWAP[type(node.ops[how[1]])]()
    elif kind == "bin":
        node.op = BIN_SWAP[type(node.op)]()
    elif kind == "bool":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "bool_const":
        node.value = not node.value
    elif kind == "int":
        node.value = node.value + 1
    elif kind == "return":
        node.value = ast.Constant(None)
    elif kind == "negate_if":
        node.test = ast.UnaryOp(ast.Not(), node.test)


class _Replace(ast.NodeTransformer):
    """Replace whole statements (`not` dropped, `raise` removed) that _apply cannot change in place."""

    def __init__(self, target: ast.AST, how: tuple):
        self.target, self.how = target, how

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        return node.operand if node is self.target else node

    def visit_Raise(self, node):
        if node is self.target:
            return ast.Pass()
        self.generic_visit(node)  # a `not` to drop may sit inside the raise (its message's condition)
        return node


def mutate(source: str, index: int) -> str:
    """The module's source with its index-th mutation applied."""
    tree = ast.parse(source)
    node, _, how = _sites(tree)[index]
    if how[0] in ("not", "raise"):
        tree = _Replace(node, how).visit(tree)
    else:
        _apply(node, how)
    return ast.unparse(ast.fix_missing_locations(tree))


def mutants_of(module: str) -> list[Mutant]:
    """The module's mutants, less the ones EQUIVALENT names."""
    source = (REPO / module).read_text()
    lines = source.splitlines()
    out = []
    for i, (node, change, _) in enumerate(_sites(ast.parse(source))):
        line = getattr(node, "lineno", 0)
        if (module, lines[line - 1].strip() if line else "", change) not in EQUIVALENT:
            out.append(Mutant(module, i, line, change))
    return out


PRELOAD = ("pytest", "yaml", "jinja2", "pydantic", "click", "rich", "boto3", "botocore.session", "moto",
           "moto.server", "moto.sagemaker.models", "moto.logs.models", "moto.iam.models", "moto.s3.models", "flask")


class Worker:
    """A process that has imported pytest and the heavy libraries (never `launcher`) once and forks a
    child per test run: each child imports the mutated module fresh from the copy and runs pytest."""

    def __init__(self, root: Path):
        env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1",
               "SAGEMAKER_SUPPRESS_V2_WARNING": "1"}
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"], cwd=root,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, args: list[str], timeout: float) -> tuple[str, float]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"args": args, "timeout": timeout}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the mutation worker ended")
        reply = json.loads(line)
        return reply["outcome"], reply["seconds"]

    def close(self) -> None:
        """End the worker and any test run it has going (it kills its child's process group on SIGTERM)."""
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _worker() -> None:
    """The loop Worker talks to: one JSON request a line in, one JSON reply a line out."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    assert "launcher" not in sys.modules, "the worker must import the mutated launcher in each child"
    sys.path.insert(0, os.getcwd())
    running: list[int] = []

    def terminate(*_):
        for child in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)
        os._exit(0)

    signal.signal(signal.SIGTERM, terminate)
    for line in sys.stdin:
        request = json.loads(line)
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # the child: one quiet pytest run in its own process group
            os.setsid()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            import pytest

            code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", *request["args"]])
            os._exit(int(code))
        running[:] = [pid]
        outcome = None
        while outcome is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                outcome = "passed" if code == 0 else f"failed (exit {code})"
            elif time.perf_counter() - t0 > request["timeout"]:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                outcome = "timeout"
            else:
                time.sleep(0.02)
        running.clear()
        print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - t0}), flush=True)


def _hashes(paths) -> dict[str, str]:
    return {p: hashlib.sha256((REPO / p).read_bytes()).hexdigest() for p in paths}


def _copy_tree(dest: Path) -> None:
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.exists():
            shutil.copy2(src, dest / name)


def _schedule(modules: list[str], seed: int) -> list[Mutant]:
    """Each module's mutants in a seeded random order, interleaved so every module gets its share."""
    rng = random.Random(seed)
    queues = []
    for module in modules:
        ms = mutants_of(module)
        rng.shuffle(ms)
        queues.append(ms)
    order: list[Mutant] = []
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order


def build_map(root: Path, jobs: int, log=print, tests: tuple[str, ...] = ("tests",)) -> dict:
    """Run the whole suite once in `root` under coverage, a context per test: {"lines": {module: {line: [node
    ids]}}, "tests": {node id: [seconds, passed]}, "seconds": the run's wall time}."""
    from coverage import CoverageData

    out_dir = root / ".mutation-map"
    out_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(root), "SMP_MUTATION_MAP_DIR": str(out_dir),
           "SAGEMAKER_SUPPRESS_V2_WARNING": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", MAP_PLUGIN, *tests]
    if jobs > 1:
        args[4:4] = ["-n", str(jobs)]
    else:
        env["SMP_MUTATION_MAP_SERIAL"] = "1"
    log(f"mutation: mapping which tests run each line ({' '.join(args[1:])})")
    started = time.perf_counter()
    done = subprocess.run(args, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - started
    log("  " + (done.stdout.strip().splitlines() or ["(no output)"])[-1] + f" ({seconds:.0f} s)")
    tests: dict[str, list] = {}
    for part in out_dir.glob("outcomes-*.json"):
        tests.update(json.loads(part.read_text()))
    combined = CoverageData(basename=str(out_dir / ".coverage.all"))
    for part in out_dir.glob(".coverage.*"):
        if part.name == ".coverage.all":
            continue
        one = CoverageData(basename=str(part))
        one.read()
        combined.update(one)
    lines: dict[str, dict[str, list[str]]] = {}
    # lines that ran while the module was imported in the test process, outside any test (a subprocess's import
    # runs them again inside its test's context, but every test that uses the module depends on them)
    imported: dict[str, list[int]] = {}
    for path in combined.measured_files():
        module = Path(path).resolve().relative_to(root.resolve()).as_posix()
        by_line = combined.contexts_by_lineno(path)
        lines[module] = {str(n): sorted(c for c in ctx if c) for n, ctx in by_line.items() if any(ctx)}
        imported[module] = sorted(n for n, ctx in by_line.items() if "" in ctx)
    return {"lines": lines, "imported": imported, "tests": tests, "seconds": round(seconds, 1)}


@functools.cache
def import_time_lines(module: str) -> frozenset[int]:
    """The lines a module runs once, when it is imported: everything but its functions' bodies (a command's
    decorators and their arguments, constants, class bodies, default values). Coverage credits them to the
    test that happened to import the module first (the commands load on first use, inside some test), yet
    every test that uses the module depends on them."""
    tree = ast.parse((REPO / module).read_text())
    lines = set(range(1, len((REPO / module).read_text().splitlines()) + 1))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines -= set(range(node.body[0].lineno, (node.body[-1].end_lineno or node.body[-1].lineno) + 1))
    return frozenset(lines)


CLI_ENTRY = ("launcher/cli/app.py", "cli.main(args=argv")  # the line every command line a test runs passes


@functools.cache
def _cli_entry_line() -> int:
    module, code = CLI_ENTRY
    return next(n for n, line in enumerate((REPO / module).read_text().splitlines(), 1) if code in line)


def _runs_a_command_line(mapping: dict) -> set[str]:
    """Tests that ran the CLI: a command module's decorators (its options' types, defaults, flags) act in every
    one of them, even one that never enters the module's functions (click refuses a bad value first)."""
    return set(mapping["lines"].get(CLI_ENTRY[0], {}).get(str(_cli_entry_line()), []))


@functools.cache
def _importers(module: str) -> frozenset[str]:
    """Test files that import `module` by name: a test that reads its data (a table, a constant) depends on its
    import-time lines without running any line of it, so coverage alone never links the two."""
    dotted = module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    found = set()
    for path in (REPO / "tests").glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                     if isinstance(node, ast.ImportFrom) and node.module else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if dotted in names:
                found.add(path.relative_to(REPO).as_posix())
    return frozenset(found)


def covering_tests(mapping: dict, mutant: Mutant) -> list[str]:
    """The tests that run the mutant's line and passed unmutated, the likeliest to notice first: those that
    run the most of the module per second of their own time (pytest stops at the first failure, so the order
    decides how soon a killed mutant is known, never whether it is). A line that runs only when its module is
    imported (a decorator's argument, a constant) belongs to no test: every test that runs any line of the
    module covers it, every test in a file that imports the module, and for a command module every test that
    runs the CLI."""
    tests = mapping["tests"]
    by_line = mapping["lines"].get(mutant.module, {})
    found = set(by_line.get(str(mutant.line), []))
    if mutant.line in mapping.get("imported", {}).get(mutant.module, []) or \
            mutant.line in import_time_lines(mutant.module):
        found |= {t for ts in by_line.values() for t in ts}
        if mutant.module.startswith("launcher/cli/"):
            found |= _runs_a_command_line(mapping)
        importers = _importers(mutant.module)
        found |= {t for t in mapping["tests"] if t.split("::", 1)[0] in importers}
    reach: dict[str, int] = {}
    for ts in by_line.values():
        for t in ts:
            if t in found:
                reach[t] = reach.get(t, 0) + 1
    passing = [t for t in found if tests.get(t, [0, False])[1]]
    named = _naming_tests(mutant, passing)
    own = _importers(mutant.module)  # the module's own test files name it in an import
    return sorted(passing, key=lambda t: (-named.get(t, 0), t.split("::", 1)[0] not in own,
                                          -reach.get(t, 0) / (tests[t][0] + 0.05), t))


COMMON = frozenset(dir(builtins)) | {
    "self", "cls", "True", "False", "None", "and", "or", "not", "return", "raise", "if", "else", "elif", "for",
    "in", "is", "lambda", "def", "class", "import", "from", "with", "as", "while", "yield", "assert", "await"}


def _line_tokens(module: str, line: int) -> set[str]:
    """The names, numbers and string contents on the mutant's (unmutated) line that could appear in a test
    that checks it: an exit code's value, a constant's name, an option's flag, a message's words."""
    import io
    import tokenize

    text = (REPO / module).read_text().splitlines()[line - 1].strip()
    found: set[str] = set()
    with contextlib.suppress(tokenize.TokenError, SyntaxError, IndentationError):
        for tok in tokenize.generate_tokens(io.StringIO(text + "\n").readline):
            if tok.type == tokenize.NAME and len(tok.string) >= 3 and tok.string not in COMMON:
                found.add(tok.string)
            elif tok.type == tokenize.NUMBER and tok.string not in ("0", "1", "2"):
                found.add(tok.string)
            elif tok.type == tokenize.STRING:
                with contextlib.suppress(ValueError, SyntaxError):
                    value = ast.literal_eval(tok.string)
                    if isinstance(value, str):
                        found |= {w.strip(".,;:!?()") for w in value.split() if len(w.strip(".,;:!?()")) >= 4}
    return found


def _command_of(module: str, line: int) -> set[str]:
    """The command a decorator line of a command module belongs to (`@click.command("calibrate")` above it, up
    to its function's `def`): the tests that run that command name it."""
    import re

    if not module.startswith("launcher/cli/"):
        return set()
    lines = (REPO / module).read_text().splitlines()
    for text in lines[line - 1:]:
        if text.startswith(("def ", "async def ")):
            break
        found = re.match(r'@(?:click|cli)\.(?:command|group)\("([a-z-]+)"', text)
        if found:
            return {found.group(1)}
    for text in reversed(lines[:line - 1]):
        if text.startswith(("def ", "class ")) or not text.strip():
            break
        found = re.match(r'@(?:click|cli)\.(?:command|group)\("([a-z-]+)"', text)
        if found:
            return {found.group(1)}
    return set()


@functools.cache
def _test_sources(path: str) -> dict[str, str]:
    """Each test function's own text (its decorators included), by its name within the file."""
    source = (REPO / path).read_text()
    lines = source.splitlines()
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out[node.name] = "\n".join(lines[first - 1:node.end_lineno])
    return out


def _naming_tests(mutant: Mutant, tests: list[str]) -> dict[str, int]:
    """How many of the line's distinctive tokens each test's own text names. A test that names what the line
    holds (the 143 an exit code is, the flag an option takes) is the likeliest to notice it, wherever the map
    would rank it: among the hundreds of tests that run a module's import-time lines it comes first. Tokens
    that most of the tests name say nothing and are left out."""
    import re

    tokens = _line_tokens(mutant.module, mutant.line) | _command_of(mutant.module, mutant.line)
    if not tokens or not tests:
        return {}
    texts = {}
    for t in tests:
        path, _, rest = t.partition("::")
        with contextlib.suppress(OSError, SyntaxError):
            texts[t] = _test_sources(path).get(rest.split("::")[-1].split("[")[0], "")
    hits = {tok: {t for t, text in texts.items() if re.search(rf"(?<!\w){re.escape(tok)}(?!\w)", text)}
            for tok in tokens}
    out: dict[str, int] = {}
    for named in hits.values():
        if 0 < len(named) <= max(3, len(tests) // 4):
            for t in named:
                out[t] = out.get(t, 0) + 1
    return out


def _run_all(root: Path, worker: Worker, budget_s: float, order: Iterator[Mutant], started: float, mapping: dict,
             results: list[Mutant], log, lock: threading.Lock) -> None:
    """Run mutants taken from `order` (shared by the workers, each with its own copy of the tree at `root`)
    until it is empty or the budget is spent."""
    while time.perf_counter() - started <= budget_s:
        with lock:
            mutant = next(order, None)
        if mutant is None:
            return
        tests = covering_tests(mapping, mutant)
        if not tests:
            mutant.status = "uncovered"
            with lock:
                results.append(mutant)
            log(f"  {mutant.status:9} {mutant.module}:{mutant.line}: {mutant.change}")
            continue
        own_time = sum(mapping["tests"][t][0] for t in tests)
        target = root / mutant.module
        original = (REPO / mutant.module).read_text()
        try:
            target.write_text(mutate(original, mutant.index))
            outcome, mutant.seconds = worker.run(tests, timeout=3 * own_time + 30)
        finally:
            target.write_text(original)
        mutant.tests = len(tests)
        mutant.status = "survived" if outcome == "passed" else ("timeout" if outcome == "timeout" else "killed")
        with lock:
            results.append(mutant)
        log(f"  {mutant.status:9} {mutant.module}:{mutant.line}: {mutant.change} "
            f"({len(tests)} tests, {mutant.seconds:.1f} s)")


def run(budget_s: float, seed: int, modules: list[str], log=print, order: list[Mutant] | None = None,
        map_file: Path | None = None, jobs: int = 2, tests: tuple[str, ...] = ("tests",), workers: int = 1) -> dict:
    """Map the suite (or read `map_file`), then run sampled mutants (or `order`) until the budget is spent;
    the score, per module, and the survivors (uncovered ones among them)."""
    order = _schedule(modules, seed) if order is None else order
    watched = [str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("*.py")] + modules
    before = _hashes(watched)
    results: list[Mutant] = []
    with tempfile.TemporaryDirectory(prefix="smp-mutation-") as tmp:
        root = Path(tmp)
        _copy_tree(root)
        if map_file is not None and map_file.exists():
            mapping = json.loads(map_file.read_text())
            log(f"mutation: using the map in {map_file}")
        else:
            mapping = build_map(root, jobs, log, tests)
            if map_file is not None:
                map_file.write_text(json.dumps(mapping))
        started = time.perf_counter()
        roots = [root]
        for n in range(1, workers):  # each worker mutates its own copy of the tree
            roots.append(root / f".worker-{n}")
            roots[-1].mkdir()
            _copy_tree(roots[-1])
        running = [Worker(r) for r in roots]
        lock, queue = threading.Lock(), iter(order)
        threads = [threading.Thread(target=_run_all, args=(r, w, budget_s, queue, started, mapping, results, log,
                                                           lock)) for r, w in zip(roots, running, strict=True)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for w in running:
                w.close()
        results.sort(key=lambda m: order.index(m))
    if _hashes(watched) != before:
        raise SystemExit("mutation: a file in the working tree changed while mutants ran; check `git status`")
    per_module = {}
    for module in modules:
        mine = [m for m in results if m.module == module]
        killed = sum(m.status in ("killed", "timeout") for m in mine)
        per_module[module] = {"killed": killed, "run": len(mine), "total": len(mutants_of(module)),
                              "uncovered": sum(m.status == "uncovered" for m in mine)}
    killed = sum(m.status in ("killed", "timeout") for m in results)
    failing = sorted(t for t, (_, passed) in mapping["tests"].items() if not passed)
    return {
        "seed": seed, "budget_s": budget_s, "workers": workers, "elapsed_s": round(time.perf_counter() - started, 1),
        "map_seconds": mapping.get("seconds"), "tests_mapped": len(mapping["tests"]),
        "tests_failing_unmutated": failing[:50],
        "modules": len(modules), "mutants": sum(r["total"] for r in per_module.values()),
        "killed": killed, "run": len(results), "score": round(killed / len(results), 4) if results else None,
        "uncovered": sum(m.status == "uncovered" for m in results),
        "per_module": per_module,
        "survivors": [asdict(m) for m in results if m.status in ("survived", "uncovered")],
    }


def recheck(budget_s: float, map_file: Path | None = None, jobs: int = 2) -> dict:
    """The last run with its survivors run again against today's tests: a survivor that is now killed
    counts as killed, and the record says how many were killed only by the recheck."""
    last = json.loads(RESULTS.read_text())
    order = []
    for s in list(last["survivors"]):
        code = (REPO / s["module"]).read_text().splitlines()[s["line"] - 1].strip()
        if (s["module"], code, s["change"]) in EQUIVALENT:  # not a test gap: out of the sample
            last["run"] -= 1
            last["per_module"][s["module"]]["run"] -= 1
            last.setdefault("equivalent", []).append(s)
            continue
        found = [m for m in mutants_of(s["module"]) if m.line == s["line"] and m.change == s["change"]]
        found.sort(key=lambda m: m.index != s["index"])  # the same site first when the module is unchanged
        order += found[:1] or [Mutant(**{**s, "status": "gone"})]
    print(f"mutation: running the last run's {len(order)} survivors again")
    modules = sorted({m.module for m in order if m.status != "gone"})
    again = run(budget_s, last["seed"], modules, order=[m for m in order if m.status != "gone"], map_file=map_file,
                jobs=jobs)
    for module, r in last["per_module"].items():
        r["killed"] += again["per_module"].get(module, {}).get("killed", 0)
    last["killed"] += again["killed"]
    last["score"] = round(last["killed"] / last["run"], 4) if last["run"] else None
    last["killed_by_recheck"] = last.get("killed_by_recheck", 0) + again["killed"]
    # a survivor whose line changed is not matched again: it stays a survivor, marked so
    last["survivors"] = again["survivors"] + [asdict(m) for m in order if m.status == "gone"]
    return last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=600.0, help="stop starting mutants after this (600)")
    parser.add_argument("--seed", type=int, default=1, help="the sampling order's seed (1)")
    parser.add_argument("--module", action="append", default=[],
                        help="only modules whose path contains this (repeatable)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--survivors", action="store_true",
                        help="run again only the last run's survivors (after adding tests) and update its score")
    parser.add_argument("--no-save", action="store_true", help="do not write " + str(RESULTS.relative_to(REPO)))
    parser.add_argument("--map", type=Path, default=None, metavar="FILE",
                        help="the test map: read it when FILE exists, else build it and write it there")
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers for the map (2)")
    parser.add_argument("--workers", type=int, default=1, help="mutants run at once, each in its own copy (1)")
    parser.add_argument("--tests", action="append", default=[], metavar="PATH",
                        help="map only these test files (repeatable; default: the whole suite, as a score needs)")
    args = parser.parse_args(argv)
    if args.worker:
        _worker()
        return 0
    modules = [m for m in product_modules() if not args.module or any(s in m for s in args.module)]
    if args.list:
        for m in _schedule(modules, args.seed):
            print(f"{m.module}:{m.line}: {m.change}")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the copy and the worker are cleaned up
    if args.survivors:
        report = recheck(args.budget_s, args.map, args.jobs)
    else:
        print(f"mutation: {sum(len(mutants_of(m)) for m in modules)} mutants in {len(modules)} modules; "
              f"budget {args.budget_s:.0f} s, seed {args.seed}")
        report = run(args.budget_s, args.seed, modules, map_file=args.map, jobs=args.jobs,
                     tests=tuple(args.tests) or ("tests",), workers=args.workers)
    print("\nper module (killed/run of total; uncovered):")
    for module, r in report["per_module"].items():
        if not r["run"]:
            continue
        pct = f"{r['killed'] / r['run']:.0%}"
        print(f"  {module:40} {r['killed']:3}/{r['run']:<3} of {r['total']:4}  {pct:>5}  {r.get('uncovered') or ''}")
    print("\nsurvivors:" if report["survivors"] else "\nno survivors")
    for m in report["survivors"]:
        print(f"  {m['module']}:{m['line']}: {m['change']}{' (uncovered)' if m['status'] == 'uncovered' else ''}")
    if report["score"] is not None:
        print(f"\nmutation score: {report['killed']}/{report['run']} = {report['score']:.1%} "
              f"({report['elapsed_s']:.0f} s)")
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
