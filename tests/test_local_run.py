"""The local CPU run (`submit --local`): the reference jobs really train, shard, checkpoint and resume."""
import importlib
import importlib.util
import json
import os
import re
import sys

import numpy as np
import pytest

from launcher.cli.present import changes_summary
from launcher.local.run import local_shard_degree, local_spec, run_changes, tiny_overrides, write_token_files
from launcher.plan.build import build_plan
from launcher.render import progress
from launcher.spec import load_spec
from tests.conftest import BACKENDS, JOBS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="the local run needs the `local` extra")

CHECKS = {
    "loss falls",
    "step-0 gradient norm equal with and without activation checkpointing",
    "each rank holds 1/shard-degree of the parameters",
    "every decoder layer is its own FSDP unit and is checkpointed",
    "checkpoint saved and loaded back bit for bit",
    "one checkpoint folder per tensor-parallel rank",
    "gradient norm equal on every rank",
    "training resumes from the checkpoint",
    "final model saved to SM_MODEL_DIR",
}
TP_FOLDERS = "one checkpoint folder per tensor-parallel rank"


@pytest.mark.parametrize("job,args,delayed,not_run", [
    ("llama7b.yaml", ["--nproc", "2"], False, {"backend smddp"}),
    ("llama70b.yaml", ["--nproc", "2"], True, {"backend smddp"}),
    # the 175B reference at TP=2: 4 ranks, two TP groups of 2, FSDP shard degree 2 per TP slice
    ("llama175b.yaml", ["--nproc", "4", "--set", "smp.tensor_parallel_degree=2"], True, {"backend smddp"}),
])
def test_tiny_local_run_of_each_reference_job(run_cli, job, args, delayed, not_run):
    r = run_cli("submit", str(JOBS / job), "--local", "--tiny", *args, "--max-steps", "4", "--output", "json")
    report = json.loads(r.out)
    assert r.code == 0, r.err[-3000:]
    checks = {c["name"]: c for c in report["checks"]}
    assert set(checks) == CHECKS
    tensor_parallel = "smp.tensor_parallel_degree=2" in args
    folders = checks.pop(TP_FOLDERS)
    assert folders["ok"] is (True if tensor_parallel else None)
    assert all(c["ok"] is True for c in checks.values()), checks
    if tensor_parallel:
        assert folders["detail"] == "DCP metadata in tp2-0/.metadata, tp2-1/.metadata"
        assert len(checks["gradient norm equal on every rank"]["detail"].split(",")) == 4
        assert any("ran as 2, emulated on gloo" in n for n in report["notes"])
    assert {i["feature"] for i in report["not_exercised"]} == not_run
    assert f"smp.delayed_param_init={str(delayed).lower()}" in report["local_changes"]
    first, second = report["runs"]
    # saves every step; the first run is killed while saving step 2 and the second resumes from step 1's
    assert first["killed"] is True and first["exit_code"] != 0 and second["killed"] is False
    assert sorted(map(int, first["losses"])) == [1, 2] and sorted(map(int, second["losses"])) == [2, 3, 4]
    assert first["losses"]["2"] == second["losses"]["2"]  # the resumed step, bit for bit
    assert "killed while saving step 2 asynchronously; restarted from step 1 (async checkpoint)" in checks[
        "training resumes from the checkpoint"]["detail"]

    lines = r.err.splitlines()
    script_lines = [line for line in lines if line.startswith("[algo-1] ")]
    assert not any("OMP_NUM_THREADS" in line or "*****" in line for line in lines)  # no torchrun banner
    assert any("LOCAL RUN" in line for line in script_lines)
    progress_lines = [line for line in script_lines if "SMP_PROGRESS" in line]
    assert len(progress_lines) == 5  # steps 1-2 until the kill, then 2-4 after the resume
    for line in progress_lines:
        values = progress.parse(line)
        assert values is not None, line
        for definition in progress.metric_definitions():
            assert re.search(definition["Regex"], line), (definition, line)
    assert [progress.parse(line)["step"] for line in progress_lines] == [1, 2, 2, 3, 4]


BRANCHES = """
name: branches
model: {type: mixtral, num_layers: 2, hidden_width: 64, num_heads: 4, num_key_value_heads: 2,
        intermediate_size: 128, vocab_size: 256, num_experts: 4, seq_length: 64,
        pretrained: mistralai/Mixtral-8x7B-v0.1}
cluster: {instance_type: ml.p5.48xlarge, region: us-west-2}
smp: {hybrid_shard_degree: 1, expert_parallel_degree: 2, activation_checkpointing: false}
training: {precision: fp16, batch_size: 2}
data: {train: "s3://my-bucket/tokens/", format: jsonl}
output: {path: "s3://my-bucket/smp", save_final_model: full}
hyperparameters: {epochs: 1}
"""


@pytest.mark.parametrize("kind", BACKENDS, ids=str)
def test_the_script_reads_the_hyperparameters_each_backend_passes_the_same(run_cli, kind):
    """Started as each backend's container starts it (the toolkit's options, or the SDK's own ModelTrainer torchrun
    driver in the unpacked `code` channel), the script reads every spec hyperparameter back as the same value."""
    hyper = "hyperparameters={flag: true, lr_hint: 0.5, tag: x, k: 3, words: '1.5 x', number_text: '7'}"
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--local", "--tiny", "--max-steps", "3", "--set", hyper,
                "--set", f"cluster.backend={kind}", "--output", "json")
    assert r.code == 0, r.err[-3000:]
    first, second = json.loads(r.out)["runs"]
    read = first["hyperparameters"]
    assert read["values"] == {"flag": True, "lr_hint": 0.5, "tag": "x", "k": 3, "words": "1.5 x", "number_text": "7"}
    assert read["folder"] == ("code" if kind == "model-trainer" else "src")
    assert second["hyperparameters"] == read


def test_local_run_of_the_branches_the_reference_jobs_leave_untaken(run_cli, write_spec):
    """Rank-0 pretrained weights, a train channel, NO_SHARD, fp16 with its grad scaler, a MoE model."""
    r = run_cli("submit", str(write_spec(BRANCHES)), "--local", "--tiny", "--max-steps", "3", "--output", "json")
    report = json.loads(r.out)
    assert r.code == 0, r.err[-3000:]
    checks = {c["name"]: c["ok"] for c in report["checks"]}
    assert checks.pop("step-0 gradient norm equal with and without activation checkpointing") is None
    assert checks.pop(TP_FOLDERS) is None
    assert all(checks.values()), report["checks"]
    assert {i["feature"] for i in report["not_exercised"]} == {"expert_parallel_degree 2", "backend nccl"}
    notes = " ".join(report["notes"])
    assert "rank 0 loaded a random model" in notes and "jsonl format from its train channel" in notes
    assert "NO_SHARD, fp16" in r.err and "hyperparameters: {'epochs': 1}" in r.err
    wrapping = next(c for c in report["checks"] if c["name"] == "every decoder layer is its own FSDP unit and is "
                                                                 "checkpointed")
    assert wrapping["detail"] == ("2 TransformerLayer layers, 2 FSDP units of their own; checkpointed: nothing "
                                  "(activation checkpointing off)")


FP8_MOE = ["--set", "model.preset=mixtral-8x7b", "--set", "smp.expert_parallel_degree=2", "--set",
           "smp.hybrid_shard_degree=16", "--set", "cluster.instance_count=4", "--set",
           "cluster.instance_type=ml.p5.48xlarge", "--set", "training.precision=fp8"]


def test_fp8_moe_checkpoints_attention_and_moe_apart_and_one_process_logs_no_shard(run_cli):
    """SMP's TransformerLayer is each FSDP unit of a transformed Mixtral; under fp8 the attention and the MoE layer
    are checkpointed apart, non-reentrant (Transformer Engine's checkpoint for the attention), and the gradient
    norm is the one without checkpointing. One process shards nothing: the script says NO_SHARD, as FSDP runs."""
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--local", "--tiny", "--nproc", "1", "--max-steps", "3",
                *FP8_MOE, "--output", "json")
    report = json.loads(r.out)
    assert r.code == 0, r.err[-3000:]
    checks = {c["name"]: c for c in report["checks"]}
    assert all(c["ok"] is not False for c in checks.values()), report["checks"]
    assert checks["every decoder layer is its own FSDP unit and is checkpointed"]["detail"] == (
        "2 TransformerLayer layers, 2 FSDP units of their own; checkpointed: 2 MultiheadAttention, 2 MoELayer")
    assert checks["step-0 gradient norm equal with and without activation checkpointing"]["ok"] is True
    assert checks["each rank holds 1/shard-degree of the parameters"]["detail"].startswith("NO_SHARD, shard degree 1")
    model_lines = [line for line in r.err.splitlines() if "] model: " in line]
    assert len(model_lines) == 2 and all(line.endswith("parameters, FSDP NO_SHARD, fp8") for line in model_lines)


def test_llama31_in_fp8_offloads_with_pytorchs_wrapper_around_transformer_engines_checkpoint(run_cli):
    """Llama 3.1's rope scaling builds and trains; under fp8 with activation offloading the script wraps the
    non-reentrant Transformer Engine checkpoint in PyTorch's offload wrapper (SMP's own offloading would need
    reentrant checkpointing: SMP102), as AWS's HyperPod adapter does, and the distribution sends
    sm_activation_offloading false."""
    args = ["--set", "model.preset=llama3.1-8b", "--set", "cluster.instance_type=ml.p5.48xlarge",
            "--set", "training.precision=fp8", "--set", "smp.activation_offloading=true"]
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--local", "--tiny", "--nproc", "1", "--max-steps", "3",
                *args, "--output", "json")
    report = json.loads(r.out)
    assert r.code == 0, r.err[-3000:]
    checks = {c["name"]: c for c in report["checks"]}
    assert all(c["ok"] is not False for c in checks.values()), report["checks"]
    assert checks["step-0 gradient norm equal with and without activation checkpointing"]["ok"] is True
    assert "restarted from step 1 (async checkpoint)" in checks["training resumes from the checkpoint"]["detail"]
    assert any("PyTorch's offload_wrapper is wired up" in n for n in report["notes"])
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", args[1::2]))
    assert plan.distribution["smdistributed"]["modelparallel"]["parameters"]["sm_activation_offloading"] is False
    assert plan.spec.model.architecture().num_key_value_heads == 8 and not plan.errors


def test_local_takes_one_spec_and_enough_steps(run_cli):
    two = run_cli("submit", str(JOBS / "llama7b.yaml"), str(JOBS / "llama70b.yaml"), "--local")
    assert two.code == 2 and "one spec" in two.err
    short = run_cli("submit", str(JOBS / "llama7b.yaml"), "--local", "--max-steps", "2")
    assert short.code == 2 and "max-steps" in short.err


@pytest.mark.parametrize("job", ["llama70b.yaml", "llama175b.yaml"])
def test_tiny_keeps_the_architecture_and_its_shape(job):
    full = load_spec(JOBS / job).spec
    tiny, changes = local_spec(str(JOBS / job), [], True, 6)
    arch, small = full.model.architecture(), tiny.spec.model.architecture()
    assert small.type == arch.type and small.num_layers == 2 and small.hidden_width == 64
    assert small.num_heads // small.num_key_value_heads == min(4, arch.num_heads // arch.num_key_value_heads)
    assert abs(small.intermediate_size / small.hidden_width - arch.intermediate_size / arch.hidden_width) < 0.05
    # asynchronous saves (the reference jobs' images have them): every 2 steps, the first run killed saving step 4
    assert tiny.spec.training.max_steps == 6 and tiny.spec.training.checkpoint_every == 2
    blocking, _ = local_spec(str(JOBS / job), ["training.async_checkpoint=false"], True, 6)
    assert blocking.spec.training.checkpoint_every == 4  # one save past the middle, the run completes
    assert tiny.spec.smp.tensor_parallel_degree == full.smp.tensor_parallel_degree  # reported, not rewritten
    mixtral = load_spec(JOBS / job, ["model.preset=mixtral-8x7b"]).spec
    assert "model.num_experts=4" in tiny_overrides(mixtral)


def test_the_changes_line_is_short_and_json_keeps_the_list():
    tiny, changes = local_spec(str(JOBS / "llama7b.yaml"), [], True, 20)
    assert len(" ".join(changes)) > 200  # what the text report printed in full
    line = changes_summary(changes)
    assert len(line) < 100 and line.startswith(f"{len(changes)} values (model ") and "--output json" in line


def test_local_shard_degree_is_the_largest_divisor_allowed():
    assert [local_shard_degree(8, n) for n in (1, 2, 3, 4, 6)] == [1, 2, 3, 4, 6]
    assert local_shard_degree(1, 4) == 1 and local_shard_degree(2, 6) == 2 and local_shard_degree(4, 6) == 3


@pytest.fixture
def runtime():
    """The modules the source dir gets verbatim (launcher.runtime), each test with a fresh copy."""
    names = [f"launcher.runtime.{name}" for name in ("train_data", "train_checkpoint", "tsm_local")]
    for name in names:
        sys.modules.pop(name, None)
    yield lambda name: importlib.import_module(f"launcher.runtime.{name}")
    for name in names:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("backend,device", [("nccl", "cuda:0"), ("gloo", "cpu")])
def test_a_checkpoints_vote_travels_on_the_process_groups_device(runtime, monkeypatch, backend, device):
    """NCCL carries CUDA tensors only: the local run's checkpoint check voted with a CPU tensor and failed on a GPU
    ("No backend type associated with device type cpu", seen on an H200). The vote's device follows the backend."""
    import torch
    import torch.distributed as dist

    ckpt = runtime("train_checkpoint")
    made, real = [], torch.tensor

    def tensor(data, device=None, **kwargs):
        made.append(str(torch.device(device)) if device is not None else "cpu")
        return real(data, **kwargs)

    monkeypatch.setattr(dist, "get_backend", lambda *a: backend)
    monkeypatch.setattr(dist, "all_reduce", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(ckpt.torch, "tensor", tensor)
    assert ckpt.everywhere(True) is True and ckpt.everywhere(False) is False
    assert made == [device, device]


def test_synthetic_batches_are_a_function_of_the_step(runtime):
    import torch

    data = runtime("train_data")
    a = data.SyntheticBatches(256, 16, 4, seed=1, dp_rank=0)
    assert torch.equal(a.batch(3), data.SyntheticBatches(256, 16, 4, seed=1, dp_rank=0).batch(3))
    assert not torch.equal(a.batch(3), a.batch(4))
    assert not torch.equal(a.batch(3), data.SyntheticBatches(256, 16, 4, seed=1, dp_rank=1).batch(3))
    b = a.batch(1)
    assert b.shape == (4, 16) and torch.equal((b[:, :-1] + 1) % 256, b[:, 1:])


@pytest.mark.parametrize("fmt", ["jsonl", "npy"])
def test_token_files_are_cut_into_sequences_per_rank(runtime, tmp_path, fmt):
    import torch

    data = runtime("train_data")
    channel = tmp_path / "train"
    channel.mkdir()
    tokens = np.arange(10 * 8, dtype=np.int64)
    if fmt == "npy":
        np.save(channel / "a.npy", tokens[:40].reshape(5, 8))
        np.save(channel / "b.npy", tokens[40:])
    else:
        (channel / "a.jsonl").write_text("\n".join(json.dumps({"input_ids": tokens[i:i + 8].tolist()})
                                                   for i in range(0, 80, 8)) + "\n")
    cache = str(tmp_path / "cache")
    ranks = [data.TokenFileBatches(str(channel), fmt, 8, 2, seed=0, dp_rank=r, dp_size=2, cache_dir=cache)
             for r in (0, 1)]
    seen = torch.cat([r.batch(s) for s in (1, 2) for r in ranks])
    assert seen.shape == (8, 8) and len({int(row[0]) for row in seen}) == 8  # no row twice in an epoch
    assert all(int(row[0]) % 8 == 0 and torch.equal(row, torch.arange(row[0], row[0] + 8)) for row in seen)
    assert torch.equal(ranks[0].batch(3), ranks[0].batch(3)) and ranks[0].per_epoch == 2
    with pytest.raises(ValueError, match="fewer than one global batch"):
        data.TokenFileBatches(str(channel), fmt, 8, 8, seed=0, dp_rank=0, dp_size=2, cache_dir=cache)


def test_checkpoints_resume_from_the_newest_complete_one_and_prune(runtime, tmp_path):
    ckpt = runtime("train_checkpoint")
    tmp_path = tmp_path / "checkpoints"
    for step in (10, 20, 30, 40):
        d = tmp_path / f"step_{step:08d}"
        d.parent.mkdir(exist_ok=True)
        d.mkdir()
        if step != 40:  # step 40 was interrupted mid-save
            (d / ckpt.MARKER).write_text(f"{step}\n")
    assert ckpt.complete_steps(str(tmp_path)) == [10, 20, 30] and ckpt.latest_step(str(tmp_path)) == 30
    ckpt.prune(str(tmp_path), keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000020", "step_00000030", "step_00000040"]
    assert ckpt.latest_step(str(tmp_path / "missing")) is None


def test_a_checkpoints_marker_says_how_it_was_written_and_an_older_marker_reads_as_blocking(runtime, tmp_path):
    ckpt = runtime("train_checkpoint")
    for step, text in ((10, "10\n"), (20, "20 sync\n"), (30, "30 async\n")):
        (tmp_path / f"step_{step:08d}").mkdir()
        (tmp_path / f"step_{step:08d}" / ckpt.MARKER).write_text(text)
    assert [ckpt.kind(str(tmp_path), s) for s in (10, 20, 30)] == ["sync", "sync", "async"]
    assert ckpt.complete_steps(str(tmp_path)) == [10, 20, 30]


def test_a_save_replaces_what_a_stopped_run_left_of_the_same_step(runtime, tmp_path, monkeypatch):
    """A run killed mid-save leaves step_N without its marker; the resumed run saving step N again starts from an
    empty folder, so no file of the unfinished save is taken for part of the new one."""
    import torch
    import torch.distributed as dist

    ckpt = runtime("train_checkpoint")
    stale = tmp_path / "step_00000002"
    stale.mkdir()
    (stale / "__9_0.distcp").write_text("half written")
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    monkeypatch.setenv("LOCAL_RANK", "0")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        checkpoints = ckpt.Checkpoints(str(tmp_path), 2, ckpt.Layout(), ckpt.TorchWriter())
        assert checkpoints.save(2, model, optimizer) == str(stale)
    finally:
        dist.destroy_process_group()
    assert not (stale / "__9_0.distcp").exists() and (stale / ".metadata").exists()
    assert (stale / ckpt.MARKER).read_text() == "2 sync\n"


def test_the_stand_ins_async_save_exists_only_from_smp_2_5_and_its_queue_waits_or_not(runtime, monkeypatch):
    from concurrent.futures import Future

    tsm = runtime("tsm_local")
    monkeypatch.setenv("SMP_LAUNCH_SMP_RELEASE", "2.3.1")
    with pytest.raises(RuntimeError, match="SMP 2.3.1 has no asynchronous save"):
        tsm.async_save({}, checkpoint_id="x", queue=tsm.AsyncCallsQueue())
    queue = tsm.AsyncCallsQueue()
    running = Future()
    queue.pending.append(running)
    assert queue.maybe_finalize_async_calls(blocking=False) == 0 and queue.pending == [running]
    running.set_result(None)
    assert queue.maybe_finalize_async_calls(blocking=False) == 1 and queue.pending == []


def test_the_fallback_refuses_what_it_cannot_run_and_builds_the_mesh(runtime, monkeypatch):
    import torch
    import torch.distributed as dist

    tsm = runtime("tsm_local")
    with pytest.raises(RuntimeError, match="init_process_group"):
        tsm.init({"hybrid_shard_degree": 1})
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(RuntimeError, match="context_parallel_degree=2 needs SMP"):
            tsm.init({"context_parallel_degree": 2})
        with pytest.raises(RuntimeError, match="tensor_parallel_degree 2 must divide"):
            tsm.init({"tensor_parallel_degree": 2})
        with pytest.raises(RuntimeError, match="must divide"):
            tsm.init({"hybrid_shard_degree": 2})
        monkeypatch.setenv("SMP_CONFIG_JSON", json.dumps({"hybrid_shard_degree": 0}))
        state = tsm.init()
        assert tsm.is_initialized() and state.hybrid_shard_degree == 1 and state.tp_size == 1
        model = torch.nn.Linear(2, 2)
        assert tsm.transform(model) is model
    finally:
        dist.destroy_process_group()


def test_transform_leaves_smps_layer_classes_in_place_and_the_model_unchanged(runtime):
    """The stand-in's transformed Mixtral holds TransformerLayer, MultiheadAttention and MoELayer instances, as
    SMP's does, with Hugging Face's parameter names and the same forward pass."""
    import torch
    import torch.distributed as dist
    from transformers import MixtralConfig, MixtralForCausalLM

    tsm = runtime("tsm_local")
    torch.manual_seed(0)
    model = MixtralForCausalLM(MixtralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                             num_attention_heads=4, num_key_value_heads=2, num_local_experts=4))
    ids = torch.randint(0, 64, (2, 8))
    before, keys = model(input_ids=ids).logits, list(model.state_dict())
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        tsm.init({"hybrid_shard_degree": 1})
        model = tsm.transform(model)
    finally:
        dist.destroy_process_group()
    layers = list(model.model.layers)
    assert all(isinstance(layer, tsm.TransformerLayer) for layer in layers) and len(layers) == 2
    assert all(isinstance(layer.self_attn, tsm.MultiheadAttention) for layer in layers)
    assert all(isinstance(layer.block_sparse_moe, tsm.MoELayer) for layer in layers)
    assert sum(isinstance(m, tsm.TransformerLayer) for m in model.modules()) == 2
    assert type(layers[0]).__name__ == "MixtralDecoderLayer" and list(model.state_dict()) == keys
    assert torch.equal(model(input_ids=ids).logits, before)


@pytest.mark.parametrize("release, has_cp", [("2.3.1", False), ("2.5.0", True), (None, True)])
def test_the_stand_in_has_context_parallel_state_only_from_smp_2_5(runtime, monkeypatch, release, has_cp):
    """SMP 2.3.1 (the PyTorch 2.2.0 image) has no context parallelism: the stand-in's tsm.state has no cp_size then,
    so a script that read it would fail locally as on that image."""
    import torch.distributed as dist

    tsm = runtime("tsm_local")
    if release:
        monkeypatch.setenv("SMP_LAUNCH_SMP_RELEASE", release)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        state = tsm.init({"hybrid_shard_degree": 1})
    finally:
        dist.destroy_process_group()
    assert all(hasattr(state, name) is has_cp for name in ("cp_size", "cp_rank", "context_parallel_degree"))
    assert state.tp_size == 1 and state.expert_parallel_degree == 1


def test_an_older_images_script_trains_on_a_stand_in_without_context_parallelism(run_cli):
    """The PyTorch 2.2.0 image (SMP 2.3.1): the stand-in gets only the parameters that release takes and has no
    cp_size, and the rendered script trains, checkpoints and resumes without reading it."""
    from launcher.local.run import smp_config
    from launcher.plan.build import build_plan

    older = ["framework.pytorch_version=2.2.0"]
    loaded = load_spec(JOBS / "llama7b.yaml", older)
    assert "context_parallel_degree" not in smp_config(loaded.spec, 1, 1, build_plan(loaded).decisions.smp_parameters)
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--local", "--tiny", "--nproc", "1", "--max-steps", "3",
                "--set", older[0], "--output", "json")
    report = json.loads(r.out)
    assert r.code == 0, r.err[-3000:]
    assert all(c["ok"] is not False for c in report["checks"]), report["checks"]
    assert "FSDP NO_SHARD, bf16" in r.err


def test_a_job_resumes_from_a_checkpoint_of_either_kind_the_rendered_scripts_wrote(tmp_path):
    """Three runs of the rendered tiny 7B script in one checkpoint dir: saving asynchronously, killed mid-save at
    step 4; then saving blocking (training.async_checkpoint false), resuming from step 2's asynchronous
    checkpoint and killed after its blocking save of step 4; then asynchronous again, resuming from that blocking
    checkpoint. The second repeats the first's steps 3 and 4 bit for bit; every checkpoint loads back bit for
    bit."""
    from launcher.local.launchers import launch
    from launcher.local.run import _torchrun, smp_config
    from launcher.render.files import write_source_dir

    base = load_spec(JOBS / "llama7b.yaml").spec
    tiny = [*tiny_overrides(base), "training.max_steps=6", "training.log_every=1", "training.checkpoint_every=2",
            "smp.delayed_param_init=false"]
    ckpt = tmp_path / "checkpoints"

    def run(name, sets, hold):
        plan = build_plan(load_spec(JOBS / "llama7b.yaml", [*tiny, *sets]))
        write_source_dir(plan.source.files, tmp_path / name)
        env = {**os.environ, "SMP_CONFIG_JSON": json.dumps(smp_config(plan.spec, 2, 1, plan.decisions.smp_parameters)),
               "SMP_LAUNCH_SMP_RELEASE": plan.decisions.smp_release, "SMP_LAUNCH_LOCAL_RUN": "1",
               "SMP_LAUNCH_CHECKPOINT_DIR": str(ckpt), "SM_MODEL_DIR": str(tmp_path / "model"),
               "PYTHONWARNINGS": "ignore::FutureWarning", "OMP_NUM_THREADS": "1",
               **({"SMP_LAUNCH_LOCAL_HOLD_AT": str(hold)} if hold else {})}
        started = launch(plan, 2)
        record = _torchrun(tmp_path / name, started.command, {**env, **started.env}, lambda line: None)
        assert record.killed is bool(hold) and (record.exit_code == 0) is (not hold), record.exit_code
        return record

    first = run("async", [], hold=4)
    assert (ckpt / "step_00000002" / ".complete").read_text() == "2 async\n"
    second = run("blocking", ["training.async_checkpoint=false"], hold=4)
    assert second.of("resumed") == [{"check": "resumed", "step": 2, "kind": "async"}]
    assert (ckpt / "step_00000004" / ".complete").read_text() == "4 sync\n"  # complete before the kill
    third = run("async-again", [], hold=None)
    assert third.of("resumed") == [{"check": "resumed", "step": 4, "kind": "sync"}]
    losses = [r.losses() for r in (first, second, third)]
    assert sorted(losses[0]) == [1, 2, 3, 4] and sorted(losses[1]) == [3, 4] and sorted(losses[2]) == [5, 6]
    assert all(losses[0][s] == losses[1][s] for s in (3, 4))
    assert all(f["equal"] for r in (first, second, third) for f in r.of("checkpoint_round_trip"))


def _tiny_config(preset):
    """A 1-layer preset's architecture, its transformers module and class names, and its rendered config."""
    from launcher.catalog.architecture import HF_CLASSES
    from launcher.render.files import hf_config

    kv = "4" if preset == "gpt-neox-20b" else "2"
    spec = load_spec(JOBS / "llama7b.yaml", [f"model.preset={preset}", "model.num_layers=1", "model.hidden_width=64",
                                             "model.num_heads=4", f"model.num_key_value_heads={kv}",
                                             "model.intermediate_size=96", "model.vocab_size=128"]).spec
    arch = spec.model.architecture()
    config_name, model_name, _ = HF_CLASSES[arch.type]
    module = importlib.import_module(f"transformers.models.{arch.type}.modeling_{arch.type}")
    return arch, getattr(module, model_name), getattr(module, config_name)(**hf_config(spec))


@pytest.mark.parametrize("preset", ["llama3-8b", "mistral-7b", "mixtral-8x7b", "gpt-neox-20b"])
def test_the_rendered_config_builds_the_model_the_plan_counts(preset):
    """hf_config's keyword arguments give transformers' model exactly the architecture's parameter count."""
    arch, model_cls, config = _tiny_config(preset)
    model = model_cls(config)
    assert sum(p.numel() for p in model.parameters()) == arch.parameters
    assert model.config.use_cache is False and model.config._attn_implementation == "sdpa"


def _tiny_model(preset, seed, meta=False):
    """The entry script's model for a 1-layer preset (its rendered config), built as it builds it."""
    import torch
    from accelerate import init_empty_weights

    _, model_cls, config = _tiny_config(preset)
    torch.manual_seed(seed)
    if not meta:
        return model_cls(config)
    with init_empty_weights(include_buffers=False):
        return model_cls(config)


@pytest.mark.parametrize("preset", ["llama3-8b", "mistral-7b", "mixtral-8x7b", "gpt-neox-20b"])
def test_delayed_init_gives_every_tensor_its_constructors_value(runtime, preset):
    """On the installed transformers (4.x, the images' range, covers no RMSNorm in `_init_weights`; 5.x does),
    the stand-in's param_init_fn leaves no tensor on meta, gives each tensor the constructor initialises
    the same way under any seed (norm weights 1, biases 0, rotary buffers) exactly that value, and the
    random ones the constructor's spread."""
    import torch

    tsm = runtime("tsm_local")
    built, other = _tiny_model(preset, seed=1), _tiny_model(preset, seed=2)
    model = _tiny_model(preset, seed=3, meta=True)
    assert any(p.is_meta for p in model.parameters())
    initer = tsm.DelayedParamIniter(model)
    with initer.validate_params_and_buffers_inited():
        initer.get_param_init_fn()(model)
    tensors = lambda m: {n: t.detach() for n, t in (*m.named_parameters(), *m.named_buffers())}  # noqa: E731
    theirs, again = tensors(built), tensors(other)
    seed_free = {n for n, t in theirs.items() if torch.equal(t, again[n])}
    assert any("norm" in n or "layernorm" in n.lower() for n in seed_free), sorted(seed_free)
    mine = tensors(model)
    assert set(mine) == set(theirs)
    for name, tensor in mine.items():
        assert not tensor.is_meta and tensor.device.type == "cpu", name
        if name in seed_free:
            assert torch.equal(tensor, theirs[name]), name
        else:
            assert not torch.isnan(tensor).any() and tensor.std() > 0, name
            assert float(tensor.std()) == pytest.approx(float(theirs[name].std()), rel=0.25), name


def test_delayed_init_refuses_a_tensor_no_initialiser_covers(runtime):
    """A custom layer whose value only its __init__ knew is an error, never a run on uninitialised memory."""
    import torch

    tsm = runtime("tsm_local")

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = torch.nn.Parameter(torch.full((4,), 0.5))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj, self.scale = torch.nn.Linear(4, 4), Scale()

        def _init_weights(self, module):
            if isinstance(module, torch.nn.Linear):
                module.weight.data.normal_(0.0, 0.02)

    model = Model().to("meta")
    with pytest.raises(RuntimeError, match="Scale.gain: neither reset_parameters nor"):
        tsm.DelayedParamIniter(model).get_param_init_fn()(model)
    assert not model.proj.weight.is_meta and float(model.proj.bias.detach().abs().max()) <= 0.5  # 1/sqrt(4)


def test_advisor_errors_block_the_local_run_too(run_cli):
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--local", "--tiny", "--set", "smp.tensor_parallel_degree=3")
    assert r.code == 2 and "SMP001" in r.err and "[algo-1]" not in r.out


def test_a_full_size_model_that_cannot_fit_here_is_refused_with_a_hint(run_cli):
    r = run_cli("submit", str(JOBS / "llama175b.yaml"), "--local")
    assert r.code == 2 and "add --tiny" in r.err and len(r.err.strip().splitlines()) == 1
    assert "[algo-1]" not in r.out


def test_a_missing_local_extra_is_one_line_naming_the_package(run_cli, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else real(name, *a))
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--local", "--tiny")
    assert r.code == 2 and "(transformers is missing): pip install 'smp-launch[local]'" in r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize("batch,shrunk", [(4, False), (5, True)])
def test_tiny_shrinks_only_a_batch_above_four(batch, shrunk):
    spec = load_spec(JOBS / "llama7b.yaml", [f"training.batch_size={batch}"]).spec
    assert ("training.batch_size=4" in tiny_overrides(spec)) is shrunk


def test_the_api_refuses_too_few_steps_or_processes_before_running_anything(monkeypatch):
    import launcher
    from launcher.core.errors import ArgumentError
    from launcher.local import run

    monkeypatch.setattr(run, "_torchrun", lambda *a: pytest.fail("torchrun started"))
    with pytest.raises(ArgumentError, match="must be at least 3"):
        launcher.run_local(str(JOBS / "llama7b.yaml"), tiny=True, max_steps=2)
    with pytest.raises(ArgumentError, match="must be at least 1"):
        launcher.run_local(str(JOBS / "llama7b.yaml"), tiny=True, nproc=0)


def test_a_first_run_that_fails_is_not_restarted_and_its_exit_code_is_the_results(monkeypatch):
    import launcher
    from launcher.local import run
    from launcher.local.checks import RunRecord

    started = []
    monkeypatch.setattr(run, "_torchrun", lambda *a: started.append(a) or RunRecord(exit_code=3, wall_s=0.1))
    result = launcher.run_local(str(JOBS / "llama7b.yaml"), tiny=True, max_steps=4, echo=lambda line: None)
    assert (result.exit_code, len(started), len(result.runs), result.checks) == (3, 1, 1, [])


def test_a_long_warmup_is_cut_to_a_quarter_of_the_local_steps():
    spec = load_spec(JOBS / "llama7b.yaml", ["training.warmup_steps=5"]).spec
    assert "training.warmup_steps=3" in run_changes(spec, 12)
    assert not any(c.startswith("training.warmup_steps") for c in run_changes(spec, 20))


def test_token_files_in_npy_hold_the_rows_asked_for(tmp_path):
    write_token_files(tmp_path / "train", "npy", 256, 6, 16)
    data = np.load(tmp_path / "train" / "part-00000.npy")
    assert data.shape == (6, 16) and data.dtype == np.int32 and int(data.max()) < 256


def test_ctrl_c_during_a_local_run_stops_torchrun_and_is_raised(tmp_path):
    from launcher.local.run import _torchrun

    (tmp_path / "train.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(120)\n")

    def interrupt(line):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _torchrun(tmp_path, [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
                             "train.py"], {**os.environ, "OMP_NUM_THREADS": "1"}, interrupt)


def test_the_stand_in_gets_only_the_smp_parameters_the_image_takes():
    from launcher.local.run import smp_config

    spec = load_spec(JOBS / "llama7b.yaml").spec
    assert set(smp_config(spec, 2, 1)) == {"hybrid_shard_degree", "tensor_parallel_degree", "context_parallel_degree",
                                           "expert_parallel_degree", "sm_activation_offloading",
                                           "activation_loading_horizon"}
    assert smp_config(spec, 2, 1, taken=("hybrid_shard_degree", "tensor_parallel_degree")) == {
        "hybrid_shard_degree": 2, "tensor_parallel_degree": 1}


def test_the_local_run_report_as_a_table(run_cli, monkeypatch):
    """What a person reads after `submit --local` (the runs themselves are the tests above; here, only their
    report): the machine's changes counted, each check's verdict, what went unexercised, each run's time."""
    from launcher import api
    from launcher.local.checks import Check, RunRecord
    from launcher.local.run import LocalRunResult

    result = LocalRunResult(
        spec_file="jobs/llama7b.yaml", nproc=2, tiny=True, exit_code=3,
        local_changes=["model.num_layers=2", "model.hidden_width=64", "smp.delayed_param_init=false"],
        notes=["ran as 2, emulated on gloo"], not_exercised=[{"feature": "fp8", "reason": "needs H100s"}],
        checks=[Check("loss is finite", True, "4 steps"), Check("resumed", False, "step 4 differs"),
                Check("tp folders", None, "tensor parallelism is 1")],
        runs=[RunRecord(0, 12.34), RunRecord(1, 5.0)])
    monkeypatch.setattr(api, "run_local", lambda *args, **kwargs: result)
    r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--local", "--tiny")
    assert r.code == 3 and r.out.splitlines() == [
        "", "Local run of jobs/llama7b.yaml: 2 processes, CPU, gloo, tiny model",
        "  changed for this machine: 3 values (model 2, smp 1); `--output json` lists them",
        "  note: ran as 2, emulated on gloo",
        "  PASS loss is finite: 4 steps", "  FAIL resumed: step 4 differs",
        "  n/a  tp folders: tensor parallelism is 1",
        "  NOT EXERCISED fp8: needs H100s",
        "  wall time: run 1 12.3 s (exit 0), run 2 5.0 s (exit 1)"]
