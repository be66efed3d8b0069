"""Presets match published sizes; extends, --set and ${VAR} behave as documented."""
import pytest

from launcher.core.durations import parse_duration
from launcher.spec import load_spec
from launcher.spec.presets import PRESETS
from tests.conftest import MINIMAL

EXPECTED = {"llama2-7b", "llama2-13b", "llama2-70b", "llama-175b", "llama3-8b", "llama3-70b", "llama3.1-8b",
            "llama3.1-70b", "mistral-7b", "mixtral-8x7b", "mixtral-8x22b", "gpt-neox-20b"}


def test_preset_names_are_exactly_the_documented_ones():
    assert set(PRESETS) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parameter_count_within_two_percent_of_published(name):
    preset = PRESETS[name]
    counted = preset.architecture.parameters
    assert abs(counted - preset.published_parameters) / preset.published_parameters < 0.02, counted


def test_known_exact_counts():
    assert PRESETS["llama2-7b"].architecture.parameters == 6_738_415_616
    assert PRESETS["mixtral-8x7b"].architecture.parameters == 46_702_792_704
    assert round(PRESETS["mixtral-8x7b"].architecture.active_parameters / 1e9, 1) == 12.9  # Mistral's "12.9B"
    dense = PRESETS["llama2-7b"].architecture
    assert dense.active_parameters == dense.parameters  # a dense model's tokens pass through all of it


# Each released checkpoint's exact parameter count (the total of its safetensors on the Hugging Face Hub, the
# preset's `source` repository) and its config.json's max_position_embeddings.
RELEASED = {"llama2-7b": (6_738_415_616, 4096), "llama2-13b": (13_015_864_320, 4096),
            "llama2-70b": (68_976_648_192, 4096), "llama3-8b": (8_030_261_248, 8192),
            "llama3-70b": (70_553_706_496, 8192), "mistral-7b": (7_241_732_096, 32768),
            "mixtral-8x7b": (46_702_792_704, 32768), "gpt-neox-20b": (20_554_567_680, 2048)}


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_each_released_model_counts_its_checkpoints_parameters_and_keeps_its_context(name, write_spec):
    from launcher.render.files import hf_config

    params, positions = RELEASED[name]
    assert PRESETS[name].architecture.parameters == params
    spec = load_spec(write_spec(MINIMAL.replace("llama2-7b", name)), ["model.seq_length=1024"]).spec
    assert hf_config(spec)["max_position_embeddings"] == positions  # a shorter run keeps the model's own


def test_the_175b_reference_is_gpt3_in_a_llama_2_block():
    """presets.py: GPT-3 175B's 96 layers, width 12288 and 96 heads, a SwiGLU MLP of 8/3 x the width, and
    Llama 2's tokenizer and context."""
    import dataclasses

    ref, llama2 = PRESETS["llama-175b"], PRESETS["llama2-7b"]
    a = ref.architecture
    assert (a.num_layers, a.hidden_width, a.num_heads, a.num_key_value_heads) == (96, 12288, 96, 96)
    assert a.intermediate_size * 3 == 8 * a.hidden_width and a.vocab_size == llama2.architecture.vocab_size
    assert ref.max_position_embeddings == llama2.max_position_embeddings
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.max_position_embeddings = 1  # type: ignore[misc]


def test_explicit_dimensions_override_the_preset(write_spec):
    p = write_spec(MINIMAL.replace("  preset: llama2-7b\n", "  preset: llama2-7b\n  num_layers: 16\n"))
    arch = load_spec(p).spec.model.architecture()
    assert arch.num_layers == 16 and arch.hidden_width == 4096
    assert arch.parameters < PRESETS["llama2-7b"].architecture.parameters


def test_type_with_dimensions_without_a_preset(write_spec):
    p = write_spec(MINIMAL.replace("  preset: llama2-7b\n", "  type: llama\n  num_layers: 2\n  hidden_width: 64\n"
                                   "  num_heads: 4\n  intermediate_size: 128\n  vocab_size: 256\n"))
    arch = load_spec(p).spec.model.architecture()
    assert arch.type == "llama" and arch.num_key_value_heads == 4


def test_extends_deep_merges_and_the_child_wins(write_spec):
    write_spec("cluster: {instance_count: 4, region: eu-west-1}\ntags: {team: a, cost: b}\n", "base/b.yaml")
    p = write_spec("extends: base/b.yaml\n" + MINIMAL + "tags: {team: c}\n")
    spec = load_spec(p).spec
    assert spec.cluster.instance_count == 4 and spec.cluster.region == "us-west-2"
    assert spec.tags == {"team": "c", "cost": "b"}


def test_extends_chain_of_three(write_spec):
    write_spec("smp: {tensor_parallel_degree: 2}\n", "a.yaml")
    write_spec("extends: a.yaml\nsmp: {hybrid_shard_degree: 4}\n", "b.yaml")
    p = write_spec("extends: b.yaml\n" + MINIMAL)
    loaded = load_spec(p)
    assert (loaded.spec.smp.tensor_parallel_degree, loaded.spec.smp.hybrid_shard_degree) == (2, 4)
    assert [f.rsplit("/", 1)[-1] for f in loaded.files] == ["job.yaml", "b.yaml", "a.yaml"]


def test_set_is_typed_as_yaml_and_applied_after_extends(write_spec):
    write_spec("cluster: {instance_count: 4}\n", "base.yaml")
    p = write_spec("extends: base.yaml\n" + MINIMAL)
    spec = load_spec(p, ["cluster.instance_count=16", "smp.activation_offloading=true",
                         "tags={x: y}", "training.learning_rate=3e-4"]).spec
    assert spec.cluster.instance_count == 16 and spec.smp.activation_offloading is True
    assert spec.tags == {"x": "y"} and spec.training.learning_rate == pytest.approx(3e-4)


def test_environment_variables_expand_with_defaults_and_escapes(write_spec):
    p = write_spec(MINIMAL.replace("s3://my-bucket/smp", "s3://${BKT}/${PREFIX:-runs}")
                   + "environment: {PRICE: $$5}\n")
    spec = load_spec(p, env={"BKT": "team-bucket"}).spec
    assert spec.output.path == "s3://team-bucket/runs" and spec.environment == {"PRICE": "$5"}


@pytest.mark.parametrize("text,seconds", [("1d", 86400), ("12h", 43200), ("1h30m", 5400), ("90", 90), (3600, 3600)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad,why", [("1 day", "is not a duration"), ("-5", "is not a duration"),
                                     ("0", "must be positive"), ("h", "is not a duration"),
                                     (True, "expected a duration"), ("1.5", "is not a whole number of seconds"),
                                     (90.5, "not a whole number")])
def test_bad_durations(bad, why):
    with pytest.raises(ValueError, match=why):
        parse_duration(bad)


# -- a variable in a base file keeps its type through the merge -------------------------------------------

def test_an_unquoted_variable_in_the_base_stays_a_number_and_a_quoted_override_stays_text(write_spec):
    """Kills loader: the merge keeping a base's unquoted paths only where the child also writes them."""
    from launcher.core.errors import SpecError

    write_spec("training:\n  max_steps: ${SMP_TEST_STEPS:-250}\n  log_every: 5\n", "base.yaml")
    child = write_spec("extends: base.yaml\n" + MINIMAL.lstrip("\n") + "training:\n  log_every: 7\n")
    training = load_spec(child, env={}).spec.training
    assert (training.max_steps, training.log_every) == (250, 7)  # `max_steps: 250` in the base would read so
    assert load_spec(child, env={"SMP_TEST_STEPS": "40"}).spec.training.max_steps == 40
    override = 'training:\n  max_steps: "${SMP_TEST_STEPS:-250}"\n'
    quoted = write_spec("extends: base.yaml\n" + MINIMAL.lstrip("\n") + override, "quoted.yaml")
    with pytest.raises(SpecError) as err:  # the child quoted it: text, as `max_steps: "250"` would be
        load_spec(quoted, env={})
    (problem,) = err.value.problems
    assert problem.path == "training.max_steps" and "'250'" in problem.message
    assert problem.mark.file.endswith("quoted.yaml")
