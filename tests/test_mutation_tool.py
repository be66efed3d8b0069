"""The mutation tool (benchmarks/mutation.py) measures what docs/reliability.md quotes: its parts that decide a
score are checked here, on small sources, without running a mutant."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import mutation  # noqa: E402


def test_every_equivalent_mutant_still_names_a_mutant_of_its_module():
    """An entry whose line changed would silently stop excluding anything, or exclude by accident later."""
    stale = []
    for module, code, change in mutation.EQUIVALENT:
        source = (REPO / module).read_text()
        lines = source.splitlines()
        sites = [c for node, c, _ in mutation._sites(ast.parse(source))
                 if getattr(node, "lineno", 0) and lines[node.lineno - 1].strip() == code and c == change]
        if not sites:
            stale.append((module, code, change))
    assert not stale


def test_a_not_inside_a_raise_is_mutated():
    source = "def f(x):\n    if x:\n        raise ValueError(not x)\n"
    changes = [c for _, c, _ in mutation._sites(ast.parse(source))]
    assert "drop `not`" in changes and "drop `raise`" in changes
    index = changes.index("drop `not`")
    assert "ValueError(x)" in mutation.mutate(source, index)


def test_a_decorators_argument_is_run_by_every_test_of_its_module(tmp_path, monkeypatch):
    module = "launcher/cli/calibrate.py"
    text = (REPO / module).read_text().splitlines()
    line = next(i for i, code in enumerate(text, 1) if code.startswith("@click.argument"))
    mapping = {"lines": {module: {str(line + 5): ["t::a"], "1": ["t::b"]}},
               "tests": {"t::a": [1.0, True], "t::b": [1.0, True], "t::c": [1.0, False]}, "imported": {}}
    mutant = mutation.Mutant(module, 0, line, "-1 -> 0")
    assert set(mutation.covering_tests(mapping, mutant)) == {"t::a", "t::b"}, "failing tests never count"
    inside = next(i for i, code in enumerate(text, 1) if code.startswith("    ") and "import" in code)
    assert mutation.covering_tests(mapping, mutation.Mutant(module, 0, inside, "x")) == []


def test_a_command_modules_decorators_are_run_by_every_test_that_runs_the_cli():
    module = "launcher/cli/calibrate.py"
    line = next(i for i, code in enumerate((REPO / module).read_text().splitlines(), 1)
                if code.startswith("@click.argument"))
    entry = {str(mutation._cli_entry_line()): ["t::cli"]}
    mapping = {"lines": {module: {}, mutation.CLI_ENTRY[0]: entry},
               "tests": {"t::cli": [1.0, True]}, "imported": {}}
    assert mutation.covering_tests(mapping, mutation.Mutant(module, 0, line, "-1 -> 0")) == ["t::cli"]
    other = "launcher/core/timeutil.py"  # not a command module: the CLI's tests are not added
    first = next(n for n in sorted(mutation.import_time_lines(other)) if n > 1)
    assert mutation.covering_tests({**mapping, "lines": {other: {}, mutation.CLI_ENTRY[0]: entry}},
                                   mutation.Mutant(other, 0, first, "x")) == []


def test_a_module_level_table_is_covered_by_the_tests_of_a_file_that_imports_it():
    """tests/test_published_points.py reads the published rows without running a line of their module."""
    module = "launcher/predict/published.py"
    line = max(mutation.import_time_lines(module))
    mapping = {"lines": {module: {}}, "imported": {},
               "tests": {"tests/test_published_points.py::test_x": [0.1, True], "tests/test_other.py::t": [0.1, True]}}
    assert mutation.covering_tests(mapping, mutation.Mutant(module, 0, line, "64 -> 65")) == [
        "tests/test_published_points.py::test_x"]


def test_a_test_that_names_what_the_line_holds_runs_first_however_slow():
    """Ordering decides only how soon a killed mutant is known; among the hundreds of tests that run a module's
    import-time lines, the one that names the constant's value should not wait behind the rest."""
    module = "launcher/core/errors.py"
    line = next(i for i, code in enumerate((REPO / module).read_text().splitlines(), 1)
                if code.startswith("EXIT_TERMINATED = 143"))
    names = "tests/test_name_ownership.py::test_sigterm_during_the_create_says_the_job_exists_records_it_and_exits_143"
    others = [f"tests/test_render.py::{name}" for name in (
        "test_rendered_source_matches_the_goldens[llama7b]",
        "test_every_golden_folder_is_a_variant_and_every_example_job_has_one",
        "test_every_condition_in_a_template_is_true_in_one_golden_and_false_in_another[train.py.j2]",
        "test_rendered_source_matches_the_goldens[p5]", "test_rendered_source_matches_the_goldens[fp8]")]
    mapping = {"lines": {module: {"1": [names, *others]}}, "imported": {},
               "tests": {names: [30.0, True], **{t: [0.1, True] for t in others}}}
    assert "143" in mutation._line_tokens(module, line) and "EXIT_TERMINATED" in mutation._line_tokens(module, line)
    ordered = mutation.covering_tests(mapping, mutation.Mutant(module, 0, line, "143 -> 144"))
    assert ordered[0] == names and set(ordered[1:]) == set(others)
    body = mutation.covering_tests(mapping, mutation.Mutant(module, 0, 1, "x"))
    assert body[-1] == names, "a line it does not name keeps the map's order: the slow test last"


def test_a_command_modules_decorator_line_names_its_command_for_the_order():
    module = "launcher/cli/calibrate.py"
    text = (REPO / module).read_text().splitlines()
    line = next(i for i, code in enumerate(text, 1) if code.startswith("@click.argument"))
    assert mutation._command_of(module, line) == {"calibrate"}
    assert mutation._command_of("launcher/core/aws.py", 5) == set()
