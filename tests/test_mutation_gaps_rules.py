"""Tests for rule and memory-model bugs a fresh mutation seed found no test noticing.

Each test's docstring names the mutation it kills; `make mutation` finds more of them.
"""
import pytest
import yaml

from launcher.plan.build import build_plan
from launcher.rules.memory import ParallelLayout, gathered_units, model_states
from launcher.spec import load_spec
from launcher.spec.presets import PRESETS
from tests.conftest import MINIMAL

P4D = "ml.p4d.24xlarge"
MIXTRAL = PRESETS["mixtral-8x7b"].architecture


@pytest.fixture(autouse=True)
def _no_aws_config(monkeypatch):
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")


def _plan(write_spec, *overrides, model: dict | None = None):
    spec = yaml.safe_load(MINIMAL)
    if model is not None:
        spec["model"] = model
    return build_plan(load_spec(write_spec(yaml.safe_dump(spec)), list(overrides)))


def _advisories(plan) -> dict:
    return {a.rule: a for a in plan.advisories}


def _small_llama(heads: int, kv_heads: int) -> dict:
    return {"type": "llama", "num_layers": 4, "hidden_width": 64 * heads, "num_heads": heads,
            "num_key_value_heads": kv_heads, "intermediate_size": 512, "vocab_size": 1000, "seq_length": 512}


def test_tensor_parallel_2_with_an_odd_head_count_is_refused(write_spec):
    """Kills rules/checks.py SMP009: the head check skipping TP 2 (`tp > 2`), so 3 heads split over 2 ranks."""
    odd_heads = _advisories(_plan(write_spec, "smp.tensor_parallel_degree=2", model=_small_llama(3, 3)))
    assert odd_heads["SMP009"].severity == "error"
    assert "tensor_parallel_degree 2 must divide num_heads 3" in odd_heads["SMP009"].message
    odd_kv = _advisories(_plan(write_spec, "smp.tensor_parallel_degree=2", model=_small_llama(6, 3)))
    assert "num_key_value_heads 3" in odd_kv["SMP009"].message
    assert "SMP009" not in _advisories(_plan(write_spec, "smp.tensor_parallel_degree=2", model=_small_llama(4, 2)))


def test_context_parallel_2_above_a_sharding_degree_of_1_is_refused(write_spec):
    """Kills rules/checks.py SMP003: the CP-within-shard check skipping CP 2 (`cp > 2`)."""
    found = _advisories(_plan(write_spec, "smp.hybrid_shard_degree=1", "smp.context_parallel_degree=2"))
    assert found["SMP003"].severity == "error"
    assert "context_parallel_degree 2 exceeds the sharding degree 1" in found["SMP003"].message
    assert "SMP003" not in _advisories(_plan(write_spec, "smp.hybrid_shard_degree=2",
                                             "smp.context_parallel_degree=2"))


def test_hybrid_shard_0_with_expert_parallel_2_is_refused_not_explained(write_spec):
    """Kills rules/checks.py SMP011: its EP guard skipping EP 2 (`> 2`): it states what SMP012 calls undefined."""
    found = _advisories(_plan(write_spec, "smp.expert_parallel_degree=2", model={"preset": "mixtral-8x7b"}))
    assert found["SMP012"].severity == "error"
    assert "SMP011" not in found


def test_the_suggested_tensor_parallel_fix_is_the_smallest_that_fits(write_spec):
    """Kills rules/checks.py SMP060: TP candidates (3, 4, 8) instead of (2, 4, 8), so TP 2 is never suggested."""
    found = _advisories(_plan(write_spec, "smp.hybrid_shard_degree=2", "training.batch_size=1"))
    message = found["SMP060"].message
    assert "raise tensor_parallel_degree to 2 (" in message
    assert "raise tensor_parallel_degree to 4" not in message


def test_an_explicit_hybrid_shard_degree_is_explained_in_the_plan(write_spec):
    """Kills rules/decisions.py shard_reason: no reason (None) for an explicit hybrid_shard_degree."""
    plan = _plan(write_spec, "smp.hybrid_shard_degree=4")
    assert plan.decisions.hybrid_shard_degree == 4
    assert plan.decisions.shard_reason == "hybrid_shard_degree 4 as set"


def test_delayed_init_reason_counts_parameters_in_billions(write_spec):
    """Kills rules/decisions.py delayed_init: the parameter count multiplied by 1e9 instead of divided."""
    reason = _plan(write_spec).decisions.delayed_reason
    assert reason.startswith("6.7B parameters (60B or less) and 8 fp32 copies")


def test_delayed_init_reason_gives_the_fp32_host_memory_of_8_ranks(write_spec):
    """Kills rules/decisions.py FP32_BYTES: fp32 taken as 5 bytes, overstating the host memory ranks need."""
    params = PRESETS["llama2-7b"].architecture.parameters
    assert round(8 * 4 * params / 2**30) == 201
    plan = _plan(write_spec)
    assert plan.decisions.delayed_reason == ("6.7B parameters (60B or less) and 8 fp32 copies (201 GiB) fit "
                                                "the 1,152 GiB of host memory")
    assert plan.decisions.delayed_param_init is False


@pytest.mark.parametrize("layers,delayed", [(40, False), (46, True)])
def test_delayed_init_turns_on_where_8_fp32_copies_exceed_host_memory(write_spec, layers, delayed):
    """Kills rules/decisions.py FP32_BYTES: a 34.8B model (8 x 4 bytes = 1,036 GiB) wrongly needing delayed init."""
    model = {"preset": "llama2-70b", "num_layers": layers}
    plan = _plan(write_spec, model=model)
    params = plan.model.architecture.parameters
    assert params < 60e9 and (8 * 4 * params / 2**30 > 1152) is delayed
    assert plan.decisions.delayed_param_init is delayed
    if delayed:
        assert "ranks each building the model in fp32 need 1,189 GiB" in plan.decisions.delayed_reason


def test_the_plan_rounds_the_memory_breakdown_to_hundredths(write_spec):
    """Kills memory.py MemoryEstimate.to_dict: breakdown figures rounded to 3 decimals instead of 2."""
    breakdown = _plan(write_spec, "smp.hybrid_shard_degree=4").to_dict()["memory"]["breakdown"]
    assert breakdown["model_states"] == 25.1 and breakdown["gathered_params"] == 1.62
    assert all(v == round(v, 2) for v in breakdown.values())


def test_sharding_over_2_gpus_still_gathers_layer_units(write_spec):
    """Kills memory.py gathered_units: `shard_degree <= 2` counting no gathered parameters at degree 2."""
    by_degree = {hsd: _plan(write_spec, f"smp.hybrid_shard_degree={hsd}").memory.breakdown["gathered_params"]
                 for hsd in (1, 2, 4)}
    assert by_degree[1] == 0.0
    assert by_degree[2] == by_degree[4] > 0
    assert gathered_units(MIXTRAL, ParallelLayout(P4D, 2)) == gathered_units(MIXTRAL, ParallelLayout(P4D, 8)) > 0


def test_mixture_of_experts_states_count_each_parameter_once():
    """Kills memory.py model_states: dense parameters taken as all plus the experts (`+`), double-counting them."""
    assert model_states(MIXTRAL, ParallelLayout(P4D, 1)) == 16 * MIXTRAL.parameters
    assert model_states(MIXTRAL, ParallelLayout(P4D, 8)) == pytest.approx(16 * MIXTRAL.parameters / 8)
    expert = MIXTRAL.num_layers * 8 * 3 * MIXTRAL.hidden_width * MIXTRAL.intermediate_size
    halved = model_states(MIXTRAL, ParallelLayout(P4D, 1, expert_parallel=2))
    assert halved == pytest.approx(16 * (MIXTRAL.parameters - expert / 2))
