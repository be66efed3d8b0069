"""Hostile specs and --set values: one line FILE:LINE:COL: path: message, exit 2, bounded, no AWS call.

Each case is one a loader easily gets wrong: a traceback, a hang, a multi-megabyte line, a silent wrong
value, or a value SageMaker refuses let through.
"""
import os
import subprocess
import sys

import pytest

from launcher.core.errors import SpecError
from launcher.spec import load_spec
from launcher.spec.yaml12 import MAX_DEPTH, MAX_NODES
from tests.conftest import MINIMAL, REPO
from tests.test_spec_errors import one_error

LONGEST_LINE = 1400  # a mark, a path cut at 200 characters and a message cut at 1000


@pytest.fixture(autouse=True)
def no_aws_calls(monkeypatch):
    """Any AWS API call made while validating bad input fails the test."""
    import botocore.client

    def refuse(self, operation, params):
        raise AssertionError(f"AWS call {operation} made while validating a spec")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", refuse)


def bounded_error(result):
    m = one_error(result)
    assert len(result.err.strip()) <= LONGEST_LINE, len(result.err)
    assert "\x1b" not in result.err and "\x00" not in result.err
    return m


def write_bytes(tmp_path, data: bytes, name="job.yaml"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


BASE = MINIMAL.lstrip("\n").encode()


# ---- bytes that are not UTF-8 text ----

@pytest.mark.parametrize("data,line,col,words", [
    (BASE + b"description: caf\xe9\n", 8, 17, "byte 0xe9 is not UTF-8"),
    (MINIMAL.lstrip("\n").encode("utf-16"), 1, 1, "not UTF-8"),
    (BASE + b"description: a\x00b\n", 8, 15, "NUL"),
    (BASE + b"description: a\x1b]0;title\x07b\n", 8, 15, "control character \\x1b"),
    (BASE + b"description: a\x7fb\n", 8, 15, "control character \\x7f"),
], ids=["latin-1", "utf-16", "nul", "escape", "delete"])
def test_bytes_that_are_not_utf8_text(run_cli, tmp_path, data, line, col, words):
    m = bounded_error(run_cli("validate", str(write_bytes(tmp_path, data))))
    assert (int(m["line"]), int(m["col"])) == (line, col)
    assert words in m["msg"]


def test_a_utf8_byte_order_mark_is_fine(tmp_path):
    assert load_spec(write_bytes(tmp_path, b"\xef\xbb\xbf" + BASE)).spec.name == "demo"


def test_escapes_written_inside_quotes_are_shown_escaped(run_cli, write_spec):
    p = write_spec(MINIMAL + 'smp:\n  "\\e]0;owned\\a": 1\n')
    m = bounded_error(run_cli("validate", str(p)))
    assert "\\x1b" in m["msg"] and "unknown key" in m["msg"]


# ---- size, depth and alias budgets ----

def test_flow_nesting_past_the_recursion_limit(run_cli, write_spec):
    depth = sys.getrecursionlimit() * 5
    p = write_spec(MINIMAL + "description: " + "[" * depth + "]" * depth + "\n")
    m = bounded_error(run_cli("validate", str(p)))
    assert m["line"] == "8" and f"more than {MAX_DEPTH} levels" in m["msg"]


def test_block_nesting_is_bounded_too(run_cli, write_spec):
    p = write_spec(MINIMAL + "description:\n" + "".join("  " * i + "a:\n" for i in range(1, 200)))
    m = bounded_error(run_cli("validate", str(p)))
    assert f"more than {MAX_DEPTH} levels" in m["msg"]


def _bomb(levels: int, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ",".join(["x"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join("  " + line for line in lines) + "\n"


def test_an_alias_bomb_is_refused_while_it_is_read(run_cli, write_spec):
    p = write_spec(MINIMAL + "hyperparameters:\n" + _bomb(12))  # 9**12 values from about 700 bytes
    assert p.stat().st_size < 1000
    m = bounded_error(run_cli("validate", str(p)))
    assert m["path"] == "yaml" and f"more than {MAX_NODES} values" in m["msg"]


def test_a_small_bomb_that_once_gave_a_huge_line(run_cli, write_spec):
    p = write_spec(MINIMAL + "tags:\n" + _bomb(5))  # 9**5 values: a line quoting them all would be megabytes
    m = bounded_error(run_cli("validate", str(p)))
    assert "alias" in m["msg"]


def test_a_recursive_alias_is_refused(run_cli, write_spec):
    m = bounded_error(run_cli("validate", str(write_spec(MINIMAL + "tags: &t {a: *t}\n"))))
    assert "recursive alias" in m["msg"]


def test_aliases_within_the_budget_still_work(write_spec):
    p = write_spec(MINIMAL + "environment: &e {A: x}\nhyperparameters: *e\n")
    assert load_spec(p).spec.hyperparameters == {"A": "x"}


def test_a_set_alias_bomb_gives_one_short_line(run_cli, write_spec):
    bomb = "[&a [x,x,x,x,x,x,x,x], &b [*a,*a,*a,*a,*a,*a,*a,*a], &c [*b,*b,*b,*b,*b,*b,*b,*b], " \
           "&d [*c,*c,*c,*c,*c,*c,*c,*c], [*d,*d,*d,*d,*d,*d,*d,*d]]"
    m = bounded_error(run_cli("validate", str(write_spec(MINIMAL)), "--set", f"tags={bomb}"))
    assert m["file"] == "--set" and m["path"] == "tags" and "alias" in m["msg"]


def test_a_huge_spec_file_is_refused_unread(run_cli, write_spec):
    p = write_spec(MINIMAL + "description: " + "x" * 300_000 + "\n")
    m = bounded_error(run_cli("validate", str(p)))
    assert "at most 262144" in m["msg"]


@pytest.mark.parametrize("setting", ["name=" + "x" * 100_000, "tags=[" + "x," * 3000 + "]",
                                     "training.precision=" + "y" * 50_000, "smp." + "k" * 50_000 + "=1"])
def test_long_values_are_cut_in_the_error(run_cli, write_spec, setting):
    m = bounded_error(run_cli("validate", str(write_spec(MINIMAL)), "--set", setting))
    assert m["file"] == "--set"


def test_an_integer_of_thousands_of_digits(run_cli, write_spec):
    p = write_spec(MINIMAL + "training:\n  max_steps: " + "9" * 5000 + "\n")
    m = bounded_error(run_cli("validate", str(p)))
    assert "digits" in m["msg"]


# ---- extends ----

def test_an_extends_chain_of_thousands_of_files(run_cli, write_spec):
    for i in range(2000):
        write_spec(f"extends: c{i + 1}.yaml\n", f"c{i}.yaml")
    write_spec(MINIMAL, "c2000.yaml")
    m = bounded_error(run_cli("validate", str(write_spec("extends: c0.yaml\n"))))
    assert m["path"] == "extends" and "at most 32 files" in m["msg"]


def test_the_cycle_message_names_every_file(run_cli, write_spec):
    write_spec("extends: b.yaml\n" + MINIMAL, "a.yaml")
    write_spec("extends: c.yaml\n", "b.yaml")
    write_spec("extends: a.yaml\n", "c.yaml")
    m = bounded_error(run_cli("validate", str(write_spec("extends: a.yaml\n", "top.yaml"))))
    chain = [part.strip().rsplit("/", 1)[-1] for part in m["msg"].split(": ", 1)[1].split("->")]
    assert chain == ["top.yaml", "a.yaml", "b.yaml", "c.yaml", "a.yaml"]


@pytest.mark.parametrize("target", ["/etc/passwd", "/etc/hostname", "/dev/zero", "notes.txt"])
def test_extends_names_only_yaml_files_and_never_echoes_another_file(run_cli, write_spec, target):
    secret = write_spec("root:$6$secret-hash:19000:0:99999:7:::\n", "notes.txt")
    p = write_spec(f"extends: {target}\n" + MINIMAL)
    r = run_cli("validate", str(p))
    m = bounded_error(r)
    assert m["path"] == "extends" and ".yaml or .yml" in m["msg"]
    assert "root:" not in r.err and "secret-hash" not in r.err and secret.exists()


def test_extends_through_a_yaml_named_link_to_another_file(run_cli, write_spec):
    target = write_spec("root:$6$secret-hash:19000\n", "shadow")
    (target.parent / "base.yaml").symlink_to(target)
    r = run_cli("validate", str(write_spec("extends: base.yaml\n" + MINIMAL)))
    m = bounded_error(r)
    assert ".yaml or .yml" in m["msg"] and "secret-hash" not in r.err and "$6$" not in r.err


def test_extends_a_directory(run_cli, write_spec, tmp_path):
    (tmp_path / "dir.yaml").mkdir()
    m = bounded_error(run_cli("validate", str(write_spec("extends: dir.yaml\n" + MINIMAL))))
    assert "not a regular file" in m["msg"] or "cannot read" in m["msg"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_extends_a_fifo_does_not_hang(write_spec, tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    p = write_spec("extends: pipe.yaml\n" + MINIMAL)
    r = subprocess.run([sys.executable, "-m", "launcher", "validate", str(p)], capture_output=True, text=True,
                       timeout=60, cwd=REPO)
    assert r.returncode == 2 and "not a regular file" in r.stderr and "Traceback" not in r.stderr


def test_set_extends_is_refused(run_cli, write_spec):
    write_spec("cluster: {instance_count: 4}\n", "base.yaml")
    m = bounded_error(run_cli("validate", str(write_spec(MINIMAL)), "--set", "extends=base.yaml"))
    assert (m["file"], m["line"], m["col"], m["path"]) == ("--set", "1", "1", "extends")
    assert "write `extends:` in the spec file" in m["msg"]


# ---- YAML 1.2 scalars, ${VAR} typing, merge keys ----

@pytest.mark.parametrize("text,value", [("010", 10), ("0o10", 8), ("0x10", 16), ("+7", 7), ("12", 12)])
def test_integers_are_yaml_1_2(write_spec, text, value):
    assert load_spec(write_spec(MINIMAL), [f"cluster.instance_count={text}"]).spec.cluster.instance_count == value
    p = write_spec(MINIMAL.replace("  region: us-west-2\n", f"  region: us-west-2\n  instance_count: {text}\n"))
    assert load_spec(p).spec.cluster.instance_count == value


@pytest.mark.parametrize("setting,words", [
    ("cluster.instance_count=1_000", "valid integer"),
    ("cluster.instance_count=0b11", "valid integer"),
    ("cluster.max_run=1:30", "not a duration"),
    ("cluster.spot=yes", "valid boolean"),
    ("cluster.spot=on", "valid boolean"),
])
def test_yaml_1_1_forms_are_strings(run_cli, write_spec, setting, words):
    m = bounded_error(run_cli("validate", str(write_spec(MINIMAL)), "--set", setting))
    assert words in m["msg"]


def test_dates_and_exponents_read_as_yaml_1_2(write_spec):
    spec = load_spec(write_spec(MINIMAL + "description: 2024-01-01\ntraining: {learning_rate: 3e-4}\n")).spec
    assert spec.description == "2024-01-01" and spec.training.learning_rate == pytest.approx(3e-4)


def test_a_whole_variable_takes_a_yaml_type(write_spec):
    p = write_spec(MINIMAL.replace("  region: us-west-2\n", "  region: us-west-2\n  instance_count: ${COUNT:-1}\n"
                                                            "  spot: ${SPOT:-false}\n")
                   + "tags:\n  build: \"${BUILD:-7}\"\nhyperparameters:\n  epochs: ${EPOCHS}\n")
    spec = load_spec(p, env={"EPOCHS": "3"}).spec
    assert spec.cluster.instance_count == 1 and spec.cluster.spot is False
    assert spec.tags == {"build": "7"} and spec.hyperparameters == {"epochs": 3}
    assert load_spec(p, env={"COUNT": "16", "EPOCHS": "x"}).spec.cluster.instance_count == 16


def test_a_variable_inside_text_stays_text(write_spec):
    p = write_spec(MINIMAL + "description: run ${N:-3}\nhyperparameters:\n  tag: v${N:-3}\n  n: '${N:-3}'\n")
    spec = load_spec(p).spec
    assert spec.description == "run 3" and spec.hyperparameters == {"tag": "v3", "n": "3"}


def test_a_variable_that_is_not_a_number_names_the_field(run_cli, write_spec):
    p = write_spec(MINIMAL.replace("  region: us-west-2\n", "  region: us-west-2\n  instance_count: ${COUNT}\n"))
    m = bounded_error(run_cli("validate", str(p), env={"COUNT": "many"}))
    assert m["path"] == "cluster.instance_count" and m["line"] == "6" and "integer" in m["msg"]


def test_a_variable_too_long_for_a_number_says_what_it_holds_and_where_it_came_from(write_spec):
    p = write_spec(MINIMAL.replace("  region: us-west-2\n", "  region: us-west-2\n  instance_count: ${COUNT}\n"))
    with pytest.raises(SpecError) as err:
        load_spec(p, env={"COUNT": "1" * 41})
    (problem,) = err.value.problems
    assert problem.path == "cluster.instance_count"
    assert problem.message == f"{'1' * 41!r} from ${{COUNT}}: a number of more than 40 digits"


def test_a_merge_key_then_an_override_is_not_a_duplicate(write_spec):
    p = write_spec(MINIMAL.replace("cluster:\n  region: us-west-2\n",
                                   "cluster:\n  <<: {instance_count: 2, region: eu-west-1}\n  region: us-west-2\n"))
    spec = load_spec(p).spec
    assert (spec.cluster.instance_count, spec.cluster.region) == (2, "us-west-2")


def test_a_real_duplicate_beside_a_merge_key_is_still_one(run_cli, write_spec):
    p = write_spec(MINIMAL.replace("cluster:\n  region: us-west-2\n",
                                   "cluster:\n  <<: {instance_count: 2}\n  region: us-west-2\n  region: eu-west-1\n"))
    m = bounded_error(run_cli("validate", str(p)))
    assert m["path"] == "cluster.region" and m["msg"] == "duplicate key" and m["line"] == "7"


def test_setting_one_alias_changes_one_place(write_spec):
    p = write_spec(MINIMAL + "environment: &e {A: x}\nhyperparameters: *e\n")
    spec = load_spec(p, ["environment.A=y"]).spec
    assert spec.environment == {"A": "y"} and spec.hyperparameters == {"A": "x"}


# ---- a huge batch size: the memory fix-up bisects ----

def _batch_fix(plan) -> int | None:
    import re

    found = [a for a in plan.advisories if a.rule == "SMP060"]
    m = re.search(r"lower training\.batch_size to (\d+) ", found[0].message) if found else None
    return int(m.group(1)) if m else None


def test_the_memory_fix_up_bisects_a_huge_batch(write_spec, monkeypatch):
    import launcher.rules.memory as memory
    from launcher.plan.build import build_plan

    calls = []
    real = memory.estimate

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(memory, "estimate", counting)
    plan = build_plan(load_spec(write_spec(MINIMAL), ["training.batch_size=1048576"]))
    assert _batch_fix(plan) is not None
    assert len(calls) < 100  # a bisection: one estimate per batch size would be a million (tens of seconds)


@pytest.mark.parametrize("batch", [9, 12, 33])
def test_the_bisected_fix_is_the_largest_batch_that_fits(write_spec, batch):
    from launcher.plan.build import build_plan

    spec = write_spec(MINIMAL)
    fix = _batch_fix(build_plan(load_spec(spec, [f"training.batch_size={batch}"])))
    plans = {b: build_plan(load_spec(spec, [f"training.batch_size={b}"])) for b in range(1, batch)}
    fitting = [b for b, plan in plans.items() if not any(a.rule == "SMP060" for a in plan.advisories)]
    assert fix == max(fitting)


@pytest.mark.parametrize("target", ['"a\\0b.yaml"', '"' + "a" * 5000 + '.yaml"', "loop.yaml", "''", "[a.yaml]"])
def test_extends_paths_that_cannot_be_opened(run_cli, write_spec, tmp_path, target):
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    m = bounded_error(run_cli("validate", str(write_spec(f"extends: {target}\n" + MINIMAL))))
    assert m["path"] == "extends" and (m["line"], m["col"]) == ("1", "10")


@pytest.mark.parametrize("value,words", [
    ("!!int abc", "not a YAML 1.2 integer"), ("!!int ''", "not a YAML 1.2 integer"),
    ("!!int 1_000", "not a YAML 1.2 integer"), ("!!float abc", "not a YAML 1.2 number"),
    ("!!bool maybe", "not true or false"), ("!!float 0x10", "valid string (got 16.0)"),
    ("!foo x", "constructor"), ("!!python/object:os.system x", "constructor"),
])
def test_explicit_tags_on_the_wrong_text(run_cli, write_spec, value, words):
    m = bounded_error(run_cli("validate", str(write_spec(MINIMAL)), "--set", f"description={value}"))
    assert m["file"] == "--set" and words in m["msg"]


def test_a_control_character_in_a_set_value(run_cli, write_spec):
    m = bounded_error(run_cli("validate", str(write_spec(MINIMAL)), "--set", "description=ab\x1bc"))
    assert (m["file"], m["col"], m["path"]) == ("--set", "15", "description") and "\\x1b" in m["msg"]


@pytest.mark.parametrize("override, words", [
    ("cluster.max_run=[1]", "expected a duration"),
    ("cluster.max_wait={a: 1}", "expected a duration"),
    ("cluster.max_run=1e400", "a duration must be finite"),
])
def test_durations_of_the_wrong_shape_are_one_line(write_spec, override, words):
    """A list, a mapping or an infinite number where a duration goes was a traceback."""
    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), [override])
    assert words in str(err.value)


def test_a_mapping_key_and_value_failing_together_is_not_read_as_a_union(write_spec):
    """`tags={0: [1]}` printed 'expected 0 or 0, got 0'."""
    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), ["tags={0: [1]}"])
    text = str(err.value)
    assert "or 0" not in text and "input should be a valid string" in text


def test_an_alias_bomb_of_mappings_is_refused_while_it_is_read(run_cli, write_spec):
    keys = "abcdefghi"
    lines = ["m0: &m0 {" + ", ".join(f"{k}: x" for k in keys) + "}"]
    lines += [f"m{i}: &m{i} {{" + ", ".join(f"{k}: *m{i - 1}" for k in keys) + "}" for i in range(1, 8)]
    p = write_spec(MINIMAL + "hyperparameters:\n" + "".join(f"  {line}\n" for line in lines))  # 9**8 values
    assert p.stat().st_size < 1000
    m = bounded_error(run_cli("validate", str(p)))
    assert m["path"] == "yaml" and f"more than {MAX_NODES} values" in m["msg"]
