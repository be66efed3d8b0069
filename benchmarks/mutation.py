"""Mutation testing of the core modules: would the suite notice a realistic one-token bug?

    python benchmarks/mutation.py [--budget-s 600] [--seed 1] [--module memory] [--list]

Each mutant changes one thing in one module (a comparison flipped, `+` for `-`, an integer off by
one, `and` for `or`, a `not` dropped, a `return` or `raise` removed, True for False), found by
walking the module's syntax tree. Mutants are sampled in a seeded order, round-robin over the
modules, and each runs against only the tests that cover its module (TESTS below) until the time
budget is spent. A mutant is killed when those tests fail or run past their time limit.

The working tree is never written: everything runs in a copy under a temporary folder, and the
original files' hashes are checked at the end. The score and the survivors are printed and saved to
benchmarks/results/mutation.json, which docs/reliability.md quotes.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "mutation.json"
COPIED = ("launcher", "emulator", "tests", "jobs", "schema", "docs", "templates", "setup.cfg", "pyproject.toml",
          "README.md")

# module -> the pytest arguments that cover it, the most targeted first (pytest stops at the first failure).
def tests_in(module: str, *names: str) -> list[str]:
    return [f"tests/{module}::test_{name}" for name in names]


ROLE_TESTS = tests_in(
    "test_submit.py", "a_good_role_passes", "a_role_sagemaker_cannot_assume_fails",
    "missing_permissions_are_listed_with_their_resources", "kms_and_vpc_actions_are_checked_when_configured",
    "a_missing_role_fails", "a_caller_without_pass_role_fails", "cannot_tell_when_the_caller_may_not_simulate")
# The memory model's tests that build a plan (its rounding, the layers it gathers): the rules' modules feed them.
PLANNED_MEMORY = tests_in("test_memory.py", "the_plan_rounds_the_memory_breakdown_to_hundredths",
                          "sharding_over_2_gpus_still_gathers_layer_units",
                          "mixture_of_experts_states_count_each_parameter_once")
TESTS: dict[str, list[str]] = {
    "launcher/spec/loader.py": ["tests/test_spec_errors.py", "tests/test_presets_and_loader.py",
                                "tests/test_hostile_specs.py", "tests/test_spec_limits.py"],
    "launcher/rules/checks.py": ["tests/test_rules.py", "tests/test_plan.py", "tests/test_spec_limits.py",
                                 *PLANNED_MEMORY],
    "launcher/rules/decisions.py": ["tests/test_rules.py", "tests/test_plan.py", *PLANNED_MEMORY],
    "launcher/rules/engine.py": ["tests/test_rules.py"],
    "launcher/rules/memory.py": ["tests/test_memory.py", "tests/test_rules.py", "tests/test_plan.py"],
    "launcher/plan/request.py": ["tests/test_plan.py", "tests/test_plan_json.py",
                                 "tests/test_submit.py::test_the_sdk_sends_exactly_the_predicted_request"],
    "launcher/plan/build.py": ["tests/test_plan.py", "tests/test_plan_json.py"],
    "launcher/render/files.py": ["tests/test_render.py",
                                 "tests/test_schema_and_packaging.py::test_a_wheel_install_finds_the_templates"],
    "launcher/render/templates.py": ["tests/test_render.py",
                                     "tests/test_schema_and_packaging.py::test_a_wheel_install_finds_the_templates"],
    "launcher/render/distribution.py": ["tests/test_render.py"],
    "launcher/submission/role.py": [*tests_in(
        "test_submit.py", "a_role_arn_from_another_account_fails", "the_role_check_counts_each_action_it_simulated",
        "the_caller_becomes_the_principal_simulation_accepts",
        "the_output_path_is_written_and_the_checkpoints_also_read", "a_refused_simulation_names_the_error_code",
        "a_pinned_image_needs_pull_rights_on_its_own_repository", "missing_log_permissions_name_the_roles_own_account",
        "the_role_check_prints_one_safe_line_for_each_finding", "a_role_the_caller_may_not_read_is_cannot_tell"),
        *ROLE_TESTS, *tests_in("test_submit_truth.py", "iam_that_cannot_simulate_is_cannot_tell",
                               "an_unparseable_get_role_is_cannot_tell", "refused_credentials_stay_exit_4",
                               "a_role_from_another_account_still_fails"),
        *tests_in("test_secrets.py", "the_role_check_asks_for_get_secret_value_on_each_arn",
                  "a_role_without_get_secret_value_fails_the_check")],
    "launcher/jobs/ratelimit.py": ["tests/test_logs_read.py", "-k", "not bounded and not 64"],
    "launcher/jobs/fresh_read.py": ["tests/test_logs_read.py", "tests/test_logs_late.py", "-k",
                                    "not bounded and not 64"],
    "launcher/jobs/late_check.py": ["tests/test_logs_late.py", "tests/test_logs_cli.py", "-k", "not 64"],
    "launcher/jobs/shaping.py": ["tests/test_logs_read.py", "tests/test_logs_cli.py", "tests/test_logs_late.py",
                                 "-k", "not bounded and not 64"],
    "launcher/jobs/reader.py": ["tests/test_logs_read.py", "-k", "not bounded and not 64"],
    "launcher/jobs/logs.py": ["tests/test_logs_read.py", "tests/test_logs_cli.py", "-k", "not bounded and not 64"],
    "launcher/jobs/failures.py": ["tests/test_failures.py"],
    "launcher/orchestrate/retry.py": ["tests/test_retry.py", "tests/test_retry_refusals.py"],
    "launcher/cli/logprint.py": ["tests/test_logs_cli.py",
                                 *tests_in("test_logs_read.py", "colour_is_for_a_terminal_and_never_for_json_lines")],
}

# Mutants that cannot change behaviour, found by reading them: (module, the line's code, change) -> why.
EQUIVALENT = {
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
    ("launcher/rules/decisions.py", "if copies > instance.host_memory_gib:", "> -> >="):
        "the two differ only for a model of exactly host_memory_gib * 2**25 parameters (no real model)",
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
    status: str = "not run"   # killed | survived | timeout (killed) | not run
    seconds: float = 0.0


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
        return ast.Pass() if node is self.target else node


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


def _run_all(root: Path, worker: Worker, budget_s: float, order: list[Mutant], started: float,
             results: list[Mutant], baseline: dict[str, float], broken: dict[str, str], log) -> None:
    for mutant in order:
        if time.perf_counter() - started > budget_s:
            return
        module = mutant.module
        if module in broken:
            continue
        target = root / module
        original = (REPO / module).read_text()
        if module not in baseline:  # the tests must pass on the unmutated module, rewritten the same way
            target.write_text(ast.unparse(ast.parse(original)))
            outcome, seconds = worker.run(TESTS[module], timeout=600)
            target.write_text(original)
            if outcome != "passed":
                broken[module] = outcome
                log(f"  {module}: its tests do not pass unmutated ({outcome}); skipped")
                continue
            baseline[module] = seconds
        try:
            target.write_text(mutate(original, mutant.index))
            outcome, mutant.seconds = worker.run(TESTS[module], timeout=3 * baseline[module] + 10)
        finally:
            target.write_text(original)
        mutant.status = "survived" if outcome == "passed" else ("timeout" if outcome == "timeout" else "killed")
        results.append(mutant)
        log(f"  {mutant.status:8} {module}:{mutant.line}: {mutant.change} ({mutant.seconds:.1f} s)")


def run(budget_s: float, seed: int, modules: list[str], log=print, order: list[Mutant] | None = None) -> dict:
    """Run sampled mutants (or `order`) until the budget is spent; the score, per module, and the survivors."""
    order = _schedule(modules, seed) if order is None else order
    before = _hashes(TESTS)
    started = time.perf_counter()
    results: list[Mutant] = []
    baseline: dict[str, float] = {}
    broken: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="smp-mutation-") as tmp:
        root = Path(tmp)
        _copy_tree(root)
        worker = Worker(root)
        try:
            _run_all(root, worker, budget_s, order, started, results, baseline, broken, log)
        finally:
            worker.close()
    if _hashes(TESTS) != before:
        raise SystemExit("mutation: a file in the working tree changed while mutants ran; check `git status`")
    per_module = {}
    for module in modules:
        mine = [m for m in results if m.module == module]
        killed = sum(m.status in ("killed", "timeout") for m in mine)
        per_module[module] = {"killed": killed, "run": len(mine), "total": len(mutants_of(module)),
                              "baseline_s": round(baseline.get(module, 0.0), 1)}
        if module in broken:
            per_module[module]["skipped"] = broken[module]
    killed = sum(m.status in ("killed", "timeout") for m in results)
    return {
        "seed": seed, "budget_s": budget_s, "elapsed_s": round(time.perf_counter() - started, 1),
        "killed": killed, "run": len(results), "score": round(killed / len(results), 4) if results else None,
        "per_module": per_module,
        "survivors": [asdict(m) for m in results if m.status == "survived"],
    }


def recheck(budget_s: float) -> dict:
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
    again = run(budget_s, last["seed"], modules, order=[m for m in order if m.status != "gone"])
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
    args = parser.parse_args(argv)
    if args.worker:
        _worker()
        return 0
    modules = [m for m in TESTS if not args.module or any(s in m for s in args.module)]
    if args.list:
        for m in _schedule(modules, args.seed):
            print(f"{m.module}:{m.line}: {m.change}")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the copy and the worker are cleaned up
    if args.survivors:
        report = recheck(args.budget_s)
    else:
        print(f"mutation: {sum(len(mutants_of(m)) for m in modules)} mutants in {len(modules)} modules; "
              f"budget {args.budget_s:.0f} s, seed {args.seed}")
        report = run(args.budget_s, args.seed, modules)
    print("\nper module (killed/run of total):")
    for module, r in report["per_module"].items():
        pct = f"{r['killed'] / r['run']:.0%}" if r["run"] else "-"
        print(f"  {module:32} {r['killed']:3}/{r['run']:<3} of {r['total']:3}  {pct:>5}  {r.get('skipped', '')}")
    print("\nsurvivors:" if report["survivors"] else "\nno survivors")
    for m in report["survivors"]:
        print(f"  {m['module']}:{m['line']}: {m['change']}")
    if report["score"] is not None:
        print(f"\nmutation score: {report['killed']}/{report['run']} = {report['score']:.1%} "
              f"({report['elapsed_s']:.0f} s)")
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
