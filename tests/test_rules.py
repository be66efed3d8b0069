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
               ["smp.activation_loading_horizon=4", "smp.activation_offloading=true"]),
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
    "SMP054": (["framework.pytorch_version='2.1.2'"], ["framework.pytorch_version='2.2.0'"]),
    "SMP055": (["cluster.volume_size_gb=9000"], ["cluster.volume_size_gb=8000"]),
    "SMP056": (["cluster.kms_key_id=alias/smp"], []),
    "SMP060": (["model.preset=llama2-70b"], ["training.batch_size=4", "smp.hybrid_shard_degree=8"]),
    "SMP061": (["cluster.instance_count=4", "smp.hybrid_shard_degree=32", "training.batch_size=1"],
               ["smp.hybrid_shard_degree=8", "training.batch_size=4"]),
    "SMP062": (["smp.hybrid_shard_degree=8", "training.batch_size=6"],
               ["smp.hybrid_shard_degree=8", "training.batch_size=4"]),
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


def test_every_rule_has_cases():
    assert {r.id for r in RULES} == set(CASES)


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
    msg = fired(["smp.hybrid_shard_degree=8", "training.batch_size=8"])["SMP060"].message
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
