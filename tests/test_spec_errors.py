"""Every kind of bad input is one line FILE:LINE:COL: path: message, exit code 2, no traceback."""
import re

import pytest

from launcher.spec.loader import _display as shown
from tests.conftest import MINIMAL

LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<path>\S+): (?P<msg>.+)$")


def one_error(result):
    assert result.code == 2, result
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, lines
    m = LINE.match(lines[0])
    assert m, lines[0]
    return m


def test_unknown_key_points_at_the_key_and_suggests(run_cli, write_spec):
    p = write_spec(MINIMAL + "smp:\n  hybrid_shard_degre: 8\n")
    m = one_error(run_cli("validate", str(p)))
    assert (m["line"], m["col"], m["path"]) == ("9", "3", "smp.hybrid_shard_degre")
    assert "did you mean 'hybrid_shard_degree'" in m["msg"]


def test_unknown_top_level_key(run_cli, write_spec):
    p = write_spec(MINIMAL + "clustr:\n  instance_count: 2\n")
    m = one_error(run_cli("plan", str(p)))
    assert m["path"] == "clustr" and "did you mean 'cluster'" in m["msg"]


def test_misspelt_enum_value_suggests(run_cli, write_spec):
    p = write_spec(MINIMAL + "training:\n  precision: bf61\n")
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "training.precision" and m["line"] == "9" and m["col"] == "14"
    assert "did you mean 'bf16'" in m["msg"]


def test_misspelt_preset_suggests(run_cli, write_spec):
    p = write_spec(MINIMAL.replace("llama2-7b", "llama2-7B"))
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "model.preset" and "did you mean 'llama2-7b'" in m["msg"]


def test_wrong_type(run_cli, write_spec):
    p = write_spec(MINIMAL + "cluster:\n  instance_count: \"4\"\n".replace("cluster:\n", ""), )
    p = write_spec(MINIMAL.replace("  region: us-west-2\n", "  region: us-west-2\n  instance_count: '4'\n"))
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "cluster.instance_count" and "integer" in m["msg"]


def test_out_of_range(run_cli, write_spec):
    p = write_spec(MINIMAL.replace("  region: us-west-2\n", "  region: us-west-2\n  instance_count: 0\n"))
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "cluster.instance_count" and "greater than or equal to 1" in m["msg"]


def test_missing_required_key(run_cli, write_spec):
    p = write_spec(MINIMAL.replace("output:\n  path: s3://my-bucket/smp\n", ""))
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "output" and "required" in m["msg"]


def test_yaml_syntax_error(run_cli, write_spec):
    p = write_spec("name: demo\nmodel: {preset: llama2-7b\n")
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "yaml" and m["file"].endswith("job.yaml")


def test_duplicate_key(run_cli, write_spec):
    p = write_spec(MINIMAL + "name: again\n")
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "name" and m["msg"] == "duplicate key" and m["line"] == "8"


def test_unreadable_extends(run_cli, write_spec):
    p = write_spec("extends: nowhere.yaml\n" + MINIMAL)
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "extends" and "cannot read" in m["msg"] and m["line"] == "1"


def test_cyclic_extends(run_cli, write_spec):
    write_spec("extends: b.yaml\nname: a\n", "a.yaml")
    b = write_spec("extends: a.yaml\n", "b.yaml")
    m = one_error(run_cli("validate", str(b)))
    assert m["path"] == "extends" and "cycle" in m["msg"]


def test_bad_set_syntax(run_cli, write_spec):
    p = write_spec(MINIMAL)
    m = one_error(run_cli("validate", str(p), "--set", "cluster.instance_count"))
    assert m["file"] == "--set" and "KEY.PATH=VALUE" in m["msg"]


def test_bad_set_value_type_points_at_the_flag(run_cli, write_spec):
    p = write_spec(MINIMAL)
    m = one_error(run_cli("validate", str(p), "--set", "smp.tensor_parallel_degree=two"))
    assert m["file"] == "--set" and m["path"] == "smp.tensor_parallel_degree"


def test_set_into_a_scalar(run_cli, write_spec):
    p = write_spec(MINIMAL)
    m = one_error(run_cli("validate", str(p), "--set", "name.first=x"))
    assert "cannot set a key inside name" in m["msg"]


def test_unset_environment_variable_is_named(run_cli, write_spec):
    p = write_spec(MINIMAL.replace("s3://my-bucket/smp", "s3://${SMP_TEST_UNSET_BUCKET}/smp"))
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "output.path" and "SMP_TEST_UNSET_BUCKET" in m["msg"] and m["line"] == "7"


def test_empty_and_non_mapping_specs(run_cli, write_spec):
    one_error(run_cli("validate", str(write_spec("", "empty.yaml"))))
    m = one_error(run_cli("validate", str(write_spec("- a\n- b\n", "list.yaml"))))
    assert "mapping" in m["msg"]


def test_missing_file(run_cli, tmp_path):
    m = one_error(run_cli("validate", str(tmp_path / "absent.yaml")))
    assert "cannot read" in m["msg"]


def test_error_in_a_base_file_names_that_file(run_cli, write_spec):
    write_spec("smp:\n  backend: smdp\n", "base.yaml")
    p = write_spec("extends: base.yaml\n" + MINIMAL)
    m = one_error(run_cli("validate", str(p)))
    assert m["file"].endswith("base.yaml") and m["line"] == "2" and "did you mean 'smddp'" in m["msg"]


def test_model_without_preset_or_type(run_cli, write_spec):
    p = write_spec(MINIMAL.replace("  preset: llama2-7b\n", "  seq_length: 2048\n"))
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "model" and "preset" in m["msg"]


def test_spot_settings_are_checked(run_cli, write_spec):
    p = write_spec(MINIMAL.replace("  region: us-west-2\n", "  region: us-west-2\n  max_wait: 2h\n"))
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "cluster" and "spot" in m["msg"]


def test_reserved_tag_prefix(run_cli, write_spec):
    p = write_spec(MINIMAL + "tags:\n  'aws:team': x\n")
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "tags" and "reserved" in m["msg"]


def test_many_problems_one_line_each(run_cli, write_spec):
    p = write_spec(MINIMAL + "smp:\n  tensor_parallel_degre: 2\ntraining:\n  batch_size: -1\n")
    r = run_cli("validate", str(p))
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 2 and all(LINE.match(x) for x in lines)


@pytest.mark.parametrize("value", ["2.4", "2.6.0"])
def test_unsupported_pytorch_version(run_cli, write_spec, value):
    p = write_spec(MINIMAL + f"framework:\n  pytorch_version: {value}\n")
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "framework.pytorch_version" and "2.4.1" in m["msg"]


# -- where a loader error points and how it reads: each test fails on a realistic bug (`make mutation`) --

def _line_of(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_bad_value_a_child_overrides_is_reported_at_the_child(write_spec):
    """Kills: the base's marks winning over the child's when the two files merge."""
    from launcher.core.errors import SpecError
    from launcher.spec import load_spec

    write_spec("name: base-job\nsmp:\n  backend: nccl\n  hybrid_shard_degree: 8\n", "base.yaml")
    child = write_spec("extends: base.yaml\n" + MINIMAL + "smp:\n  backend: smdp\n")
    with pytest.raises(SpecError) as err:
        load_spec(child)
    (problem,) = err.value.problems
    assert problem.path == "smp.backend" and "did you mean 'smddp'" in problem.message
    assert problem.mark.file.endswith("job.yaml")
    assert (problem.mark.line, problem.mark.col) == (_line_of(child, "smdp"), 12)


def test_a_bad_value_only_the_base_holds_is_reported_at_the_base(write_spec):
    """The other half: a value the child does not override keeps the base's file and line."""
    from launcher.core.errors import SpecError
    from launcher.spec import load_spec

    write_spec("smp:\n  hybrid_shard_degree: 8\n  backend: smdp\n", "base.yaml")
    child = write_spec("extends: base.yaml\n" + MINIMAL + "smp:\n  hybrid_shard_degree: 4\n")
    with pytest.raises(SpecError) as err:
        load_spec(child)
    (problem,) = err.value.problems
    assert problem.mark.file.endswith("base.yaml") and (problem.mark.line, problem.mark.col) == (3, 12)


def test_a_generic_type_error_is_one_lowercase_sentence_with_the_value(write_spec):
    """Kills loader: the first letter of pydantic's message taken from the wrong index."""
    from launcher.core.errors import SpecError
    from launcher.spec import load_spec

    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), ["training.max_steps=[1]"])
    (problem,) = err.value.problems
    assert problem.path == "training.max_steps"
    assert problem.message.startswith("input should be a valid integer"), problem.message


def test_a_bad_second_set_names_the_second_set(write_spec):
    """Kills loader: `--set` expressions numbered from the wrong start."""
    from launcher.core.errors import OVERRIDES, SpecError
    from launcher.spec import load_spec

    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), ["smp.backend=nccl", "smp.backend=smdp"])
    (problem,) = err.value.problems
    assert (problem.mark.file, problem.mark.line) == (OVERRIDES, 2)


def test_a_set_keeps_the_file_positions_of_every_other_key(write_spec):
    """Kills loader: `--set` forgetting the file positions of the keys it does not touch."""
    from launcher.core.errors import SpecError
    from launcher.spec import load_spec

    spec = write_spec(MINIMAL + "smp:\n  backend: smdp\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec, ["training.max_steps=10"])
    (problem,) = err.value.problems
    assert problem.mark.file.endswith("job.yaml") and problem.mark.line == _line_of(spec, "smdp")


def test_a_yaml_error_points_at_its_line_and_column(write_spec):
    """Kills loader: YAML's 0-based marks shown 0-based or off by one."""
    from launcher.core.errors import SpecError
    from launcher.spec import load_spec

    with pytest.raises(SpecError) as err:
        load_spec(write_spec("name: demo\nmodel:\n\tpreset: x\n"))
    (problem,) = err.value.problems
    assert (problem.mark.line, problem.mark.col) == (3, 1) and "'\\t'" in problem.message


def test_a_spec_below_the_working_folder_is_named_relative(write_spec, tmp_path, monkeypatch):
    """Kills loader: the file name in errors lost for a spec under the working folder."""
    import os

    from launcher.core.errors import SpecError
    from launcher.spec import load_spec

    write_spec(MINIMAL + "smp:\n  backend: smdp\n", "specs/job.yaml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as err:
        load_spec("specs/job.yaml")
    assert err.value.problems[0].mark.file == os.path.join("specs", "job.yaml")


def test_a_bad_set_value_points_at_the_value(write_spec):
    """Kills loader: the column of a `--set` value (just after `=`) off by one."""
    from launcher.core.errors import SpecError
    from launcher.spec import load_spec

    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), ["training.max_steps=abc"])
    (problem,) = err.value.problems
    assert (problem.mark.line, problem.mark.col) == (1, len("training.max_steps=") + 1)


@pytest.mark.parametrize("text", ["", "# to be written\n\n"], ids=["empty", "comments-only"])
def test_an_empty_spec_is_reported_at_its_first_line(write_spec, text):
    """Kills loader: the "spec is empty" error placed at line 2 of a file that may have no line 2."""
    from launcher.core.errors import SpecError
    from launcher.spec import load_spec

    path = write_spec(text)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    (problem,) = err.value.problems
    assert problem.message == "the spec is empty"
    assert (problem.mark.line, problem.mark.col) == (1, 1)
    assert err.value.lines() == [f"{problem.mark.file}:1:1: (spec): the spec is empty"]


@pytest.mark.parametrize("override, col", [("description=ab\x01c", 15), ("name=\x1b[31m", 6)],
                         ids=["inside", "first"])
def test_a_control_character_in_a_set_value_points_at_its_column(override, col, write_spec):
    """Kills loader: the column of a control character in a --set value one to the left of it."""
    from launcher.core.errors import OVERRIDES, SpecError
    from launcher.spec import load_spec

    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), ["cluster.instance_count=2", override])
    (problem,) = err.value.problems
    assert (problem.mark.file, problem.mark.line, problem.mark.col) == (OVERRIDES, 2, col)
    assert problem.message.startswith("control character")
    assert "\x01" not in str(err.value) and "\x1b" not in str(err.value)


CROSS_FIELD = {  # a spec (MINIMAL with a change) -> (path, words of the message)
    "a bucket name S3 reserves": (MINIMAL + "data:\n  train: s3://my..bucket/data\n", "data.train",
                                  "bucket name 'my..bucket' has two adjacent dots"),
    "a type the preset contradicts": (MINIMAL.replace("  preset: llama2-7b\n",
                                                      "  preset: llama2-7b\n  type: mixtral\n"),
                                      "model", "type 'mixtral' contradicts preset 'llama2-7b' (a llama model)"),
    "a type without its dimensions": (MINIMAL.replace("  preset: llama2-7b\n", "  type: llama\n  num_layers: 2\n"),
                                      "model", "type 'llama' without a preset needs: hidden_width, num_heads, "
                                               "intermediate_size, vocab_size"),
    "heads that do not divide the width": (
        MINIMAL.replace("  preset: llama2-7b\n", "  type: llama\n  num_layers: 2\n  hidden_width: 100\n  num_heads: 3\n"
                                                 "  intermediate_size: 256\n  vocab_size: 1000\n"),
        "model", "hidden_width must divide by num_heads, and num_heads by num_key_value_heads"),
    "more experts per token than experts": (
        MINIMAL.replace("  preset: llama2-7b\n",
                        "  preset: mixtral-8x7b\n  num_experts: 2\n  num_experts_per_tok: 4\n"),
        "model", "num_experts_per_tok cannot exceed num_experts"),
    "a spot wait shorter than the run": (
        MINIMAL.replace("  region: us-west-2\n", "  region: us-west-2\n  spot: true\n  max_run: 2h\n  max_wait: 1h\n"),
        "cluster", "max_wait (3600s) must be at least max_run (7200s)"),
    "subnets without security groups": (
        MINIMAL.replace("  region: us-west-2\n", "  region: us-west-2\n  subnets: [subnet-0123abcd]\n"),
        "cluster", "a VPC needs both subnets and security_group_ids"),
    "synthetic validation data": (MINIMAL + "data:\n  validation: synthetic\n",
                                  "data", "validation: synthetic data only applies to the train channel"),
    "a channel set twice": (MINIMAL + "data:\n  train: s3://my-bucket/a\n  channels:\n    train: s3://my-bucket/b\n",
                            "data", "channel 'train' is set both as data.train and data.channels.train"),
    "a token budget of too many steps": (MINIMAL + "training:\n  batch_size: 1\n  tokens: 10000000000000000\n",
                                         "", "needs 305,175,781,250 steps at this global batch; at most 10**9"),
    "a warmup longer than the token budget": (
        MINIMAL + "training:\n  batch_size: 1\n  tokens: 327680\n  warmup_steps: 20\n",
        "", "warmup_steps (20) cannot exceed the 10 steps training.tokens gives"),
}


@pytest.mark.parametrize("case", CROSS_FIELD, ids=str)
def test_a_rule_across_fields_is_one_line_at_the_section(case, run_cli, write_spec):
    text, path, words = CROSS_FIELD[case]
    r = run_cli("validate", str(write_spec(text)))
    assert r.code == 2 and "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert words in r.err, r.err
    if path:
        assert one_error(r)["path"] == path


def test_a_misspelt_key_of_an_optional_section_suggests_its_fields(run_cli, write_spec):
    p = write_spec(MINIMAL + "notify:\n  snss: arn:aws:sns:us-west-2:111122223333:jobs\n")
    r = run_cli("validate", str(p))
    assert r.code == 2 and "Traceback" not in r.err
    assert [LINE.match(line)["msg"] for line in r.err.strip().splitlines()] == [
        "required key is missing", "unknown key 'snss'; did you mean 'sns'?"]


def test_a_templates_folder_that_is_a_link_loop_is_not_a_folder(run_cli, write_spec, tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    p = write_spec(MINIMAL + "templates: loop\n")
    m = one_error(run_cli("validate", str(p)))
    assert m["path"] == "templates"
    assert m["msg"] == (f"'loop' is not a folder of templates (looked for {shown(tmp_path / 'loop')}, "
                        f"relative to {shown(p)})")


def test_more_than_twenty_problems_print_twenty_and_a_count_at_the_next_ones_place(run_cli, write_spec):
    p = write_spec(MINIMAL + "smp:\n" + "".join(f"  unknown_{i:02}: 1\n" for i in range(25)))
    r = run_cli("validate", str(p))
    lines = r.err.strip().splitlines()
    assert r.code == 2 and len(lines) == 21, lines
    assert all(LINE.match(line)["path"] == f"smp.unknown_{i:02}" for i, line in enumerate(lines[:20]))
    assert lines[20] == f"{shown(p)}:29:3: (spec): 5 more problems not shown"  # where the 21st is: unknown_20's
    assert lines[19].startswith(f"{shown(p)}:28:3: smp.unknown_19")
    m = one_error(run_cli("validate", str(write_spec(MINIMAL + "smp:\n  unknown: 1\n", "one.yaml"))))
    assert m["path"] == "smp.unknown"  # one problem: no count line


def test_a_problem_with_huge_parts_stays_one_bounded_line_and_json_record():
    from launcher.core.errors import Mark, Problem

    problem = Problem(Mark("f" * 300, 7, 3), "p." * 200, "m" * 5000)
    assert str(problem) == f"{'f' * 199}…:7:3: {('p.' * 200)[:199]}…: {'m' * 999}…"
    assert problem.to_dict() == {"file": "f" * 199 + "…", "line": 7, "column": 3, "path": ("p." * 200)[:199] + "…",
                                 "message": "m" * 999 + "…"}
    assert str(Problem(Mark("f.yaml", 1, 1), "", "bad")) == "f.yaml:1:1: (spec): bad"  # no path: the whole spec
