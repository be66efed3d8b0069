"""The memory model, term by term, and the seed's reference configurations."""
import pytest

from launcher.plan.build import build_plan
from launcher.rules.memory import (
    CKPT_BYTES_PER_SBH,
    GIB,
    HF_ACT_BYTES_PER_SBH,
    LOGIT_BYTES,
    ParallelLayout,
    activations,
    estimate,
    forward_backward,
    gathered_units,
    kept_activations,
    layer_activations,
    logits,
    model_states,
    optimizer_step,
)
from launcher.spec import load_spec
from launcher.spec.presets import PRESETS
from tests.conftest import JOBS

L7 = PRESETS["llama2-7b"].architecture
P4D = "ml.p4d.24xlarge"


def test_model_states_are_16_bytes_per_parameter_sharded_over_shard_and_tp():
    assert model_states(L7, ParallelLayout(P4D, 1)) == 16 * L7.parameters
    assert model_states(L7, ParallelLayout(P4D, 8)) == pytest.approx(16 * L7.parameters / 8)
    assert model_states(L7, ParallelLayout(P4D, 4, tensor_parallel=2)) == pytest.approx(16 * L7.parameters / 8)


def test_expert_parallelism_splits_only_the_experts():
    mix = PRESETS["mixtral-8x7b"].architecture
    plain, ep = model_states(mix, ParallelLayout(P4D, 8)), model_states(mix, ParallelLayout(P4D, 8, expert_parallel=2))
    assert plain / 2 < ep < plain


def test_gathered_units_are_two_layers_one_gradient_and_the_root_in_16_bit():
    lay = ParallelLayout(P4D, 8)
    expected = 2 * (3 * L7.layer_parameters() + L7.embedding_parameters + L7.hidden_width)
    assert gathered_units(L7, lay) == pytest.approx(expected)
    assert gathered_units(L7, ParallelLayout(P4D, 1)) == 0
    assert gathered_units(L7, ParallelLayout(P4D, 4, tensor_parallel=2)) == pytest.approx(expected / 2)


def test_activations_follow_korthikanti_with_and_without_checkpointing():
    s, b, h, n = 4096, 4, L7.hidden_width, L7.num_layers
    sbh = s * b * h
    full = activations(L7, ParallelLayout(P4D, 8, batch_size=b, activation_checkpointing=False))
    assert full == pytest.approx(n * 34 * sbh)
    ckpt = activations(L7, ParallelLayout(P4D, 8, batch_size=b))
    assert ckpt == pytest.approx(n * 2 * sbh + 34 * sbh)
    offload = activations(L7, ParallelLayout(P4D, 8, batch_size=b, activation_offloading=True, loading_horizon=2))
    assert offload == pytest.approx(2 * 2 * sbh + 34 * sbh)
    tp_cp = activations(L7, ParallelLayout(P4D, 2, tensor_parallel=2, context_parallel=2, batch_size=b))
    assert tp_cp == pytest.approx(ckpt / 4)


def test_logits_are_14_bytes_each_split_over_tp_and_cp():
    head = 2 * 2 * 4096 * L7.hidden_width  # the LM head's bf16 input, the whole sequence
    assert logits(L7, ParallelLayout(P4D, 8, batch_size=2)) == 14 * 2 * 4096 * 32000 + head
    assert logits(L7, ParallelLayout(P4D, 8, batch_size=2, tensor_parallel=2)) == 14 * 2 * 4096 * 32000 / 2 + head


def test_framework_overhead_is_context_plus_fragmentation():
    e = estimate(L7, ParallelLayout(P4D, 8, batch_size=4))
    transient = e.breakdown["gathered_params"] + e.breakdown["activations"] + e.breakdown["logits_and_loss"]
    transient -= min(layer_activations(L7, ParallelLayout(P4D, 8, batch_size=4)) / GIB, e.breakdown["logits_and_loss"])
    assert e.peak_phase == "forward/backward" and transient > e.breakdown["optimizer_step"]
    assert e.breakdown["framework"] == pytest.approx(1.1 + 0.1 * transient)
    assert e.per_gpu_gb == pytest.approx(e.breakdown["model_states"] + transient + e.breakdown["framework"])
    assert e.breakdown["model_states"] == pytest.approx(16 * L7.parameters / 8 / GIB)


def test_the_optimizer_step_needs_one_fp32_temporary_per_local_parameter():
    """Defect: the step's transient was missing. With few shards it is the peak (70B over 8 GPUs)."""
    l70 = PRESETS["llama2-70b"].architecture
    lay = ParallelLayout(P4D, 8, batch_size=2)
    assert optimizer_step(l70, lay) == pytest.approx(4 * l70.parameters / 8)
    e = estimate(l70, lay)
    assert e.peak_phase == "optimizer step"
    assert e.per_gpu_gb == pytest.approx(e.breakdown["model_states"] + e.breakdown["optimizer_step"]
                                         + e.breakdown["framework"])
    assert e.per_gpu_gb > 16 * l70.parameters / 8 / GIB + 4 * l70.parameters / 8 / GIB


def test_hugging_face_layers_use_the_measured_constants_and_smp_layers_the_estimate():
    s, b, h, n = 4096, 4, L7.hidden_width, L7.num_layers
    hf = activations(L7, ParallelLayout(P4D, 8, batch_size=b, activation_checkpointing=False, smp_implementation=False))
    assert hf == pytest.approx(n * HF_ACT_BYTES_PER_SBH["llama"] * s * b * h)
    smp = activations(L7, ParallelLayout(P4D, 8, batch_size=b, activation_checkpointing=False))
    assert smp == pytest.approx(n * 34 * s * b * h)
    sources = estimate(L7, ParallelLayout(P4D, 8, smp_implementation=False)).to_dict()["sources"]
    assert sources["activations"].startswith("measured on CPU")
    assert estimate(L7, ParallelLayout(P4D, 8)).to_dict()["sources"]["activations"].startswith("estimate")
    assert all(v.startswith("estimate") for k, v in sources.items() if k not in ("activations", "logits_and_loss"))
    assert sources["logits_and_loss"].startswith("measured on CPU: 14 bytes per logit")


def test_a_mixture_of_experts_keeps_the_mlp_activations_once_per_routed_expert():
    mix = PRESETS["mixtral-8x7b"].architecture
    lay = ParallelLayout(P4D, 8, batch_size=1, activation_checkpointing=False)
    sbh = 4096 * mix.hidden_width
    assert activations(mix, lay) == pytest.approx(mix.num_layers * (34 + (mix.num_experts_per_tok - 1) * 19) * sbh)


def test_two_experts_both_routed_keep_the_mlp_activations_twice():
    """The routed-expert term applies from two experts up, not only to large mixtures."""
    import dataclasses

    two = dataclasses.replace(PRESETS["mixtral-8x7b"].architecture, num_experts=2, num_experts_per_tok=2)
    lay = ParallelLayout(P4D, 8, batch_size=1, activation_checkpointing=False)
    assert activations(two, lay) == pytest.approx(two.num_layers * (34 + 19) * 4096 * two.hidden_width)


def _measure_or_skip():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import importlib.util
    import pathlib
    import sys

    path = pathlib.Path(__file__).resolve().parents[1] / "tools" / "activation_measure.py"
    spec = importlib.util.spec_from_file_location("activation_measure", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("model_type", sorted(HF_ACT_BYTES_PER_SBH))
def test_measured_activation_constants_match_what_autograd_saves(model_type):
    """Re-measure with the installed transformers (bf16, sdpa, CPU): the model's constant must be within 5%."""
    m = _measure_or_skip().measure(model_type, checkpointed=False)
    assert m.bytes_per_sbh == pytest.approx(HF_ACT_BYTES_PER_SBH[model_type], rel=0.05), m
    assert m.bytes_per_sbh > 34  # above the textbook figure: norms upcast to fp32, SwiGLU keeps three projections


def test_checkpointed_layers_keep_only_their_bf16_input():
    m = _measure_or_skip().measure("llama", checkpointed=True)
    assert m.bytes_per_sbh == pytest.approx(CKPT_BYTES_PER_SBH, rel=0.05)


@pytest.mark.parametrize("job", ["llama7b.yaml", "llama70b.yaml", "llama175b.yaml"])
def test_the_seeds_reference_configurations_fit_on_p4d(job):
    plan = build_plan(load_spec(JOBS / job))
    assert plan.memory.fits and plan.memory.capacity_gb == 40
    assert 5 < plan.memory.per_gpu_gb < 40
    assert set(plan.memory.breakdown) == {"model_states", "gathered_params", "activations",
                                             "logits_and_loss", "optimizer_step", "framework"}
    assert set(plan.memory.sources) == set(plan.memory.breakdown)


def test_70b_on_one_p4d_does_not_fit():
    e = estimate(PRESETS["llama2-70b"].architecture, ParallelLayout(P4D, 8, batch_size=1))
    assert not e.fits and e.breakdown["model_states"] > 100


def test_7b_at_batch_64_without_checkpointing_does_not_fit():
    e = estimate(L7, ParallelLayout(P4D, 8, batch_size=64, activation_checkpointing=False))
    assert not e.fits and e.breakdown["activations"] > 500


def test_80gb_instances_have_twice_the_room():
    assert estimate(L7, ParallelLayout("ml.p4de.24xlarge", 8)).capacity_gb == 80
    assert estimate(L7, ParallelLayout("ml.p5.48xlarge", 8)).capacity_gb == 80


# -- terms of the memory model at their boundaries: each test fails on a realistic bug (`make mutation`) --

@pytest.fixture
def no_aws_config(monkeypatch):
    """No ~/.aws/config: the plans built here read no region or profile of the machine's."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")


MIXTRAL = PRESETS["mixtral-8x7b"].architecture


def test_context_parallelism_splits_the_logits_too():
    """Kills: context parallelism dropped from the logits term (TP alone was checked)."""
    head = 2 * 2 * 4096 * L7.hidden_width  # the LM head's input: split over cp, gathered over t
    whole = logits(L7, ParallelLayout(P4D, 8, batch_size=2)) - head
    assert whole == 14 * 2 * 4096 * 32000
    assert logits(L7, ParallelLayout(P4D, 4, batch_size=2, context_parallel=2)) == pytest.approx((whole + head) / 2)
    quarter = ParallelLayout(P4D, 2, batch_size=2, tensor_parallel=2, context_parallel=2)
    assert logits(L7, quarter) == pytest.approx(whole / 4 + head / 2)


def test_offloading_keeps_two_layer_inputs_by_default():
    """Kills memory: the default activation_loading_horizon (2, SMP v2's default) changed."""
    sbh = 4096 * 4 * L7.hidden_width
    offload = ParallelLayout(P4D, 8, batch_size=4, activation_offloading=True)
    assert activations(L7, offload) == pytest.approx(2 * 2 * sbh + 34 * sbh)


def test_gathered_layers_hold_only_the_experts_on_this_rank():
    """Kills memory: experts per rank computed as num_experts * EP instead of num_experts // EP."""
    from launcher.rules.memory import gathered_units

    mix = PRESETS["mixtral-8x7b"].architecture
    lay = ParallelLayout(P4D, 4, expert_parallel=2)
    root = mix.embedding_parameters + mix.hidden_width
    assert gathered_units(mix, lay) == pytest.approx(2 * (3 * mix.layer_parameters(experts=4) + root))


def test_expert_parallelism_changes_nothing_for_a_dense_model():
    """Kills memory: a dense model's expert parameter count starting from 1, not 0."""
    from launcher.rules.memory import model_states

    assert model_states(L7, ParallelLayout(P4D, 8, expert_parallel=2)) == 16 * L7.parameters / 8


def _model_plan(write_spec, *overrides, model: dict | None = None):
    import yaml

    from tests.conftest import MINIMAL

    spec = yaml.safe_load(MINIMAL)
    if model is not None:
        spec["model"] = model
    return build_plan(load_spec(write_spec(yaml.safe_dump(spec)), list(overrides)))


def test_the_plan_rounds_the_memory_breakdown_to_hundredths(no_aws_config, write_spec):
    """Kills memory.py MemoryEstimate.to_dict: breakdown figures rounded to 3 decimals instead of 2."""
    breakdown = _model_plan(write_spec, "smp.hybrid_shard_degree=4").to_dict()["memory"]["breakdown"]
    assert breakdown["model_states"] == 25.1 and breakdown["gathered_params"] == 1.62
    assert all(v == round(v, 2) for v in breakdown.values())


def test_sharding_over_2_gpus_still_gathers_layer_units(no_aws_config, write_spec):
    """Kills memory.py gathered_units: `shard_degree <= 2` counting no gathered parameters at degree 2."""
    by_degree = {hsd: _model_plan(write_spec, f"smp.hybrid_shard_degree={hsd}").memory.breakdown["gathered_params"]
                 for hsd in (1, 2, 4)}
    assert by_degree[1] == 0.0
    assert by_degree[2] == by_degree[4] > 0
    assert gathered_units(MIXTRAL, ParallelLayout(P4D, 2)) == gathered_units(MIXTRAL, ParallelLayout(P4D, 8)) > 0


def test_mixture_of_experts_states_count_each_parameter_once(no_aws_config):
    """Kills memory.py model_states: dense parameters taken as all plus the experts (`+`), double-counting them."""
    assert model_states(MIXTRAL, ParallelLayout(P4D, 1)) == 16 * MIXTRAL.parameters
    assert model_states(MIXTRAL, ParallelLayout(P4D, 8)) == pytest.approx(16 * MIXTRAL.parameters / 8)
    expert = MIXTRAL.num_layers * 8 * 3 * MIXTRAL.hidden_width * MIXTRAL.intermediate_size
    halved = model_states(MIXTRAL, ParallelLayout(P4D, 1, expert_parallel=2))
    assert halved == pytest.approx(16 * (MIXTRAL.parameters - expert / 2))


# -- long sequences: the loss measured, its phase apart from the recomputed layer, sequence parallelism --------

def test_the_loss_constants_match_what_the_allocator_measures():
    """Re-measure the loss's peak per logit on CPU (the profiler's allocator events): transformers' causal-LM
    loss, the script's, holds bf16 logits, an fp32 upcast, a shifted fp32 copy and the log-softmax at once."""
    tool = _measure_or_skip()
    assert tool.loss_bytes_per_logit("transformers") == pytest.approx(LOGIT_BYTES, rel=0.05)
    assert tool.loss_bytes_per_logit("torchtitan") == pytest.approx(12, rel=0.05)


def test_with_checkpointing_the_loss_and_the_recomputed_layer_do_not_add_up():
    """The loss's backward ends before the first layer is recomputed: the peak takes the larger of the two."""
    lay = ParallelLayout(P4D, 8, batch_size=1, seq_length=32768)
    kept, layer, loss = kept_activations(L7, lay), layer_activations(L7, lay), logits(L7, lay)
    assert kept == pytest.approx(L7.num_layers * 2 * 32768 * L7.hidden_width) and loss > layer
    assert forward_backward(L7, lay) == pytest.approx(gathered_units(L7, lay) + kept + loss)
    assert activations(L7, lay) == pytest.approx(kept + layer)  # the breakdown still names both
    off = ParallelLayout(P4D, 8, batch_size=1, seq_length=32768, activation_checkpointing=False)
    assert forward_backward(L7, off) == pytest.approx(gathered_units(L7, off) + kept_activations(L7, off)
                                                      + logits(L7, off))


def test_dtensor_sequence_parallelism_keeps_the_gathered_layer_inputs():
    """Under TP a DTensor layer saves its two all-gathered bf16 inputs (whole sequence); SMP's Transformer
    Engine layers gather again in backward and keep Korthikanti's 34/t."""
    sbh = 8192 * 16 * L7.hidden_width
    te = ParallelLayout(P4D, 4, tensor_parallel=8, batch_size=16, seq_length=8192)
    dtensor = ParallelLayout(P4D, 4, tensor_parallel=8, batch_size=16, seq_length=8192, sp_saves_gathered_inputs=True)
    assert layer_activations(L7, te) == pytest.approx(34 * sbh / 8)
    assert layer_activations(L7, dtensor) == pytest.approx(34 * sbh / 8 + 4 * sbh)
    flat = ParallelLayout(P4D, 8, batch_size=16, seq_length=8192, sp_saves_gathered_inputs=True)
    assert layer_activations(L7, flat) == pytest.approx(34 * sbh)  # no TP, nothing gathered


@pytest.mark.parametrize("arch,layout,published", [
    # torchtitan benchmarks/llama3_h100_202412_torchtitan.md, Table 2 (FSDP 8, CP 1, seq 32768, local batch 1,
    # full AC) and Table 4 (FSDP 32 x TP 8, seq 8192 from train_configs/llama3_70b.toml, local batch 16,
    # full AC, loss_parallel); the loss bytes are tools/activation_measure.py's for torchtitan's loss
    ("llama3-8b", dict(shard_degree=8, seq_length=32768, batch_size=1, loss_bytes_per_logit=12), 83.9),
    ("llama3-70b", dict(shard_degree=32, tensor_parallel=8, seq_length=8192, batch_size=16,
                        loss_bytes_per_logit=16), 71.9),
])
def test_long_sequence_estimates_are_within_10_percent_of_torchtitans_measured_peaks(arch, layout, published):
    lay = ParallelLayout("ml.p5.48xlarge", sp_saves_gathered_inputs=True, **layout)
    got = estimate(PRESETS[arch].architecture, lay).per_gpu_gb
    assert got == pytest.approx(published, rel=0.10)
