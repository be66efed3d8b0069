"""The plan: topology arithmetic, the distribution dict, Estimator arguments, the image, no side effects."""
import dataclasses
import json
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from launcher.plan.build import build_plan, job_name
from launcher.spec import load_spec
from tests.conftest import JOBS, MINIMAL, REPO

NOW = datetime(2026, 11, 30, 9, 15, 7, tzinfo=timezone.utc)
SMP_KEYS = {"hybrid_shard_degree", "sm_activation_offloading", "activation_loading_horizon",
            "fsdp_cache_flush_warnings", "allow_empty_shards", "tensor_parallel_degree",
            "context_parallel_degree", "expert_parallel_degree", "random_seed"}


def plan_of(path, *overrides):
    return build_plan(load_spec(path, overrides), now=NOW)


SEED_TABLE = [  # the seed's reference configurations (seed README, "Reference configurations")
    ("llama7b.yaml", "llama2-7b", 1, 8, 1, True, False, 4),
    ("llama70b.yaml", "llama2-70b", 32, 256, 1, True, False, 2),
    ("llama175b.yaml", "llama-175b", 64, 128, 4, True, True, 6),
]


@pytest.mark.parametrize("file,preset,instances,hsd,tp,ac,offload,batch", SEED_TABLE)
def test_example_jobs_reproduce_the_seed_table(file, preset, instances, hsd, tp, ac, offload, batch):
    spec = load_spec(JOBS / file).spec
    assert spec.model.preset == preset and spec.model.seq_length == 4096
    assert spec.cluster.instance_type == "ml.p4d.24xlarge" and spec.cluster.instance_count == instances
    assert (spec.smp.hybrid_shard_degree, spec.smp.tensor_parallel_degree) == (hsd, tp)
    assert (spec.smp.activation_checkpointing, spec.smp.activation_offloading) == (ac, offload)
    assert spec.training.batch_size == batch and spec.training.precision == "bf16"


def test_distribution_dict_shape_and_types():
    plan = plan_of(JOBS / "llama175b.yaml")
    dist = plan.distribution
    assert set(dist) == {"torch_distributed", "smdistributed"}
    assert dist["torch_distributed"] == {"enabled": True}
    mp = dist["smdistributed"]["modelparallel"]
    assert set(mp) == {"enabled", "parameters"} and mp["enabled"] is True
    params = mp["parameters"]
    assert set(params) <= SMP_KEYS
    assert params["hybrid_shard_degree"] == 128 and type(params["hybrid_shard_degree"]) is int
    assert params["tensor_parallel_degree"] == 4 and type(params["tensor_parallel_degree"]) is int
    # offloading on, PyTorch's offload wrapper (AWS's HyperPod adapter): SMP's own is not sent
    assert params["sm_activation_offloading"] is False and params["allow_empty_shards"] is False
    assert plan.estimator.distribution == dist


def test_topology_and_global_batch():
    plan = plan_of(JOBS / "llama175b.yaml")
    assert plan.world_size == 512 and plan.data_parallel_degree == 128
    assert plan.global_batch_sequences == 128 * 6
    assert plan.global_batch_tokens == 128 * 6 * 4096


def test_seed_worked_example_global_batch(write_spec):
    p = write_spec(MINIMAL + "training:\n  batch_size: 1\n")
    flat = plan_of(p, "cluster.instance_count=256")
    assert flat.global_batch_tokens == 8 * 2**20
    tp2 = plan_of(p, "cluster.instance_count=256", "smp.tensor_parallel_degree=2")
    assert tp2.global_batch_tokens == 4 * 2**20


def test_job_name_is_timestamped_valid_and_short():
    name = job_name("a" * 43, NOW.replace(microsecond=42_000))
    assert name == "a" * 43 + "-20261130-091507-042" and len(name) == 63


def test_estimator_arguments(write_spec):
    p = write_spec("""
        name: demo
        model: {preset: llama2-7b}
        output: {path: s3://my-bucket/smp}
        cluster:
          region: us-west-2
          spot: true
          max_run: 2h
          max_wait: 1d
          subnets: [subnet-0123456789abcdef0]
          security_group_ids: [sg-0123456789abcdef0]
          kms_key_id: alias/smp
        role: SMPRole
        tags: {team: nlp}
        environment: {A: b}
        hyperparameters: {foo: 1}
        """)
    est = plan_of(p).estimator.to_dict()  # the keyword arguments the SDK gets
    assert est["entry_point"] == "train.py" and est["framework_version"] == "2.4.1" and est["py_version"] == "py311"
    assert est["instance_type"] == "ml.p4d.24xlarge" and est["instance_count"] == 1 and est["volume_size"] == 400
    assert est["max_run"] == 7200 and est["use_spot_instances"] is True and est["max_wait"] == 86400
    assert est["checkpoint_s3_uri"] == "s3://my-bucket/smp/checkpoints/demo-20261130-091507-000"
    assert est["output_path"] == "s3://my-bucket/smp" and est["code_location"] == "s3://my-bucket/smp/code"
    assert est["subnets"] == ["subnet-0123456789abcdef0"] and est["security_group_ids"] == ["sg-0123456789abcdef0"]
    assert est["output_kms_key"] == "alias/smp" and "volume_kms_key" not in est
    assert est["role"] == "SMPRole" and est["environment"] == {"A": "b"} and est["hyperparameters"] == {"foo": 1}
    assert est["debugger_hook_config"] is False and est["disable_profiler"] is True
    tags = {t["Key"]: t["Value"] for t in est["tags"]}
    assert tags["team"] == "nlp" and tags["smp-launch:managed"] == "true" and len(tags["smp-launch:spec-hash"]) == 16
    assert {m["Name"] for m in est["metric_definitions"]} >= {"train:loss", "train:tokens_per_second"}


def test_role_from_environment(write_spec, monkeypatch):
    monkeypatch.setenv("SMP_LAUNCH_ROLE", "arn:aws:iam::123456789012:role/FromEnv")
    assert plan_of(write_spec(MINIMAL)).role == "arn:aws:iam::123456789012:role/FromEnv"


def test_region_from_environment_when_the_spec_has_none(write_spec, monkeypatch):
    p = write_spec(MINIMAL.replace("cluster:\n  region: us-west-2\n", ""))
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    plan = plan_of(p)
    assert plan.region == "eu-west-1" and ".eu-west-1." in plan.framework.image_uri


@pytest.mark.parametrize("pt,instance", [("2.0.1", "ml.p4d.24xlarge"), ("2.0.1", "ml.p5.48xlarge"),
                                         ("2.2.0", "ml.p4de.24xlarge"), ("2.3.1", "ml.p4d.24xlarge"),
                                         ("2.4.1", "ml.p5.48xlarge"), ("2.5.1", "ml.p4d.24xlarge")])
def test_image_uri_matches_the_sdk(write_spec, pt, instance):
    from sagemaker import image_uris

    plan = plan_of(write_spec(MINIMAL), f"framework.pytorch_version={pt!r}", f"cluster.instance_type={instance}")
    sdk = image_uris.get_training_image_uri(
        "us-west-2", "pytorch", framework_version=pt, py_version=plan.framework.py_version,
        instance_type=instance, distribution=plan.distribution)
    assert plan.framework.image_uri == sdk


def test_spec_values_are_independent_of_the_plan_dict():
    plan = plan_of(JOBS / "llama7b.yaml")
    d = plan.to_dict()
    d["distribution"]["smdistributed"]["modelparallel"]["parameters"]["hybrid_shard_degree"] = 99
    assert plan.distribution["smdistributed"]["modelparallel"]["parameters"]["hybrid_shard_degree"] == 8


def test_plan_json_contract(run_cli):
    r = run_cli("plan", str(JOBS / "llama7b.yaml"), "--output", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    for key in ("job_name", "world_size", "global_batch_tokens", "model", "distribution", "estimator",
                "advisories", "memory"):
        assert key in data
    assert data["model"]["parameters"] == 6738415616 and data["world_size"] == 8
    assert data["global_batch_tokens"] == 8 * 4 * 4096


def test_plan_table_for_people(run_cli):
    r = run_cli("plan", str(JOBS / "llama70b.yaml"))
    assert r.code == 0 and "256 GPUs" in r.out and "llama2-70b" in r.out


def test_validate_many_specs_at_once(run_cli, write_spec):
    good = [str(JOBS / f) for f in ("llama7b.yaml", "llama70b.yaml", "llama175b.yaml")]
    r = run_cli("validate", *good)
    assert r.code == 0 and r.out.count(": ok") == 3
    bad = write_spec(MINIMAL + "smp: {backend: mpi}\n")
    r = run_cli("validate", *good, str(bad), "--output", "json")
    assert r.code == 2
    results = json.loads(r.out)
    assert [x["valid"] for x in results] == [True, True, True, False]


def test_plan_and_validate_never_import_sagemaker():
    code = ("import sys; from launcher.cli import main\n"
            "try:\n    main(['plan', sys.argv[1], '--output', 'json'])\nexcept SystemExit:\n    pass\n"
            "try:\n    main(['validate', sys.argv[1]])\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('sagemaker', 'torch', 'pandas')]\n"
            "sys.stderr.write('IMPORTED ' + ','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code, str(JOBS / "llama7b.yaml")], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.stderr.strip().endswith("IMPORTED"), out.stderr[-500:]


def test_building_a_plan_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan_of(JOBS / "llama7b.yaml")
    assert list(tmp_path.iterdir()) == []


def test_plan_json_shows_the_request_submit_will_send(run_cli, monkeypatch):
    monkeypatch.setenv("SMP_LAUNCH_ROLE", "arn:aws:iam::123456789012:role/R")
    data = json.loads(run_cli("plan", str(JOBS / "llama7b.yaml"), "--output", "json").out)
    req = data["request"]
    assert req["RoleArn"] == "arn:aws:iam::123456789012:role/R" and req["TrainingJobName"] == data["job_name"]
    assert json.loads(req["HyperParameters"]["sagemaker_submit_directory"]) == data["source_uri"]
    assert data["source_uri"].endswith("/sourcedir.tar.gz")
    assert req["ResourceConfig"]["InstanceCount"] == 1


# ---- the plan agrees with what SMP v2 and SageMaker really do ----

def test_hybrid_shard_degree_0_with_tp_1_shards_within_a_node_as_native_fsdp_does():
    """Defect 2: 0 was read as world // (tp x ep): 28.6 GB and "fits" for 70B on 32 nodes."""
    plan = plan_of(JOBS / "llama70b.yaml", "smp.hybrid_shard_degree=0")
    d = plan.decisions
    assert d.hybrid_shard_degree == 8 and d.sharding_strategy == "HYBRID_SHARD"
    assert "native PyTorch FSDP" in d.shard_reason
    assert plan.memory.fits is False and plan.memory.per_gpu_gb > 150
    rules = {a.rule: a for a in plan.advisories}
    assert "SMP060" in rules and "raise hybrid_shard_degree" in rules["SMP060"].message
    assert "8 GPUs" in rules["SMP011"].message and "256" in rules["SMP011"].message
    assert plan.distribution["smdistributed"]["modelparallel"]["parameters"]["hybrid_shard_degree"] == 0


def test_hybrid_shard_degree_0_with_tp_takes_the_largest_degree():
    d = plan_of(JOBS / "llama175b.yaml", "smp.hybrid_shard_degree=0").decisions
    assert d.hybrid_shard_degree == 512 // 4 and d.sharding_strategy == "HYBRID_SHARD"


def test_hybrid_shard_degree_0_with_expert_parallelism_must_be_set(write_spec):
    plan = plan_of(write_spec(MINIMAL), "model.preset=mixtral-8x7b", "cluster.instance_count=8",
                   "smp.expert_parallel_degree=2")
    assert "SMP012" in {a.rule for a in plan.advisories if a.severity == "error"}


def test_the_smp_implementation_is_the_default_for_every_supported_model(write_spec):
    """Defect 4: tsm.transform ran only for TP/CP/EP/fp8."""
    path = write_spec(MINIMAL)
    for preset in ("llama2-7b", "mistral-7b", "mixtral-8x7b"):
        assert plan_of(path, f"model.preset={preset}").decisions.transform is True, preset
    off = plan_of(path, "model.use_smp_implementation=false")
    assert off.decisions.transform is False
    assert off.memory.sources["activations"].startswith("measured on CPU")
    bad = plan_of(path, "model.use_smp_implementation=false", "smp.tensor_parallel_degree=2",
                  "smp.hybrid_shard_degree=4")
    assert "SMP013" in {a.rule for a in bad.advisories if a.severity == "error"}


def test_delayed_init_turns_on_when_eight_fp32_copies_overflow_host_memory(write_spec):
    """Defect 5: Mixtral 8x7B on 8 x p4d with AWS's EP2/HSD32 layout planned delayed_param_init false."""
    plan = plan_of(write_spec(MINIMAL), "model.preset=mixtral-8x7b", "cluster.instance_count=8",
                   "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=32")
    assert plan.decisions.delayed_param_init is True
    assert "1,152 GiB" in plan.decisions.delayed_reason
    assert plan_of(JOBS / "llama7b.yaml").decisions.delayed_param_init is False
    assert plan_of(JOBS / "llama70b.yaml").decisions.delayed_param_init is True  # the 60B rule stays
    off = plan_of(write_spec(MINIMAL), "model.preset=mixtral-8x7b", "cluster.instance_count=8",
                  "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=32", "smp.delayed_param_init=false")
    assert "SMP025" in {a.rule for a in off.advisories}


@pytest.mark.parametrize("instance", ["ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge"])
def test_kms_key_never_becomes_a_volume_key_on_instance_storage(write_spec, instance):
    """Defect 6: CreateTrainingJob refuses VolumeKmsKeyId on instances with NVMe instance storage."""
    from launcher.plan.request import predict_request

    plan = plan_of(write_spec(MINIMAL), "cluster.kms_key_id=alias/smp", f"cluster.instance_type={instance}")
    request = predict_request(plan, "s3://b/code.tar.gz", "arn:aws:iam::123456789012:role/r")
    assert "VolumeKmsKeyId" not in request["ResourceConfig"]
    assert request["OutputDataConfig"]["KmsKeyId"] == "alias/smp"
    assert plan.storage.volume_size_gb_used is False and "instance storage" in plan.storage.note
    assert "SMP056" in {a.rule for a in plan.advisories}


def test_an_instance_without_nvme_storage_uses_the_ebs_volume_the_spec_sizes():
    """Every instance in the catalog has NVMe instance storage today; one without it gets VolumeSizeInGB."""
    from launcher.plan.build import Storage, storage

    assert storage(500, "ml.example", 0) == Storage("EBS volume", 500, True, "")
    nvme = storage(500, "ml.p5.48xlarge", 30720)
    assert (nvme.kind, nvme.size_gb, nvme.volume_size_gb_used) == ("instance storage", 30720, False)


def test_a_volume_larger_than_the_instance_storage_is_refused(write_spec):
    plan = plan_of(write_spec(MINIMAL), "cluster.volume_size_gb=9000")
    assert "SMP055" in {a.rule for a in plan.advisories if a.severity == "error"}


def test_requirements_are_pinned_below_transformers_5_for_every_image():
    """Defect 7: transformers>=4.40.1 let pip resolve a 5.x that cannot import on the image's PyTorch."""
    from packaging.specifiers import SpecifierSet

    from launcher.catalog.smp import FRAMEWORKS, requirements

    for version in FRAMEWORKS:
        pins = requirements(version)
        spec = SpecifierSet(pins["transformers"])
        assert "5.0.0" not in spec and "4.40.1" in spec or version < "2.2", (version, pins)
        assert any(c.operator == "<" for c in spec), (version, pins)
    plan = plan_of(JOBS / "llama7b.yaml")
    assert plan.framework.requirements == requirements(plan.framework.pytorch_version)


def test_rendered_requirements_follow_the_catalog():
    from launcher.catalog.smp import requirements

    loaded = load_spec(JOBS / "llama7b.yaml")
    text = build_plan(loaded, now=NOW).source.files["requirements.txt"]
    pins = requirements(loaded.spec.framework.pytorch_version)
    assert text.splitlines() == [f"{name}{spec}" for name, spec in pins.items()]


def test_gpt_neox_gets_the_first_transformers_that_builds_it_with_sdpa():
    """transformers 4.40-4.41 refuse to build GPT-NeoX with the sdpa attention the script asks for; the image
    ranges start at 4.40.1, so pip could keep a 4.40 already on the image and the job failed at model build."""
    from packaging.specifiers import SpecifierSet

    from launcher.catalog.smp import FRAMEWORKS, requirements

    for version in (v for v in FRAMEWORKS if v >= "2.2"):
        neox = SpecifierSet(requirements(version, "gpt_neox")["transformers"])
        assert "4.41.2" not in neox and "4.42.0" in neox and "4.46.3" in neox, (version, neox)
        assert "4.40.1" in SpecifierSet(requirements(version, "llama")["transformers"])
    text = plan_of(JOBS / "llama7b.yaml", "model.preset=gpt-neox-20b").source.files["requirements.txt"]
    assert text.splitlines()[0] == "transformers>=4.42.0,<4.47"


def test_sm_activation_offloading_is_sent_as_the_spec_says(write_spec):
    """Defect 8: sent true while offloading was off."""
    def sent(*o):
        return plan_of(write_spec(MINIMAL), *o).distribution["smdistributed"]["modelparallel"]["parameters"][
            "sm_activation_offloading"]

    assert sent() is False
    assert sent("smp.activation_offloading=true") is False  # PyTorch's offload wrapper by default
    assert sent("smp.activation_offloading=true", "smp.sm_activation_offloading=true") is True
    assert sent("smp.sm_activation_offloading=true") is False  # no offloading, nothing to send
    assert plan_of(JOBS / "llama175b.yaml").distribution["smdistributed"]["modelparallel"]["parameters"][
        "sm_activation_offloading"] is False


def test_plan_command_tells_the_truth_about_hybrid_shard_degree_0(run_cli):
    """`plan jobs/llama70b.yaml --set smp.hybrid_shard_degree=0`, table and JSON: 8 GPUs, does not fit."""
    args = ("plan", str(JOBS / "llama70b.yaml"), "--set", "smp.hybrid_shard_degree=0")
    table = run_cli(*args)
    assert table.code == 2 and "HYBRID_SHARD over 8 GPUs" in table.out and "DOES NOT FIT" in table.out
    assert "measured on CPU" in table.out and "estimate:" in table.out  # each memory term says which it is
    flat = "".join(ch for ch in table.out if not ch.isspace() and ch != "│")  # the table wraps long cells
    assert "transformers>=4.40.1,<4.47" in flat and "provisionsnoEBSvolume" in flat
    data = json.loads(run_cli(*args, "--output", "json").out)
    assert data["decisions"]["hybrid_shard_degree"] == 8 and data["memory"]["fits"] is False
    assert data["memory"]["per_gpu_gb"] > 150
    assert set(data["memory"]["sources"]) == set(data["memory"]["breakdown"])


def test_one_topology_feeds_the_plan_the_rules_and_the_decisions():
    """World size, data parallelism and tokens come from one Topology, which the rules see as given."""
    from launcher.rules import run_rules
    from launcher.rules.topology import Topology

    plan = plan_of(JOBS / "llama175b.yaml")
    t = plan.topology
    assert t == Topology(64, 8, tensor_parallel=4, batch_size=6, seq_length=4096)
    assert (t.world_size, t.data_parallel_degree, t.max_shard_degree) == (512, 128, 128)
    wider = dataclasses.replace(t, tensor_parallel=8, batch_size=1)
    assert (wider.data_parallel_degree, wider.global_batch_tokens, wider.max_shard_degree) == (64, 64 * 4096, 64)
    assert plan.decisions.world_size == plan.world_size == t.world_size
    assert plan.to_dict()["global_batch_tokens"] == t.global_batch_tokens == 128 * 6 * 4096
    half = Topology(32, 8, tensor_parallel=4, batch_size=6, seq_length=4096)
    plain = Topology(2, 8, seq_length=2048)  # the cluster alone: data parallelism, a sequence per rank
    assert (plain.data_parallel_degree, plain.max_shard_degree, plain.global_batch_tokens) == (16, 16, 16 * 2048)
    node = dataclasses.replace(plain, instance_count=1, tensor_parallel=8, batch_size=3)  # one node, one TP group
    assert (node.data_parallel_degree, node.global_batch_sequences) == (1, 3)
    _, ctx = run_rules(plan.spec, "us-west-2", half)
    assert ctx.topology is half and ctx.world == 256 and ctx.decisions.world_size == 256


# -- frozen all the way down -------------------------------------------------------------------------

def test_a_plan_and_its_parts_are_frozen():
    """Kills plan: the source bundle, the Estimator arguments, the topology or the plan made mutable."""
    import dataclasses

    import pydantic

    plan = build_plan(load_spec(JOBS / "llama7b.yaml"))
    for value, field in ((plan, "job_name"), (plan.source, "uri"), (plan.estimator, "role"),
                         (plan.topology, "instance_count"), (plan.storage, "size_gb"), (plan.advisories[0], "message"),
                         (plan.framework, "image_uri"), (plan.model, "seq_length")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, "x")
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        plan.spec.name = "changed"  # the validated spec a plan was built from
