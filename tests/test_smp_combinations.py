"""The combinations SMP 2.5-2.8 and AWS's newest SMP code rule out, each refused or rendered the way that works
on SMP's images: Mistral's context parallelism and its sliding window, fp8 with SMP's activation offloading,
SMP's gradient clipping with offloading before 2.8.0, asynchronous checkpoints, cp_comm_type, the Llama 3.1 and
Mixtral 8x22B presets, and what backend auto's SMDDP rests on. Sources: the SMP v2 release notes
(https://docs.aws.amazon.com/sagemaker/latest/dg/model-parallel-release-notes.html), AWS's example scripts and
its SageMaker HyperPod training adapter (cited in launcher/rules/checks.py)."""
import ast
import json

import pytest

from launcher.plan.build import build_plan
from launcher.rules.checks import ADAPTER_140, AWSOME_NO_SMP
from launcher.spec import load_spec
from tests.conftest import JOBS, MINIMAL, plan_rows

MISTRAL_CP = ["model.preset=mistral-7b", "smp.context_parallel_degree=2", "smp.hybrid_shard_degree=8"]
P5_FP8 = ["cluster.instance_type=ml.p5.48xlarge", "training.precision=fp8"]
TP2 = ["smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4"]


@pytest.fixture
def plan_of(write_spec, monkeypatch):
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    path = write_spec(MINIMAL)
    return lambda *overrides: build_plan(load_spec(path, list(overrides)))


def _found(plan):
    return {a.rule: a for a in plan.advisories}


def _constants(script: str) -> dict:
    out = {}
    for node in ast.parse(script).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def _function(source: str, name: str) -> str:
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(source, node)


# ---- 1. Mistral with context parallelism ----

def test_mistral_context_parallelism_is_refused_before_smp_2_6_and_exits_2(run_cli, write_spec):
    path = write_spec(MINIMAL)
    sets = [a for o in MISTRAL_CP for a in ("--set", o)]
    older = run_cli("plan", str(path), *sets, "--set", "framework.pytorch_version='2.3.1'")
    assert older.code == 2
    line = next(x for x in older.err.splitlines() if "SMP100" in x)
    assert "smp.context_parallel_degree: SMP100" in line and "SMP 2.6.0" in line and "2.4.1 or later" in line
    newer = run_cli("plan", str(path), *sets)
    assert newer.code == 0, newer.err


def test_from_smp_2_6_mistral_renders_without_a_sliding_window_and_passes_cp_comm_type(plan_of):
    plan = plan_of(*MISTRAL_CP, "smp.cp_comm_type=all_gather")
    assert not plan.errors, plan.errors
    script = plan.source.files["train.py"]
    config = _constants(script)["MODEL_CONFIG"]
    assert "sliding_window" in config and config["sliding_window"] is None  # MistralConfig's default is 4096
    assert "tsm.transform(model, cp_comm_type='all_gather')" in _function(script, "transform")
    assert plan.decisions.cp_comm_type == "all_gather"
    assert "cp_comm_type" not in plan.distribution["smdistributed"]["modelparallel"]["parameters"]
    mixtral = plan_of("model.preset=mixtral-8x7b", "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4")
    assert _constants(mixtral.source.files["train.py"])["MODEL_CONFIG"]["sliding_window"] is None
    llama = _constants(plan_of().source.files["train.py"])["MODEL_CONFIG"]
    assert "sliding_window" not in llama


def test_the_rendered_mistral_config_builds_a_model_without_a_window():
    from transformers import MistralConfig

    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["model.preset=mistral-7b"]))
    config = MistralConfig(**_constants(plan.source.files["train.py"])["MODEL_CONFIG"])
    assert config.sliding_window is None and MistralConfig().sliding_window == 4096


def test_a_pretrained_mistral_loses_its_window_only_under_context_parallelism(plan_of):
    cp = plan_of(*MISTRAL_CP, "model.pretrained=mistralai/Mistral-7B-v0.1")
    assert _found(cp)["SMP101"].severity == "warning" and not cp.errors
    assert "config.sliding_window = None" in _function(cp.source.files["train.py"], "build_model")
    plain = plan_of("model.preset=mistral-7b", "model.pretrained=mistralai/Mistral-7B-v0.1")
    assert "sliding_window" not in _function(plain.source.files["train.py"], "build_model")
    assert "SMP101" not in _found(plain)


# ---- 2 and 4. activation offloading: PyTorch's by default, SMP's refused under fp8 ----

def test_offloading_defaults_to_pytorchs_wrapper_as_awss_hyperpod_adapter_sends_it(plan_of):
    plan = plan_of("smp.activation_offloading=true")
    params = plan.distribution["smdistributed"]["modelparallel"]["parameters"]
    assert params["sm_activation_offloading"] is False and plan.decisions.offloading == "pytorch"
    assert "model = offload_wrapper(fsdp_model)" in plan.source.files["train.py"]
    smp = plan_of("smp.activation_offloading=true", "smp.sm_activation_offloading=true")
    assert smp.distribution["smdistributed"]["modelparallel"]["parameters"]["sm_activation_offloading"] is True
    assert smp.decisions.offloading == "smp" and plan_of().decisions.offloading == "none"


def test_fp8_refuses_smps_offloading_and_takes_pytorchs(plan_of):
    smp = plan_of(*P5_FP8, "smp.activation_offloading=true", "smp.sm_activation_offloading=true")
    found = _found(smp)["SMP102"]
    assert found.severity == "error" and found.field == "smp.sm_activation_offloading"
    assert "reentrant" in found.message and "sm_activation_offloading: false" in found.message
    pytorch = plan_of(*P5_FP8, "smp.activation_offloading=true")
    assert not pytorch.errors, pytorch.errors
    script = pytorch.source.files["train.py"]
    assert '"NO_REENTRANT", te_checkpoint' in _function(script, "checkpointed_classes")
    assert "model = offload_wrapper(fsdp_model)" in script
    assert "SMP102" not in _found(plan_of("smp.activation_offloading=true", "smp.sm_activation_offloading=true"))


def test_pytorchs_offloading_keeps_one_layer_on_the_gpu_and_waits_for_its_copies_back(plan_of):
    """SMP's offloading prefetches activation_loading_horizon layers; PyTorch's brings one back when backward
    reaches it, with the GPU idle meanwhile (AWS's activation-offloading page)."""
    from launcher.rules.engine import Context

    pytorch = Context(plan_of("smp.activation_offloading=true").spec, "us-west-2")
    smp = Context(plan_of("smp.activation_offloading=true", "smp.sm_activation_offloading=true").spec, "us-west-2")
    assert pytorch.layout().loading_horizon == 1 and smp.layout().loading_horizon == 2
    assert pytorch.memory.breakdown["activations"] < smp.memory.breakdown["activations"]
    assert pytorch.performance.step_seconds > smp.performance.step_seconds
    off = Context(plan_of().spec, "us-west-2")
    assert off.performance.step_seconds < smp.performance.step_seconds


def test_the_loading_horizon_without_smps_offloading_is_said_to_do_nothing(plan_of):
    found = _found(plan_of("smp.activation_offloading=true", "smp.activation_loading_horizon=4"))["SMP029"]
    assert "PyTorch's offload wrapper runs and ignores it" in found.message


# ---- 3. SMP's gradient clipping with offloading before SMP 2.8.0 ----

@pytest.mark.parametrize("version, fires", [("2.4.1", True), ("2.5.1", False)])
def test_smps_clip_with_offloading_is_refused_before_2_8_under_tensor_parallelism(plan_of, version, fires):
    plan = plan_of("smp.activation_offloading=true", *TP2, f"framework.pytorch_version='{version}'")
    assert ("SMP103" in _found(plan)) is fires
    assert plan.decisions.grad_clip == "smp"
    if fires:
        msg = _found(plan)["SMP103"].message
        assert "tensor_parallel_degree 2" in msg and "SMP 2.7.0" in msg and "pytorch_version to 2.5.1" in msg


def test_expert_parallelism_needs_smps_clip_too(plan_of):
    moe = ["model.preset=mixtral-8x7b", "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4",
           "smp.activation_offloading=true"]
    assert "expert_parallel_degree 2" in _found(plan_of(*moe))["SMP103"].message


@pytest.mark.parametrize("version, clip", [("2.4.1", "fsdp"), ("2.5.1", "smp")])
def test_without_slices_an_older_image_clips_with_fsdps_own(plan_of, version, clip):
    """Tensor and expert degree 1: FSDP's clip gives the same total norm, so before SMP 2.8.0 the script takes it
    instead of refusing the job."""
    plan = plan_of("smp.activation_offloading=true", f"framework.pytorch_version='{version}'")
    assert plan.decisions.grad_clip == clip and "SMP103" not in _found(plan) and not plan.errors
    body = _function(plan.source.files["train.py"], "clip_gradients")
    assert ("from torch.sagemaker.grad_norm import clip_grad_norm_" in body) is (clip == "smp")
    assert ("return fsdp_model.clip_grad_norm_(max_norm)" in body) is (clip == "fsdp")
    assert plan_of(f"framework.pytorch_version='{version}'").decisions.grad_clip == "smp"


def test_the_175b_reference_job_plans_without_the_combination_and_names_it_on_smp_2_7(run_cli):
    plan = build_plan(load_spec(JOBS / "llama175b.yaml"))
    assert not plan.errors and "SMP103" not in _found(plan)
    assert plan.framework.smp_version == "2.8.0" and plan.decisions.grad_clip == "smp"
    assert plan.decisions.offloading == "pytorch"
    r = run_cli("plan", str(JOBS / "llama175b.yaml"), "--set", "framework.pytorch_version='2.4.1'")
    assert r.code == 2
    line = next(x for x in r.err.splitlines() if "SMP103" in x)
    assert "smp.activation_offloading: SMP103" in line
    assert "activation offloading with tensor_parallel_degree 4" in line and "SMP 2.7.0" in line


# ---- 5. asynchronous checkpoints ----

@pytest.mark.parametrize("version, setting, saved_async, rule", [
    ("2.2.0", "auto", False, "SMP105"),
    ("2.2.0", "true", False, "SMP104"),  # refused; the script the plan shows saves blocking
    ("2.3.1", "auto", True, None),
    ("2.4.1", "auto", True, None),
    ("2.4.1", "false", False, None),
])
def test_checkpoints_are_saved_asynchronously_where_the_image_has_smps_async_save(plan_of, version, setting,
                                                                                  saved_async, rule):
    plan = plan_of(f"framework.pytorch_version='{version}'", f"training.async_checkpoint={setting}")
    assert plan.decisions.async_checkpoint is saved_async
    rules = {r for r in ("SMP104", "SMP105") if r in _found(plan)}
    assert rules == ({rule} if rule else set())
    script = plan.source.files["train.py"]
    body = " ".join(_function(script, "checkpoints").split())
    has_smp = version != "2.2.0"
    assert ("torch.sagemaker.distributed.checkpoint" in script) is has_smp
    assert ("smp_async_checkpoint(), readers=[blocking]" in body) is (saved_async and has_smp)
    if has_smp and not saved_async:  # saves blocking, still reads an asynchronous checkpoint back
        assert "readers=[smp_async_checkpoint()]" in body


def test_the_async_script_imports_smps_checkpoint_api_as_aws_does():
    script = build_plan(load_spec(JOBS / "llama70b.yaml")).source.files["train.py"]
    body = _function(script, "smp_async_checkpoint")
    for line in ("from torch.sagemaker.distributed.checkpoint.async_utils import AsyncCallsQueue",
                 "from torch.sagemaker.distributed.checkpoint.state_dict_loader import load",
                 "from torch.sagemaker.distributed.checkpoint.state_dict_saver import async_save"):
        assert line in body
    train = _function(script, "train")
    # the save in flight is finished at the next progress line, before the next save and at the end
    assert train.count("checkpoint_complete(ckpt, ckpt.finish(), fsdp_model, optimizer)") == 3
    assert train.index("ckpt.save(step, fsdp_model, optimizer)") > train.index(
        "if step % CHECKPOINT_EVERY == 0:")


def test_an_async_save_stops_training_only_for_the_copy_to_host_memory(plan_of):
    async_time = plan_of().training_time
    blocking = plan_of("training.async_checkpoint=false").training_time
    assert async_time.async_checkpoints and not blocking.async_checkpoints
    assert async_time.checkpoints == blocking.checkpoints == 2
    assert 0 < async_time.checkpoint_seconds < blocking.checkpoint_seconds / 10
    assert async_time.to_dict()["async_checkpoints"] is True


def test_the_plan_table_says_how_checkpoints_are_saved(run_cli, write_spec):
    path = write_spec(MINIMAL)
    r = run_cli("plan", str(path))
    shown = " ".join(plan_rows(r.out).values())  # a row folded at the table's width is read whole
    assert r.code == 0 and "2 asynchronous checkpoints" in shown and "(copies to host memory)" in shown
    r = run_cli("plan", str(path), "--set", "training.async_checkpoint=false")
    assert "2 checkpoint writes" in " ".join(plan_rows(r.out).values())


# ---- 6. cp_comm_type and the newer presets ----

def test_cp_comm_type_is_refused_before_smp_2_6_and_said_to_do_nothing_without_context_parallelism(plan_of):
    older = plan_of(*MISTRAL_CP[1:], "smp.cp_comm_type=all_gather", "framework.pytorch_version='2.3.1'")
    found = _found(older)["SMP059"]
    assert found.severity == "error" and found.field == "smp.cp_comm_type" and "2.4.1 or later" in found.message
    assert older.decisions.cp_comm_type is None
    assert "cp_comm_type" not in _function(older.source.files["train.py"], "transform")
    alone = _found(plan_of("smp.cp_comm_type=all_gather"))["SMP106"]
    assert alone.severity == "warning" and "context_parallel_degree is 1" in alone.message


@pytest.mark.parametrize("preset, first, since", [("llama3.1-8b", "2.4.1", "2.6.0"),
                                                  ("llama3.1-70b", "2.4.1", "2.6.0"),
                                                  ("mixtral-8x22b", "2.2.0", "2.3.1")])
def test_each_newer_preset_is_refused_on_images_whose_smp_predates_it(plan_of, preset, first, since):
    from launcher.catalog.smp import FRAMEWORKS

    versions = sorted(FRAMEWORKS, key=lambda v: tuple(map(int, v.split("."))))
    for version in versions:
        found = _found(plan_of(f"model.preset={preset}", f"framework.pytorch_version='{version}'"))
        refused = versions.index(version) < versions.index(first)
        assert ("SMP058" in found) is refused, (preset, version)
        if refused:
            assert f"needs SMP {since}" in found["SMP058"].message
            assert f"pytorch_version to {first} or later" in found["SMP058"].message


def test_llama31_renders_its_rope_scaling_and_asks_for_a_transformers_that_reads_it(plan_of):
    plan = plan_of("model.preset=llama3.1-8b")
    config = _constants(plan.source.files["train.py"])["MODEL_CONFIG"]
    assert config["rope_scaling"] == {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    assert config["max_position_embeddings"] == 131072 and config["rope_theta"] == 500000.0
    assert plan.source.files["requirements.txt"].startswith("transformers>=4.44.2,<4.47")
    assert plan.framework.requirements["transformers"] == ">=4.44.2,<4.47"
    llama3 = plan_of("model.preset=llama3-8b")
    assert "rope_scaling" not in _constants(llama3.source.files["train.py"])["MODEL_CONFIG"]
    assert llama3.framework.requirements["transformers"] == ">=4.40.1,<4.47"


def test_mixtral_8x22b_counts_its_published_size_and_its_active_share(plan_of):
    arch = plan_of("model.preset=mixtral-8x22b", "smp.expert_parallel_degree=2",
                   "smp.hybrid_shard_degree=4").spec.model.architecture()
    assert arch.parameters == pytest.approx(141e9, rel=0.01)
    assert arch.active_parameters == pytest.approx(39e9, rel=0.01)  # Mistral AI: 39B active of 141B


# ---- 7. what backend auto's SMDDP rests on ----

def test_backend_auto_says_what_its_smddp_rests_on_and_how_to_follow_awss_newest_code(plan_of):
    found = _found(plan_of())["SMP024"]
    assert found.message.startswith("backend auto resolves to smddp")
    assert "SMP v2 best practices" in found.message and "SMDDP 2.6.0" in found.message
    assert "HyperPod training adapter, runs NCCL only" in found.message and "smp.backend: nccl" in found.message
    assert f"{ADAPTER_140}conf/config_schemas.py" in found.source and AWSOME_NO_SMP in found.source
    p5 = _found(plan_of("cluster.instance_type=ml.p5.48xlarge"))["SMP024"]
    assert p5.message.startswith("backend auto resolves to nccl") and "HyperPod" not in p5.message


def test_rules_doc_names_every_new_rule_with_its_aws_source():
    from launcher.rules.docs import markdown

    doc = markdown()
    for rule in ("SMP058", "SMP059", "SMP100", "SMP101", "SMP102", "SMP103", "SMP104", "SMP105", "SMP106"):
        row = next(line for line in doc.splitlines() if line.startswith(f"| {rule} "))
        assert "https://docs.aws.amazon.com/sagemaker/" in row, row
    assert json.dumps(doc).count("model-parallel-release-notes.html") >= 8


def test_advise_offers_the_175b_reference_on_the_image_that_takes_it_and_writes_that_into_the_spec():
    """Tensor parallelism with offloading is refused on the default image (SMP 2.7.0's clip): advise still offers
    AWS's 175B reference configuration, on PyTorch 2.5.1 (SMP 2.8.0), and the spec it writes says so."""
    import yaml

    from launcher.api import advise, advised_spec

    ranked = advise("llama-175b", instances=64, by="practices")
    ref = next(c for c in ranked if c.reference)
    assert (ref.shard, ref.tp, ref.offloading, ref.batch) == (128, 4, True, 6) and ref.pytorch_version == "2.5.1"
    assert ref.as_dict()["framework"] == {"pytorch_version": "2.5.1"}
    plain = next(c for c in ranked if not c.offloading)
    assert plain.pytorch_version is None and plain.as_dict()["framework"] == {"pytorch_version": "2.4.1"}
    body = yaml.safe_load(advised_spec("llama-175b", ref))
    assert body["framework"] == {"pytorch_version": "2.5.1"}
    assert "framework" not in yaml.safe_load(advised_spec("llama-175b", plain))
