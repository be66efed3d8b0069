"""output.save_final_model: off by default as in AWS's examples, sharded without a gather, full refused
where rank 0's host memory cannot hold it, and the plan shows host memory beside GPU memory."""
import ast
import json

import pytest

from launcher.core.errors import SpecError
from launcher.plan.build import build_plan
from launcher.spec import load_spec
from tests.conftest import JOBS, MINIMAL, plan_rows


@pytest.fixture
def no_aws_config(monkeypatch):
    """No ~/.aws/config: the plans built here read no region or profile of the machine's."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")


def _script(write_spec, *overrides):
    return build_plan(load_spec(write_spec(MINIMAL), list(overrides))).source.files["train.py"]


def _calls(script, name):
    return [n for n in ast.walk(ast.parse(script))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]


def test_the_export_is_off_unless_the_spec_asks(no_aws_config, write_spec):
    """AWS's arguments.py: --save_final_model defaults to 0; the script exported unconditionally."""
    off = _script(write_spec)
    assert "SAVE_FINAL_MODEL = 'none'" in off
    assert not _calls(off, "save_final_model") and "FULL_STATE_DICT" not in off
    sharded = _script(write_spec, "output.save_final_model=true")
    assert "SAVE_FINAL_MODEL = 'sharded'" in sharded and len(_calls(sharded, "save_final_model")) == 1
    assert "FULL_STATE_DICT" not in sharded and "train_checkpoint.save_model(MODEL_DIR" in sharded
    full = _script(write_spec, "output.save_final_model=full")
    assert len(_calls(full, "save_final_model")) == 1 and "rank0_only=True" in full


def test_the_switch_takes_booleans_and_the_two_formats_only(no_aws_config, write_spec):
    path = write_spec(MINIMAL)
    assert load_spec(path).spec.output.final_export == "none"
    assert load_spec(path, ["output.save_final_model=true"]).spec.output.final_export == "sharded"
    assert load_spec(path, ["output.save_final_model=full"]).spec.output.final_export == "full"
    with pytest.raises(SpecError, match="output.save_final_model"):
        load_spec(path, ["output.save_final_model=gathered"])


def test_the_examples_export_as_their_size_allows():
    exports = {job: load_spec(JOBS / job).spec.output.final_export
               for job in ("llama7b.yaml", "llama70b.yaml", "llama175b.yaml")}
    assert exports == {"llama7b.yaml": "full", "llama70b.yaml": "sharded", "llama175b.yaml": "sharded"}
    assert "save_final_model: false" in (JOBS / "base" / "common.yaml").read_text()


def test_the_plan_shows_host_memory_beside_gpu_memory(run_cli, no_aws_config):
    args = ("plan", str(JOBS / "llama7b.yaml"), "--set", "model.preset=gpt-neox-20b", "--set",
            "model.seq_length=2048", "--set", "smp.delayed_param_init=false")
    r = run_cli(*args)
    table = plan_rows(r.out)
    assert table["host memory"].startswith("1,225.1 of 1,152 GiB per instance")
    assert "DOES NOT FIT" in table["host memory"] and "model build" in table["host memory"]
    host = json.loads(run_cli(*args, "--output", "json").out)["memory"]["host"]
    assert host == {"per_instance_gib": 1225.1, "capacity_gib": 1152, "fits": False, "peak_phase": "model build",
                    "breakdown": {"model_build": 1225.1, "final_export": 76.6}}


def test_the_local_run_judges_the_export_the_spec_asked_for():
    from launcher.local.checks import RunRecord, final_model_check

    off = final_model_check(RunRecord(0, 1.0), written=False, export="none")
    assert off.ok is None and "off" in off.detail
    sharded = RunRecord(0, 1.0, [{"check": "final_model", "loads": True, "format": "sharded",
                                  "folders": ["tp2-0", "tp2-1"], "model_class": "LlamaForCausalLM"}])
    check = final_model_check(sharded, written=True, export="sharded")
    assert check.ok is True and "DCP shards in tp2-0, tp2-1 load back into LlamaForCausalLM" in check.detail
    broken = RunRecord(0, 1.0, [{"check": "final_model", "loads": False, "format": "sharded", "folders": ["."],
                                 "model_class": "LlamaForCausalLM"}])
    check = final_model_check(broken, written=True, export="sharded")
    assert check.ok is False and "in SM_MODEL_DIR do NOT load" in check.detail
    assert final_model_check(RunRecord(0, 1.0), written=False, export="full").ok is False
