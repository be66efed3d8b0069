"""Every advisor rule has a case that fires it and one that does not."""
import pytest

from launcher.plan.build import build_plan
from launcher.rules import RULES
from launcher.rules.docs import DOC_FILE, markdown
from launcher.spec import load_spec
from tests.conftest import MINIMAL, REPO

BASE = MINIMAL

P5 = "cluster.instance_type=ml.p5.48xlarge"
MIXTRAL = "model.preset=mixtral-8x7b"
MISTRAL = "model.preset=mistral-7b"
CP2 = ("smp.context_parallel_degree=2", "smp.hybrid_shard_degree=8")
OFFLOAD = ("smp.activation_offloading=true",)
CASES = {  # rule: (overrides that fire it, overrides that do not)
    "SMP001": (["smp.tensor_parallel_degree=3"], ["smp.tensor_parallel_degree=2"]),
    "SMP002": (["smp.hybrid_shard_degree=8", "smp.tensor_parallel_degree=2"],
               ["smp.hybrid_shard_degree=4", "smp.tensor_parallel_degree=2"]),
    "SMP003": (["cluster.instance_count=2", "smp.hybrid_shard_degree=2", "smp.context_parallel_degree=4"],
               ["cluster.instance_count=2", "smp.hybrid_shard_degree=4", "smp.context_parallel_degree=4"]),
    "SMP004": ([MIXTRAL, "smp.expert_parallel_degree=2", "smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=2"],
               [MIXTRAL, "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4"]),
    "SMP005": (["cluster.instance_count=2", "smp.tensor_parallel_degree=16", "smp.hybrid_shard_degree=1"],
               ["cluster.instance_count=2", "smp.tensor_parallel_degree=8", "smp.hybrid_shard_degree=2"]),
    "SMP006": (["smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4"],
               [MIXTRAL, "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4"]),
    "SMP007": ([MIXTRAL, "smp.context_parallel_degree=2", "smp.hybrid_shard_degree=8"],
               ["smp.context_parallel_degree=2", "smp.hybrid_shard_degree=8"]),
    "SMP008": (["smp.context_parallel_degree=2", "smp.hybrid_shard_degree=8", "model.seq_length=4098"],
               ["smp.context_parallel_degree=2", "smp.hybrid_shard_degree=8", "model.seq_length=4096"]),
    "SMP009": (["model.preset=llama2-70b", "cluster.instance_count=2", "smp.tensor_parallel_degree=16",
                "smp.hybrid_shard_degree=1"],
               ["model.preset=llama2-70b", "cluster.instance_count=2", "smp.tensor_parallel_degree=8",
                "smp.hybrid_shard_degree=2"]),
    "SMP010": ([MIXTRAL, "model.num_experts=6", "smp.expert_parallel_degree=4", "smp.hybrid_shard_degree=2"],
               [MIXTRAL, "smp.expert_parallel_degree=4", "smp.hybrid_shard_degree=2"]),
    "SMP011": ([], ["smp.hybrid_shard_degree=8"]),
    "SMP012": ([MIXTRAL, "cluster.instance_count=2", "smp.expert_parallel_degree=2"],
               [MIXTRAL, "cluster.instance_count=2", "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=8"]),
    "SMP013": (["model.use_smp_implementation=false", "smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4"],
               ["model.use_smp_implementation=false"]),
    "SMP020": (["training.precision=fp16"], ["training.precision=bf16"]),
    "SMP021": (["training.precision=fp8"], ["training.precision=fp8", P5]),
    "SMP022": (["training.precision=fp8", P5, "model.preset=mistral-7b"], ["training.precision=fp8", P5]),
    "SMP023": (["smp.backend=smddp", P5], ["smp.backend=smddp"]),
    "SMP024": ([], ["smp.backend=nccl"]),
    "SMP025": (["model.preset=llama2-70b", "smp.delayed_param_init=false", "cluster.instance_count=32"],
               ["smp.delayed_param_init=false"]),
    "SMP026": (["model.preset=llama2-70b", "cluster.instance_count=32"], []),
    "SMP027": (["smp.activation_checkpointing=false"], []),
    "SMP028": (["smp.activation_checkpointing=false", "smp.activation_offloading=true"],
               ["smp.activation_offloading=true"]),
    "SMP029": (["smp.activation_loading_horizon=4"],
               ["smp.activation_loading_horizon=4", "smp.activation_offloading=true",
                "smp.sm_activation_offloading=true"]),
    "SMP030": (["smp.backend=smddp", "model.pretrained=meta-llama/Llama-2-7b-hf"],
               ["smp.backend=auto", "model.pretrained=meta-llama/Llama-2-7b-hf"]),
    "SMP040": (["cluster.instance_count=256", "training.batch_size=1"],
               ["cluster.instance_count=256", "training.batch_size=1", "smp.tensor_parallel_degree=2"]),
    "SMP041": (["model.seq_length=8192", "training.batch_size=1"],
               ["model.seq_length=8192", "training.batch_size=1", "smp.tensor_parallel_degree=2"]),
    "SMP050": (["cluster.region=af-south-1"], ["cluster.region=eu-west-1"]),
    "SMP051": (["cluster.region=null"], []),
    "SMP052": (["framework.image_uri=763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.4.0-gpu-py311"],
               ["framework.image_uri=658645717510.dkr.ecr.us-west-2.amazonaws.com/"
                "smdistributed-modelparallel:2.4.1-gpu-py311-cu121"]),
    "SMP053": (["smp.context_parallel_degree=2", "smp.hybrid_shard_degree=8", "framework.pytorch_version='2.2.0'"],
               ["smp.context_parallel_degree=2", "smp.hybrid_shard_degree=8"]),
    "SMP057": (["smp.allow_empty_shards=true", "framework.pytorch_version='2.2.0'"],
               ["smp.allow_empty_shards=true", "framework.pytorch_version='2.3.1'"]),
    "SMP054": (["framework.pytorch_version='2.1.2'"], ["framework.pytorch_version='2.2.0'"]),
    "SMP058": (["model.preset=llama3.1-8b", "framework.pytorch_version='2.3.1'"], ["model.preset=llama3.1-8b"]),
    "SMP059": ([*CP2, "smp.cp_comm_type=all_gather", "framework.pytorch_version='2.3.1'"],
               [*CP2, "smp.cp_comm_type=all_gather"]),
    "SMP055": (["cluster.volume_size_gb=9000"], ["cluster.volume_size_gb=8000"]),
    "SMP056": (["cluster.kms_key_id=alias/smp"], []),
    "SMP060": (["model.preset=llama2-70b"], ["training.batch_size=4", "smp.hybrid_shard_degree=8"]),
    "SMP061": (["cluster.instance_count=4", "smp.hybrid_shard_degree=32", "training.batch_size=1"],
               ["smp.hybrid_shard_degree=8", "training.batch_size=4"]),
    "SMP062": (["smp.hybrid_shard_degree=8", "training.batch_size=7"],
               ["smp.hybrid_shard_degree=8", "training.batch_size=4"]),
    "SMP063": (["model.preset=llama-175b", "model.num_layers=200", "output.save_final_model=full"],
               ["model.preset=llama-175b", "model.num_layers=200", "output.save_final_model=sharded"]),
    "SMP064": (["model.preset=llama-175b", "model.pretrained=org/llama-175b"],
               ["model.preset=llama2-70b", "model.pretrained=org/llama-70b"]),
    "SMP100": ([MISTRAL, *CP2, "framework.pytorch_version='2.3.1'"], [MISTRAL, *CP2]),
    "SMP101": ([MISTRAL, *CP2, "model.pretrained=mistralai/Mistral-7B-v0.1"],
               [MISTRAL, *CP2, "model.pretrained=mistralai/Mistral-7B-v0.1", "smp.context_parallel_degree=1"]),
    "SMP102": ([P5, "training.precision=fp8", *OFFLOAD, "smp.sm_activation_offloading=true"],
               [P5, "training.precision=fp8", *OFFLOAD]),
    "SMP103": ([*OFFLOAD, "smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4"],
               [*OFFLOAD, "smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4",
                "framework.pytorch_version='2.5.1'"]),
    "SMP104": (["training.async_checkpoint=true", "framework.pytorch_version='2.2.0'"],
               ["training.async_checkpoint=true"]),
    "SMP105": (["framework.pytorch_version='2.2.0'"],
               ["framework.pytorch_version='2.2.0'", "training.async_checkpoint=false"]),
    "SMP106": (["smp.cp_comm_type=p2p"], ["smp.cp_comm_type=p2p", *CP2]),
    # The shipped price snapshot holds ml.p4d.24xlarge on demand in us-east-1, and no p5 in sa-east-1.
    "SMP070": (["cluster.region=us-east-1", "cluster.max_cost=1"],
               ["cluster.region=us-east-1", "cluster.max_cost=1000000"]),
    "SMP071": (["cluster.region=sa-east-1", "cluster.instance_type=ml.p5.48xlarge", "cluster.max_cost=1"],
               ["cluster.region=sa-east-1", "cluster.instance_type=ml.p5.48xlarge"]),
    # MINIMAL is predicted 1h 34m (band 1h 23m to 1h 47m) for its 1,000 steps
    "SMP080": (["cluster.max_run=1h", "training.max_steps=5000"], ["cluster.max_run=1d", "training.max_steps=5000"]),
    "SMP081": (["cluster.max_run=1h35m"], ["cluster.max_run=2h"]),
    "SMP082": ([], ["cluster.max_run=2h"]),
}


@pytest.fixture
def fired(write_spec, monkeypatch):
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    path = write_spec(BASE)

    def run(overrides):
        plan = build_plan(load_spec(path, overrides))
        return {a.rule: a for a in plan.advisories}

    return run


# Rules that fire on what this environment has, not on the spec: each has its own test below.
ENVIRONMENT_RULES = {"SMP090"}


def test_every_rule_has_cases():
    assert {r.id for r in RULES} - ENVIRONMENT_RULES == set(CASES)


@pytest.mark.parametrize("sdk,backend,fires", [
    ("3.27.0", "estimator", True), ("3.27.0", "model-trainer", False), ("3.27.0", "auto", False),
    ("2.257.7", "estimator", False), ("2.257.7", "model-trainer", False), ("2.250.0", "auto", True),
    (None, "auto", True)])
def test_smp090_a_backend_the_installed_sdk_lacks(fired, monkeypatch, sdk, backend, fires):
    from launcher.core import sdk as sdk_module

    monkeypatch.setattr(sdk_module, "installed_sdk", lambda: sdk_module.InstalledSdk(sdk))
    found = fired([f"cluster.backend={backend}"])
    assert ("SMP090" in found) is fires
    if fires:
        assert found["SMP090"].severity == "error" and found["SMP090"].field == "cluster.backend"


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires(fired, rule_id):
    found = fired(CASES[rule_id][0])
    assert rule_id in found, sorted(found)
    rule = next(r for r in RULES if r.id == rule_id)
    assert found[rule_id].severity == rule.severity and found[rule_id].message
    assert found[rule_id].source == rule.source


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_stays_quiet(fired, rule_id):
    assert rule_id not in fired(CASES[rule_id][1])


def test_seed_worked_example(fired):
    flat = fired(["cluster.instance_count=256", "training.batch_size=1"])["SMP040"]
    assert "8,388,608 tokens (8 Mi)" in flat.message and "raise tensor_parallel_degree to 2" in flat.message
    assert "4,194,304 tokens (4 Mi)" in flat.message
    tp2 = ["cluster.instance_count=256", "training.batch_size=1", "smp.tensor_parallel_degree=2"]
    assert "SMP040" not in fired(tp2)


def test_global_batch_fix_prefers_a_smaller_batch_when_one_exists(fired):
    msg = fired(["cluster.instance_count=64", "training.batch_size=4"])["SMP040"].message
    assert "lower training.batch_size to 2 (4,194,304 tokens (4 Mi))" in msg


def test_memory_error_follows_the_seeds_order_of_remedies(fired):
    msg = fired(["smp.hybrid_shard_degree=8", "training.batch_size=9"])["SMP060"].message
    batch, offload = msg.index("lower training.batch_size"), msg.index("activation_offloading")
    assert batch < offload
    assert "model_states" in msg and "exceeds the 40 GB" in msg


def test_backend_decisions(write_spec):
    def backend(*o):
        return build_plan(load_spec(write_spec(BASE), o)).decisions.backend

    assert backend() == "smddp"
    assert backend("cluster.instance_type=ml.p4de.24xlarge") == "smddp"
    assert backend(P5) == "nccl"
    assert backend("smp.hybrid_shard_degree=1", "smp.tensor_parallel_degree=8") == "nccl"
    assert backend("smp.hybrid_shard_degree=4", "smp.tensor_parallel_degree=2") == "smddp"


def test_validate_exits_2_when_an_error_rule_fires_and_names_the_field(run_cli, write_spec):
    p = write_spec(BASE + "smp:\n  tensor_parallel_degree: 3\n")
    r = run_cli("validate", str(p))
    assert r.code == 2
    assert r.err.startswith(str(p)) or r.err.startswith("/") or "job.yaml:9:27:" in r.err
    assert "job.yaml:9:27: smp.tensor_parallel_degree: SMP001" in r.err


def test_plan_shows_the_whole_plan_and_exits_2_on_error(run_cli, write_spec):
    p = write_spec(BASE.replace("llama2-7b", "llama2-70b"))
    r = run_cli("plan", str(p))
    assert r.code == 2 and "SMP060" in r.err and "DOES NOT FIT" in r.out


def test_committed_rules_doc_is_current():
    assert (REPO / DOC_FILE).read_text() == markdown(), "run `make docs` and commit docs/rules.md"


def test_every_rule_cites_public_urls_or_files_in_the_repository():
    for r in RULES:
        for part in r.source.split("; "):
            ref = part.split(" (")[0]
            assert ref.startswith("https://") or (REPO / ref).is_file(), (r.id, part)
        assert any(p.startswith("https://") for p in r.source.split("; ")), r.id
    assert "smp_v2.md" not in markdown() and "seed:" not in markdown()


def test_delayed_init_fires_for_host_memory_too(fired):
    found = fired([MIXTRAL, "cluster.instance_count=8", "smp.expert_parallel_degree=2",
                   "smp.hybrid_shard_degree=32"])
    assert "host memory" in found["SMP026"].message
    off = fired([MIXTRAL, "cluster.instance_count=8", "smp.expert_parallel_degree=2",
                 "smp.hybrid_shard_degree=32", "smp.delayed_param_init=false"])
    assert "1,152 GiB" in off["SMP025"].message


# -- rule boundaries, decisions and their reasons: each test fails on a realistic bug (`make mutation`) ----

@pytest.fixture
def no_aws_config(monkeypatch):
    """No ~/.aws/config: the plans built here read no region or profile of the machine's."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")


P4D = "ml.p4d.24xlarge"


def _advisories(write_spec, *overrides):
    plan = build_plan(load_spec(write_spec(MINIMAL), list(overrides)))
    return {a.rule: a for a in plan.advisories}


def test_smddp_on_a_tensor_parallel_only_p4d_job_is_refused(write_spec, monkeypatch):
    """Kills: SMP023 checking only the instance type (its other firing case is p5, not this one)."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    found = _advisories(write_spec, "smp.backend=smddp", "smp.hybrid_shard_degree=1", "smp.tensor_parallel_degree=8")
    assert found["SMP023"].severity == "error" and "tensor-parallel-only" in found["SMP023"].message
    sharded = _advisories(write_spec, "smp.backend=smddp", "smp.hybrid_shard_degree=4", "smp.tensor_parallel_degree=2")
    assert "SMP023" not in sharded


@pytest.mark.parametrize("overrides, version, fires", [
    (["smp.context_parallel_degree=2", "smp.hybrid_shard_degree=8"], "2.2.0", True),
    (["smp.context_parallel_degree=2", "smp.hybrid_shard_degree=8"], "2.3.1", False),
    (["model.preset=mixtral-8x7b", "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4"], "2.2.0", False),
    (["training.precision=fp8", "cluster.instance_type=ml.p5.48xlarge"], "2.2.0", False),
    (["model.preset=mistral-7b", "smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4"], "2.3.1", True),
    (["model.preset=mistral-7b", "smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4"], "2.4.1", False),
])


def test_feature_versions_fire_below_the_first_release_and_not_at_it(write_spec, monkeypatch, overrides, version,
                                                                      fires):
    """Kills checks: a minimum PyTorch version in SMP053 moved (each boundary is tested at the version itself)."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    found = _advisories(write_spec, *overrides, f"framework.pytorch_version='{version}'")
    assert ("SMP053" in found) == fires, found.get("SMP053")


@pytest.mark.parametrize("overrides, transform", [
    ([], False),
    (["smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4"], True),
    (["smp.context_parallel_degree=2", "smp.hybrid_shard_degree=4"], True),
    (["model.preset=mixtral-8x7b", "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4"], True),
    (["training.precision=fp8", "cluster.instance_type=ml.p5.48xlarge"], True),
])


def test_the_smallest_degree_of_each_parallelism_needs_the_transform(write_spec, overrides, transform):
    """Kills decisions: a degree threshold off by one (degree 2 is the smallest that needs tsm.transform).

    With the SMP implementation switched off, only what needs it turns the transform on."""
    off = ["model.use_smp_implementation=false", *overrides]
    assert build_plan(load_spec(write_spec(MINIMAL), off)).decisions.transform is transform


@pytest.mark.parametrize("overrides", [
    ["smp.hybrid_shard_degree=8", "smp.tensor_parallel_degree=2"],
    ["model.preset=mixtral-8x7b", "smp.hybrid_shard_degree=2", "smp.tensor_parallel_degree=2",
     "smp.expert_parallel_degree=4"],
])


def test_no_memory_estimate_when_the_degrees_multiply_past_the_world(write_spec, monkeypatch, overrides):
    """Kills engine: the shard x TP x EP product computed with a wrong operator (each degree alone divides 8)."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    plan = build_plan(load_spec(write_spec(MINIMAL), overrides))
    assert "SMP002" in {a.rule for a in plan.advisories}
    assert plan.memory is None


def test_an_existing_tensor_parallel_degree_is_never_the_suggested_fix(write_spec, monkeypatch):
    """SMP040 suggests a larger tensor-parallel degree, never the current one. (The `<=` -> `<` mutant of its
    loop is equivalent: the current degree's global batch is over the limit, so it is never suggested.)"""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    found = _advisories(write_spec, "cluster.instance_count=256", "training.batch_size=2",
                        "smp.tensor_parallel_degree=2")
    message = found["SMP040"].message
    assert "tensor_parallel_degree to 2" not in message and "tensor_parallel_degree to 4" in message


def test_auto_sharding_is_one_when_tensor_parallelism_fills_the_world(write_spec):
    """Kills decisions: the smallest automatic sharding degree moved from 1."""
    plan = build_plan(load_spec(write_spec(MINIMAL), ["smp.hybrid_shard_degree=0", "smp.tensor_parallel_degree=8"]))
    assert plan.decisions.hybrid_shard_degree == 1 and plan.decisions.sharding_strategy == "NO_SHARD"


def test_an_invalid_degree_lists_the_divisors_of_the_world(write_spec, monkeypatch):
    """Kills checks: the divisor list built from the non-divisors."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    message = _advisories(write_spec, "smp.tensor_parallel_degree=3")["SMP001"].message
    assert "valid values: 1, 2, 4, 8" in message


def test_decisions_layouts_and_estimates_are_frozen():
    """Kills decisions, memory and engine: a plan's parts made mutable (`frozen=True` dropped)."""
    import dataclasses

    from launcher.rules.decisions import decide
    from launcher.rules.engine import Finding
    from launcher.rules.memory import ParallelLayout, estimate
    from launcher.spec.presets import PRESETS
    from tests.conftest import JOBS

    spec = load_spec(JOBS / "llama7b.yaml").spec
    for value, field in ((decide(spec), "backend"), (ParallelLayout(P4D, 8), "batch_size"),
                         (estimate(PRESETS["llama2-7b"].architecture, ParallelLayout(P4D, 8)), "per_gpu_gb"),
                         (Finding("m", "f"), "message")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, 1)


def test_auto_sharding_divides_by_tensor_times_expert_parallelism(write_spec):
    """Kills decisions: the degrees the automatic sharding degree leaves room for divided, not multiplied."""
    plan = build_plan(load_spec(write_spec(MINIMAL), ["model.preset=mixtral-8x7b", "smp.hybrid_shard_degree=0",
                                                      "smp.tensor_parallel_degree=2", "smp.expert_parallel_degree=2"]))
    assert plan.decisions.hybrid_shard_degree == 2


@pytest.mark.parametrize("overrides", [["smp.context_parallel_degree=16", "smp.hybrid_shard_degree=1"],
                                       ["smp.context_parallel_degree=3"]])


def test_context_parallelism_past_the_world_gives_no_memory_estimate(write_spec, monkeypatch, overrides):
    """Kills engine: a degree that exceeds or does not divide the world tolerated when the others' product fits."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    assert build_plan(load_spec(write_spec(MINIMAL), overrides)).memory is None


@pytest.mark.parametrize("shard, suffix", [(["smp.hybrid_shard_degree=2048"], " with hybrid_shard_degree 1024"),
                                          (["smp.hybrid_shard_degree=8"], "")])


def test_the_tp_fix_names_a_new_sharding_degree_only_when_the_current_one_no_longer_fits(write_spec, monkeypatch,
                                                                                         shard, suffix):
    """Kills checks: `world % product` (does it divide?) read as `world // product` (is it non-zero?)."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    found = _advisories(write_spec, "cluster.instance_count=256", "training.batch_size=1", *shard)
    message = found["SMP040"].message
    assert f"raise tensor_parallel_degree to 2{suffix} (4,194,304 tokens" in message


def test_pure_data_parallelism_on_p4d_keeps_smddp(write_spec):
    """Kills decisions: "tensor-parallel-only" also matching a job with no tensor parallelism at all."""
    plan = build_plan(load_spec(write_spec(MINIMAL), ["smp.hybrid_shard_degree=1", "smp.tensor_parallel_degree=1"]))
    assert plan.decisions.backend == "smddp"


@pytest.mark.parametrize("version, fires", [("2.2.0", True), ("2.3.1", False)])
def test_fp8_for_mixtral_needs_pytorch_2_3_1(write_spec, monkeypatch, version, fires):
    """Kills checks: the PyTorch version fp8 needs for Mixtral moved."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    found = _advisories(write_spec, "model.preset=mixtral-8x7b", "training.precision=fp8",
                        "cluster.instance_type=ml.p5.48xlarge", "smp.hybrid_shard_degree=8",
                        f"framework.pytorch_version='{version}'")
    assert ("SMP022" in found) == fires, found.get("SMP022")


def test_degree_one_is_no_parallelism_for_the_model_rules(write_spec, monkeypatch):
    """Kills checks: EP or CP of degree 1 taken as "uses expert/context parallelism"."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    assert "SMP006" not in _advisories(write_spec)
    assert "SMP007" not in _advisories(write_spec, "model.preset=mixtral-8x7b", "smp.hybrid_shard_degree=8")


def test_tensor_parallelism_of_two_without_sharding_uses_nccl(write_spec):
    """Kills decisions: "tensor-parallel-only" needing a degree above 2."""
    plan = build_plan(load_spec(write_spec(MINIMAL), ["smp.hybrid_shard_degree=1", "smp.tensor_parallel_degree=2"]))
    assert plan.decisions.backend == "nccl"


def test_rules_are_frozen():
    """Kills engine: the rule registry's entries made mutable."""
    import dataclasses

    from launcher.rules import RULES

    with pytest.raises(dataclasses.FrozenInstanceError):
        RULES[0].severity = "info"


def test_a_global_batch_fix_of_exactly_one_sequence_is_offered(write_spec, monkeypatch):
    """Kills checks: a batch size of 1 not offered when it is exactly what brings the batch to 4 Mi."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    found = _advisories(write_spec, "cluster.instance_count=128", "training.batch_size=2")
    assert "lower training.batch_size to 1 (4,194,304 tokens" in found["SMP040"].message


def _model_plan(write_spec, *overrides, model: dict | None = None):
    import yaml

    spec = yaml.safe_load(MINIMAL)
    if model is not None:
        spec["model"] = model
    return build_plan(load_spec(write_spec(yaml.safe_dump(spec)), list(overrides)))


def _rules_in(plan) -> dict:
    return {a.rule: a for a in plan.advisories}


def _small_llama(heads: int, kv_heads: int) -> dict:
    return {"type": "llama", "num_layers": 4, "hidden_width": 64 * heads, "num_heads": heads,
            "num_key_value_heads": kv_heads, "intermediate_size": 512, "vocab_size": 1000, "seq_length": 512}


def test_tensor_parallel_2_with_an_odd_head_count_is_refused(no_aws_config, write_spec):
    """Kills rules/checks.py SMP009: the head check skipping TP 2 (`tp > 2`), so 3 heads split over 2 ranks."""
    odd_heads = _rules_in(_model_plan(write_spec, "smp.tensor_parallel_degree=2", model=_small_llama(3, 3)))
    assert odd_heads["SMP009"].severity == "error"
    assert "tensor_parallel_degree 2 must divide num_heads 3" in odd_heads["SMP009"].message
    odd_kv = _rules_in(_model_plan(write_spec, "smp.tensor_parallel_degree=2", model=_small_llama(6, 3)))
    assert "num_key_value_heads 3" in odd_kv["SMP009"].message
    assert "SMP009" not in _rules_in(_model_plan(write_spec, "smp.tensor_parallel_degree=2", model=_small_llama(4, 2)))


def test_context_parallel_2_above_a_sharding_degree_of_1_is_refused(no_aws_config, write_spec):
    """Kills rules/checks.py SMP003: the CP-within-shard check skipping CP 2 (`cp > 2`)."""
    found = _rules_in(_model_plan(write_spec, "smp.hybrid_shard_degree=1", "smp.context_parallel_degree=2"))
    assert found["SMP003"].severity == "error"
    assert "context_parallel_degree 2 exceeds the sharding degree 1" in found["SMP003"].message
    assert "SMP003" not in _rules_in(_model_plan(write_spec, "smp.hybrid_shard_degree=2",
                                             "smp.context_parallel_degree=2"))


def test_hybrid_shard_0_with_expert_parallel_2_is_refused_not_explained(no_aws_config, write_spec):
    """Kills rules/checks.py SMP011: its EP guard skipping EP 2 (`> 2`): it states what SMP012 calls undefined."""
    found = _rules_in(_model_plan(write_spec, "smp.expert_parallel_degree=2", model={"preset": "mixtral-8x7b"}))
    assert found["SMP012"].severity == "error"
    assert "SMP011" not in found


def test_the_suggested_tensor_parallel_fix_is_the_smallest_that_fits(no_aws_config, write_spec):
    """Kills rules/checks.py SMP060: TP candidates (3, 4, 8) instead of (2, 4, 8), so TP 2 is never suggested."""
    found = _rules_in(_model_plan(write_spec, "smp.hybrid_shard_degree=2", "training.batch_size=1"))
    message = found["SMP060"].message
    assert "raise tensor_parallel_degree to 2 (" in message
    assert "raise tensor_parallel_degree to 4" not in message


def test_an_explicit_hybrid_shard_degree_is_explained_in_the_plan(no_aws_config, write_spec):
    """Kills rules/decisions.py shard_reason: no reason (None) for an explicit hybrid_shard_degree."""
    plan = _model_plan(write_spec, "smp.hybrid_shard_degree=4")
    assert plan.decisions.hybrid_shard_degree == 4
    assert plan.decisions.shard_reason == "hybrid_shard_degree 4 as set"


def test_delayed_init_reason_counts_parameters_in_billions(no_aws_config, write_spec):
    """Kills rules/decisions.py delayed_init: the parameter count multiplied by 1e9 instead of divided."""
    reason = _model_plan(write_spec).decisions.delayed_reason
    assert reason.startswith("6.7B parameters (60B or less) and 8 fp32 copies")


def test_delayed_init_reason_gives_the_fp32_host_memory_of_8_ranks(no_aws_config, write_spec):
    """Kills rules/decisions.py FP32_BYTES: fp32 taken as 5 bytes, overstating the host memory ranks need."""
    from launcher.spec.presets import PRESETS

    params = PRESETS["llama2-7b"].architecture.parameters
    assert round(8 * 4 * params / 2**30) == 201
    plan = _model_plan(write_spec, "model.use_smp_implementation=false")
    assert plan.decisions.delayed_reason == ("6.7B parameters (60B or less) and 8 fp32 copies (201 GiB) fit "
                                                "the 1,152 GiB of host memory")
    assert plan.decisions.delayed_param_init is False
    transformed = _model_plan(write_spec)  # tsm.transform's copy doubles what each rank holds
    assert transformed.decisions.delayed_reason == (
        "6.7B parameters (60B or less) and 8 fp32 copies and a second one each from tsm.transform (402 GiB) fit "
        "the 1,152 GiB of host memory")
    assert transformed.decisions.delayed_param_init is False


@pytest.mark.parametrize("layers,delayed", [(40, False), (46, True)])
def test_delayed_init_turns_on_where_8_fp32_copies_exceed_host_memory(no_aws_config, write_spec, layers, delayed):
    """Kills rules/decisions.py FP32_BYTES: a 34.8B model (8 x 4 bytes = 1,036 GiB) wrongly needing delayed init."""
    model = {"preset": "llama2-70b", "num_layers": layers, "use_smp_implementation": False}
    plan = _model_plan(write_spec, model=model)
    params = plan.model.architecture.parameters
    assert params < 60e9 and (8 * 4 * params / 2**30 > 1152) is delayed
    assert plan.decisions.delayed_param_init is delayed
    if delayed:
        assert "ranks each building the model in fp32 need 1,189 GiB" in plan.decisions.delayed_reason


@pytest.mark.parametrize("overrides, backend, why", [
    ([], "smddp", "SMDDP's AllGather is available on ml.p4d.24xlarge"),
    (["model.pretrained=meta-llama/Llama-2-7b-hf"], "nccl", "fine-tuning from pretrained weights"),
    (["model.pretrained=meta-llama/Llama-2-7b-hf", "smp.backend=smddp"], "smddp", "backend smddp as set"),
    (["cluster.instance_type=ml.p5.48xlarge"], "nccl", "SMDDP does not support ml.p5.48xlarge"),
])


def test_fine_tuning_resolves_backend_auto_to_nccl_and_the_plan_says_why(write_spec, overrides, backend, why):
    """AWS's fine-tuning notebooks run on NCCL: SMDDP keeps extra memory after sync_module_states' broadcast
    (train_lib.py). backend auto follows them; an explicit smddp stays, with SMP030's warning."""
    plan = build_plan(load_spec(write_spec(MINIMAL), overrides))
    assert plan.decisions.backend == backend and plan.decisions.backend_reason.startswith(why)
    script = plan.source.files["train.py"]
    assert ("import smdistributed.dataparallel" in script) is (backend == "smddp")
    assert f"# The plan's backend: {plan.decisions.backend_reason}." in script
    warned = [a for a in plan.advisories if a.rule == "SMP030"]
    assert bool(warned) is ("smp.backend=smddp" in overrides)


def test_each_images_smp_release_takes_the_parameters_of_its_release_notes():
    """expert_parallel_degree from SMP 2.3.0, context_parallel_degree from 2.5.0 (the release notes); the four of
    SMP 2.0.0's notebooks everywhere; an older image gets SMP's default for the rest by their absence."""
    from launcher.catalog.smp import FRAMEWORKS, first_pytorch_with, smp_parameters_taken

    base = ["hybrid_shard_degree", "sm_activation_offloading", "activation_loading_horizon", "tensor_parallel_degree"]
    full = ["hybrid_shard_degree", "sm_activation_offloading", "activation_loading_horizon",
            "fsdp_cache_flush_warnings", "allow_empty_shards", "tensor_parallel_degree", "context_parallel_degree",
            "expert_parallel_degree", "random_seed"]
    taken = {v: list(smp_parameters_taken(v)) for v in FRAMEWORKS}
    assert taken == {"2.0.1": base, "2.1.2": base, "2.2.0": [*base, "expert_parallel_degree"],
                     "2.3.1": full, "2.4.1": full, "2.5.1": full}
    assert [first_pytorch_with(r) for r in ("2.0.0", "2.3.0", "2.5.0", "2.8.0")] == ["2.0.1", "2.2.0", "2.3.1", "2.5.1"]


def test_delayed_init_counts_the_copy_tsm_transform_makes(no_aws_config, write_spec):
    """GPT-NeoX-20B on p4d: 8 fp32 copies (613 GiB) fit, but tsm.transform builds SMP's copy while the Hugging
    Face model is alive, so each rank peaks at two: about 1.2 TiB of 1,152 GiB, and auto turns delayed init on."""
    plan = _model_plan(write_spec, "model.preset=gpt-neox-20b", "model.seq_length=2048")
    assert plan.decisions.transform is True and plan.decisions.delayed_param_init is True
    assert "need 1,225 GiB of host memory; ml.p4d.24xlarge has 1,152 GiB" in plan.decisions.delayed_reason
    off = _model_plan(write_spec, "model.preset=gpt-neox-20b", "model.seq_length=2048",
                      "smp.delayed_param_init=false")
    warned = _rules_in(off)["SMP025"].message
    assert "tsm.transform's copy" in warned and "1,225 GiB" in warned
    host = off.memory.host
    assert host.peak_phase == "model build" and not host.fits and round(host.per_instance_gib) == 1225
    # under tensor parallelism SMP's copy is a 1/t slice: 8 x (1 + 1/4) copies
    tp = _model_plan(write_spec, "model.preset=gpt-neox-20b", "model.seq_length=2048", "cluster.instance_count=2",
                     "smp.tensor_parallel_degree=4", "smp.delayed_param_init=false")
    assert round(tp.memory.host.per_instance_gib) == round(1225 * 1.25 / 2)
    hf = _model_plan(write_spec, "model.preset=gpt-neox-20b", "model.seq_length=2048",
                     "model.use_smp_implementation=false")
    assert hf.decisions.delayed_param_init is False and round(hf.memory.host.per_instance_gib) == 613
    # a P5 has 2,048 GiB of host memory (https://aws.amazon.com/ec2/instance-types/p5/): the same two copies fit
    p5 = _model_plan(write_spec, "model.preset=gpt-neox-20b", "model.seq_length=2048",
                     "cluster.instance_type=ml.p5.48xlarge")
    assert p5.decisions.delayed_param_init is False
    assert p5.decisions.delayed_reason.endswith("(1,225 GiB) fit the 2,048 GiB of host memory")
    assert p5.memory.host.capacity_gib == 2048 and p5.memory.host.fits


def test_a_full_export_that_cannot_fit_rank_0_is_refused(no_aws_config, write_spec):
    """output.save_final_model full gathers the fp32 model on rank 0 (AWS's _save_full); above host memory
    the plan refuses it and names the sharded export, which never gathers."""
    big = ["model.preset=llama-175b", "model.num_layers=200"]
    refused = _rules_in(_model_plan(write_spec, *big, "output.save_final_model=full"))["SMP063"]
    assert refused.severity == "error" and "output.save_final_model: sharded" in refused.message
    sharded = _model_plan(write_spec, *big, "output.save_final_model=sharded")
    assert "SMP063" not in _rules_in(sharded)
    assert sharded.memory.host.breakdown["final_export"] < 2  # one tensor at a time per rank
    full = _model_plan(write_spec, "model.preset=llama2-70b", "output.save_final_model=full")
    assert "SMP063" not in _rules_in(full) and round(full.memory.host.breakdown["final_export"]) == 257
    off = _model_plan(write_spec, "model.preset=llama2-70b")
    assert off.memory.host.breakdown["final_export"] == 0


@pytest.mark.parametrize("setting, field", [("smp.allow_empty_shards=true", "smp.allow_empty_shards"),
                                            ("smp.fsdp_cache_flush_warnings=false", "smp.fsdp_cache_flush_warnings"),
                                            ("smp.random_seed=7", "smp.random_seed")])


def test_a_parameter_the_images_smp_release_lacks_is_refused_naming_its_field(run_cli, write_spec, setting, field):
    """PyTorch 2.2.0's image carries SMP 2.3.1, which the plan holds to the four parameters of SMP 2.0.0 and
    expert_parallel_degree: a spec setting another one away from SMP's default is exit 2 at its field."""
    p = write_spec(MINIMAL + "framework:\n  pytorch_version: '2.2.0'\n")
    r = run_cli("validate", str(p), "--set", setting)
    assert r.code == 2, (r.out, r.err)
    line = next(x for x in r.err.splitlines() if "SMP057" in x)
    assert f": {field}: SMP057 " in line and "needs SMP 2.5.0" in line and "pytorch_version to 2.3.1" in line
    assert run_cli("validate", str(p), "--set", setting, "--set", "framework.pytorch_version='2.3.1'").code == 0


def test_the_smallest_expert_degree_must_divide_the_experts_too(write_spec):
    """SMP010 at expert_parallel_degree 2: three experts cannot be split over two ranks; four can."""
    odd = _model_plan(write_spec, MIXTRAL, "model.num_experts=3", "smp.expert_parallel_degree=2",
                      "smp.hybrid_shard_degree=4")
    assert _rules_in(odd)["SMP010"].message == "expert_parallel_degree 2 must divide num_experts 3"
    even = _model_plan(write_spec, MIXTRAL, "model.num_experts=4", "smp.expert_parallel_degree=2",
                       "smp.hybrid_shard_degree=4")
    assert "SMP010" not in _rules_in(even)
