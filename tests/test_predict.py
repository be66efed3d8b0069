"""The step-time model, its calibration on published points, time to train and cost (launcher.predict)."""
import dataclasses
import json
import math
import statistics

import pytest

from launcher.plan.build import build_plan
from launcher.predict import account, budget, hardware
from launcher.predict.fit import fit, measured_efficiency, published_fit, workload
from launcher.predict.model import Links, Workload, compute_from_step, step_seconds, terms
from launcher.predict.published import POINTS, SOURCES
from launcher.predict.speed import predict
from launcher.spec import load_spec
from launcher.spec.presets import PRESETS
from tests.conftest import MINIMAL, plan_rows

LLAMA70 = PRESETS["llama2-70b"].architecture


def p4d(nodes, shard, batch=2, seq=4096, **kw):
    return Workload(LLAMA70, "A100 40GB", nodes, 8, hardware.NODE_NETWORK_GBPS["ml.p4d.24xlarge"], seq, batch,
                    shard_degree=shard, **kw)


def test_every_published_point_cites_a_public_url_and_a_known_gpu():
    assert len(POINTS) > 200
    for p in POINTS:
        assert p.url.startswith("https://github.com/") and p.source in SOURCES
        assert p.gpu in hardware.GPUS and p.tokens_per_s_per_gpu > 0
    assert {p.gpu for p in POINTS} >= {"A100 40GB", "A100 80GB", "H100 80GB"}
    assert max(p.gpus for p in POINTS) >= 512 and min(p.gpus for p in POINTS) == 8


def test_the_gpu_and_published_tables_cannot_be_changed_by_a_caller():
    """Every plan in the process reads the same tables: a caller's assignment must fail, not skew later plans."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        hardware.GPUS["A100 40GB"].bf16_tflops = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        POINTS[0].tokens_per_s_per_gpu = 1.0  # type: ignore[misc]


def test_the_fit_predicts_points_it_never_saw():
    """Leave-one-out on every fifth point (`make bench` runs all of them): the median error is small and
    the measured value lies inside the band for nearly all."""
    errors, inside = [], 0
    sample = POINTS[::5]
    for p in sample:
        rest = tuple(q for q in POINTS if q is not p)
        got = predict(workload(p), fit(rest))
        errors.append(abs(got.tokens_per_second_per_gpu / p.tokens_per_s_per_gpu - 1))
        inside += got.band[0] <= p.tokens_per_s_per_gpu <= got.band[1]
    assert statistics.median(errors) < 0.06
    assert inside >= 0.9 * len(sample)


def test_the_fit_reads_compute_from_every_published_point():
    """None of the published clusters is communication-bound under the model: each point's compute time can
    be read from its step, and the fitted efficiencies are physical (below the peak)."""
    effs = [measured_efficiency(p) for p in POINTS]
    assert all(e is not None and 0.1 < e < 0.95 for e in effs)
    assert published_fit().points == len(POINTS)


def test_step_inverts_to_compute():
    t = terms(p4d(32, 256))
    for compute in (0.5 * t.overlappable, 2.0 * t.overlappable):
        step = step_seconds(compute, t)
        assert compute_from_step(step, t) == pytest.approx(compute)
    assert compute_from_step(t.exposed + 0.5 * t.overlappable, t) is None


def test_fsdp_across_nodes_is_bounded_by_the_network():
    """One node shards over NVLink; 32 p4d nodes shard over 400 Gbps EFA: far more communication per step,
    SMDDP's AllGather lowers it, and few tokens per GPU (1,024 here) leave the step communication-bound."""
    inside = terms(p4d(1, 8, batch=1)).fsdp
    across = terms(p4d(32, 256, batch=1)).fsdp
    assert across > 5 * inside  # 240 GB/s of NVLink against 40 GB/s of EFA per node
    assert terms(p4d(32, 256, smddp=True)).fsdp < terms(p4d(32, 256)).fsdp
    small = predict(p4d(32, 256, batch=1, seq=1024))
    assert small.bound == "communication" and small.communication_seconds > small.compute_seconds
    assert predict(p4d(32, 256, batch=8)).bound == "compute"
    p5 = dataclasses.replace(p4d(32, 256, batch=1), gpu="H100 80GB", node_gbps=3200.0)
    assert terms(p5).fsdp < terms(p4d(32, 256, batch=1)).fsdp / 4


def test_hybrid_replicas_and_tensor_parallelism_cost_their_own_collectives():
    hybrid = terms(p4d(32, 8))
    assert hybrid.replicas > 0 and terms(p4d(32, 256)).replicas == 0
    # 32 ranks, shard degree 8 and expert degree 2: a replica spans 16 ranks, so two replicas all-reduce
    assert (p4d(4, 8).replicas, p4d(4, 8, expert_parallel=2).replicas, p4d(4, 32).replicas) == (4, 2, 1)
    assert terms(p4d(4, 32, tensor_parallel=8)).tensor > 0 and terms(p4d(4, 32)).tensor == 0
    across = terms(p4d(4, 2, tensor_parallel=16)).tensor
    assert across > 5 * terms(p4d(4, 4, tensor_parallel=8)).tensor  # tensor parallelism over EFA


def test_expert_parallelism_costs_all_to_alls_in_proportion_to_the_experts_a_token_visits():
    mixtral = PRESETS["mixtral-8x7b"].architecture
    top2 = dataclasses.replace(p4d(1, 4, expert_parallel=2), architecture=mixtral)
    top1 = dataclasses.replace(top2, architecture=dataclasses.replace(mixtral, num_experts_per_tok=1))
    assert terms(top2).expert > 0 and terms(top2).expert == pytest.approx(2 * terms(top1).expert)
    assert terms(dataclasses.replace(top2, expert_parallel=1)).expert == 0
    # inside one node (NVLink): a rank sends (ep - 1) / ep of its routed tokens, 4 all-to-alls a layer, 6 with
    # the forward recomputed
    ep4 = dataclasses.replace(top2, expert_parallel=4)
    assert terms(ep4).expert == pytest.approx(terms(top2).expert * (3 / 4) / (1 / 2))
    assert terms(top2).expert == pytest.approx(terms(dataclasses.replace(top2, checkpointing=0.0)).expert * 6 / 4)
    routed = top2.micro_tokens * mixtral.hidden_width * 2 * 2 * (1 / 2)  # bf16 activations, top-2, half sent
    assert terms(top2).expert == pytest.approx(mixtral.num_layers * 6 * routed / Links.of(top2).nvlink)


def test_the_band_holds_the_prediction_and_mfu_is_model_flops_over_peak():
    w = p4d(32, 256)
    got = predict(w)
    low, high = got.band
    assert low < got.tokens_per_second_per_gpu < high
    assert got.mfu == pytest.approx(w.model_flops / got.step_seconds / (312e12))
    assert got.tokens_per_second_per_gpu == pytest.approx(w.tokens_per_gpu / got.step_seconds)


def test_checkpointing_costs_a_recomputed_forward_and_fp8_is_faster_on_h100():
    h100 = dataclasses.replace(p4d(4, 32), gpu="H100 80GB", node_gbps=3200.0)
    off = predict(dataclasses.replace(h100, checkpointing=0.0))
    on = predict(h100)
    assert off.tokens_per_second_per_gpu > 1.15 * on.tokens_per_second_per_gpu
    assert predict(dataclasses.replace(h100, precision="fp8")).tokens_per_second_per_gpu > (
        1.1 * on.tokens_per_second_per_gpu)


def _plan(write_spec, *sets, env=None):
    return build_plan(load_spec(write_spec(MINIMAL), list(sets)), env=env)


def test_plan_json_carries_performance_and_cost_with_their_sources(write_spec):
    data = _plan(write_spec, "cluster.region=us-east-1").to_dict()
    perf, cost = data["performance"], data["cost"]
    assert set(perf) >= {"step_seconds", "tokens_per_second_per_gpu", "mfu", "band", "bound", "time_to_train_seconds"}
    assert perf["band"][0] < perf["tokens_per_second_per_gpu"] < perf["band"][1]
    assert perf["calibration"] == "published" and perf["bound"] in ("compute", "communication")
    assert set(cost) >= {"usd", "usd_per_hour", "price_source", "price_date"}
    assert cost["price_source"] and cost["price_date"]
    assert cost["usd"] == pytest.approx(cost["usd_per_hour"] * perf["time_to_train_seconds"] / 3600, rel=1e-3)
    time = perf["time_to_train"]
    assert perf["time_to_train_seconds"] == pytest.approx(time["startup_seconds"] + time["training_seconds"]
                                                          + time["checkpoint_seconds"], abs=1)
    assert time["steps"] == 1000 and time["checkpoints"] == 2  # MINIMAL trains 1000 steps, saving every 500
    json.dumps(data)


def test_no_price_means_no_cost_and_says_why(write_spec):
    cost = _plan(write_spec, "cluster.region=sa-east-1", "cluster.instance_type=ml.p5.48xlarge").cost
    assert cost is not None and cost.usd is None and cost.price_source is None
    assert "no on-demand price for ml.p5.48xlarge in any region" in cost.note
    assert cost.price_region is None and cost.to_dict()["price_region"] is None


def test_a_region_without_a_figure_is_priced_with_another_regions_and_says_so(write_spec):
    """us-west-2 has no shipped figure for ml.p4d.24xlarge; us-east-1's prices the plan, named as such."""
    plan = _plan(write_spec)
    cost = plan.cost
    hours = plan.training_time.total_seconds / 3600
    assert cost.usd == pytest.approx(25.251 * hours) and cost.price_region == "us-east-1"
    assert cost.price_source.startswith("us-east-1's figure (us-west-2 has none")
    assert cost.to_dict()["price_region"] == "us-east-1"
    own = _plan(write_spec, "cluster.region=us-east-1").cost
    assert own.price_region == "us-east-1" and not own.price_source.startswith("us-east-1's figure")


def test_a_token_budget_becomes_steps(write_spec):
    plan = _plan(write_spec, "training.tokens=1T", "training.max_steps=10")
    per_step = plan.global_batch_tokens
    assert plan.spec.training.max_steps == math.ceil(10**12 / per_step)
    assert plan.training_time is not None and plan.training_time.steps == plan.spec.training.max_steps
    assert plan.training_time.steps_from == f"training.tokens 1,000,000,000,000 at {per_step:,} tokens a step"
    assert _plan(write_spec, "training.tokens=300B").spec.training.tokens == 300 * 10**9


@pytest.mark.parametrize("bad", ["1X", "true", "-5", "1.5.2T"])
def test_a_bad_token_budget_is_a_spec_error(write_spec, bad):
    from launcher.core.errors import SpecError

    with pytest.raises(SpecError) as err:
        _plan(write_spec, f"training.tokens={bad}")
    assert "training.tokens" in str(err.value)


def test_spot_adds_an_interruption_allowance(write_spec):
    on_demand = _plan(write_spec, "cluster.instance_count=16", "smp.hybrid_shard_degree=128").training_time
    spot = _plan(write_spec, "cluster.instance_count=16", "smp.hybrid_shard_degree=128",
                 "cluster.spot=true").training_time
    assert on_demand.interruption_seconds == 0 and spot.interruption_seconds > 0
    assert spot.total_seconds > on_demand.total_seconds


def test_the_spot_allowance_is_the_documented_rate_times_what_each_interruption_loses():
    """budget.py's model: n instances x hours x 5% a month (0.05 / 720 an hour) interruptions, each losing a
    start-up and half a checkpoint interval of steps (at most half the run)."""
    w = p4d(16, 128)
    for every, lost_steps in ((1000, 500), (5000, 1500)):
        t = budget.training_time(w, 2.0, 3000, "training.max_steps", every, spot=True)
        hours = (budget.STARTUP_SECONDS + 3000 * 2.0 + t.checkpoint_seconds) / 3600
        lost = budget.STARTUP_SECONDS + lost_steps * 2.0
        assert t.interruption_seconds == pytest.approx(16 * hours * 0.05 / 720 * lost)
        assert budget.training_time(w, 2.0, 3000, "training.max_steps", every, spot=False).interruption_seconds == 0
    assert t.checkpoints == 0 and budget.training_time(w, 2.0, 3000, "x", 1000, spot=False).checkpoints == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.steps = 1  # type: ignore[misc]


def test_checkpoint_writes_split_over_the_nodes_holding_a_replica():
    assert budget.checkpoint_seconds(p4d(32, 256)) == pytest.approx(budget.checkpoint_seconds(p4d(1, 8)) / 32)
    assert budget.checkpoint_seconds(p4d(32, 8)) == pytest.approx(budget.checkpoint_seconds(p4d(1, 8)))


def test_an_account_factor_scales_later_plans_and_the_plan_says_so(write_spec, tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "SMP_LAUNCH_BUCKET": "b"}
    before = _plan(write_spec, env=env).performance
    account.store([account.Sample("job-a", "ml.p4d.24xlarge", 0.8 * before.tokens_per_second_per_gpu,
                                  before.tokens_per_second_per_gpu, 20, "2026-12-02T08:00:00Z")], env)
    after = _plan(write_spec, env=env).performance
    assert after.tokens_per_second_per_gpu == pytest.approx(0.8 * before.tokens_per_second_per_gpu)
    assert after.band[1] == pytest.approx(0.8 * before.band[1])
    # the measured factor slows the step and its compute part alike; the communication stays as predicted
    assert after.compute_seconds == pytest.approx(before.compute_seconds / 0.8)
    assert after.step_seconds == pytest.approx(before.step_seconds / 0.8)
    assert after.mfu == pytest.approx(0.8 * before.mfu)
    assert after.communication_seconds == pytest.approx(before.communication_seconds)
    assert after.calibration == "this account's factor 0.800 for ml.p4d.24xlarge from 1 calibrated job"
    other = _plan(write_spec, "cluster.instance_type=ml.p5.48xlarge", env=env).performance
    assert other.calibration == "published"


def test_a_damaged_calibration_file_is_passed_over(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path)}
    path = account.path(env)
    path.parent.mkdir(parents=True)
    for text in ("not json", json.dumps({"version": 1, "samples": [{"job": "x"}]}), json.dumps([1])):
        path.write_text(text)
        assert account.factors(env) == {}


def test_a_calibration_file_of_format_1_is_read_and_another_format_is_passed_over(tmp_path):
    """A file `calibrate` wrote (format 1) keeps working; one of a format this release does not know is skipped."""
    env = {"XDG_STATE_HOME": str(tmp_path)}
    path = account.path(env)
    path.parent.mkdir(parents=True)
    row = {"job": "job-a", "instance_type": "ml.p4d.24xlarge", "measured": 80.0, "predicted": 100.0, "steps": 20,
           "measured_at": "2026-12-02T08:00:00Z"}
    path.write_text(json.dumps({"version": 1, "samples": [row]}))
    assert account.factors(env)["ml.p4d.24xlarge"].factor == pytest.approx(0.8)
    path.write_text(json.dumps({"version": 2, "samples": [row, row]}))
    assert account.factors(env) == {}


def test_a_calibration_file_is_read_up_to_its_size_bound_and_passed_over_past_it(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path)}
    path = account.store([account.Sample("job-a", "ml.p4d.24xlarge", 80.0, 100.0, 20, "2026-12-02T08:00:00Z")], env)
    text = path.read_text(encoding="utf-8").rstrip()
    for size, found in ((1 << 20, True), ((1 << 20) + 1, False)):  # the 1 MiB account.py's docstring promises
        path.write_text(text + " " * (size - len(text)), encoding="utf-8")  # JSON allows trailing blanks
        assert path.stat().st_size == size
        assert ("ml.p4d.24xlarge" in account.factors(env)) is found


def test_max_cost_refuses_a_plan_predicted_above_it(run_cli, write_spec):
    spec = write_spec(MINIMAL.replace("us-west-2", "us-east-1"))
    r = run_cli("plan", str(spec), "--max-cost", "1")
    assert r.code == 2 and "SMP070" in r.err and "cluster.max_cost" in r.err and "$1" in r.err
    assert run_cli("plan", str(spec), "--max-cost", "1000000").code == 0


def test_the_plan_table_shows_speed_time_and_cost_lines(run_cli, write_spec):
    r = run_cli("plan", str(write_spec(MINIMAL)))
    assert r.code == 0
    lines = plan_rows(r.out)
    assert "tokens/s per GPU (band" in lines["speed"] and "calibration: published" in lines["speed"]
    assert "1,000 steps (training.max_steps)" in lines["time to train"]
    assert lines["cost"].count("$") >= 2 and "us-east-1's figure (us-west-2 has none" in lines["cost"]


def test_an_instance_type_without_hardware_figures_is_not_predicted(write_spec, monkeypatch):
    monkeypatch.delitem(hardware.NODE_NETWORK_GBPS, "ml.p5.48xlarge")
    plan = _plan(write_spec, "cluster.instance_type=ml.p5.48xlarge")
    assert plan.performance is None and plan.cost is None and plan.memory is not None
    assert plan.to_dict()["performance"] is None
    from launcher.cli.present import prediction_rows

    assert prediction_rows(plan.to_dict()) == [("speed", "not predicted: no hardware figures for ml.p5.48xlarge")]
    invalid = _plan(write_spec, "smp.tensor_parallel_degree=3")
    assert invalid.performance is None and prediction_rows(invalid.to_dict())[0][1].startswith("- (the layout")


def test_submit_refuses_a_plan_predicted_above_max_cost_before_anything_is_created(moto_world, run_cli, write_spec):
    spec = write_spec(MINIMAL.replace("us-west-2", "us-east-1") + "role: Good\n")
    r = run_cli("submit", str(spec), "--max-cost", "1", "--dry-run")
    assert r.code == 2 and "SMP070" in r.err
    assert moto_world.sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


def test_prices_fetched_from_the_price_list_give_plans_a_cost_with_that_source(moto_world, write_spec, tmp_path):
    """The emulated Price List answers GetProducts; once `prices --refresh` (or a submit) cached its figures,
    plans in us-west-2 have a cost, on demand and spot, naming the cache as their source."""
    import emulator.pricing
    from launcher import api
    from launcher.core.aws import Clients

    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "SMP_LAUNCH_BUCKET": "b"}
    before = _plan(write_spec, env=env).cost
    assert before.price_region == "us-east-1"  # the shipped us-east-1 figure, until us-west-2 has its own
    emulator.pricing.set_price("ml.p4d.24xlarge", "us-west-2", 40.0)
    emulator.pricing.set_price("ml.p4d.24xlarge", "us-west-2", 12.0, spot=True)
    try:
        api.prices(["ml.p4d.24xlarge"], region="us-west-2", refresh=True, env=env, clients=Clients(region="us-west-2"))
    finally:
        emulator.pricing.reset()
    plan = _plan(write_spec, env=env)
    hours = plan.training_time.total_seconds / 3600
    assert plan.cost.usd == pytest.approx(40.0 * hours) and plan.cost.usd_per_hour == 40.0
    assert plan.cost.price_source.startswith("AWS Price List") and plan.cost.price_date
    assert plan.cost.price_region == "us-west-2"
    spot = _plan(write_spec, "cluster.spot=true", env=env)
    assert spot.cost.usd == pytest.approx(12.0 * spot.training_time.total_seconds / 3600) and spot.cost.spot
    with pytest.raises(dataclasses.FrozenInstanceError):
        spot.cost.usd = 0.0  # type: ignore[misc]


def test_an_account_sample_with_no_measured_or_predicted_speed_is_not_used(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path)}
    good = {"job": "a", "instance_type": "ml.p4d.24xlarge", "measured": 900.0, "predicted": 1000.0, "steps": 50,
            "measured_at": "2026-12-01"}
    rows = [good, {**good, "job": "b", "measured": 0.0}, {**good, "job": "c", "predicted": 0.0},
            {**good, "job": "d", "measured": -900.0, "predicted": -1000.0}]
    account.path(env).parent.mkdir(parents=True, exist_ok=True)
    account.path(env).write_text(json.dumps({"version": account.VERSION, "samples": rows}))
    assert [s.job for s in account.samples(env)] == ["a"]


def test_the_hardware_tables_cannot_be_changed_in_place():
    import dataclasses

    gpu = next(iter(hardware.GPUS.values()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpu.bf16_tflops = 1.0  # type: ignore[misc]


def test_a_parallelism_no_published_point_measures_widens_the_band_and_is_named(write_spec):
    """Tensor parallelism is measured on H100 only (torchtitan's Llama 3.1 70B, TP 8), expert parallelism nowhere:
    on A100 (or with experts) the band is a quarter wider each way and `uncalibrated` says why."""
    from launcher.predict.speed import UNCALIBRATED_WIDEN

    plain = _plan(write_spec, "smp.hybrid_shard_degree=4").performance
    tp = _plan(write_spec, "smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4").performance
    assert plain.uncalibrated == () and len(tp.uncalibrated) == 1
    assert tp.uncalibrated[0].startswith("tensor parallelism 2: published points measure it only on H100")
    assert tp.to_dict()["uncalibrated"] == list(tp.uncalibrated)
    # on H100, where the published points measure it, tensor parallelism stays calibrated
    h100 = _plan(write_spec, "cluster.instance_type=ml.p5.48xlarge", "smp.tensor_parallel_degree=2",
                 "smp.hybrid_shard_degree=4").performance
    assert h100.uncalibrated == ()
    # the widening is the band's own, times a quarter each way
    from launcher.predict.speed import predict

    plan = _plan(write_spec, "smp.tensor_parallel_degree=2", "smp.hybrid_shard_degree=4")
    from launcher.rules.engine import Context

    ctx = Context(plan.spec, "us-west-2")
    bare = predict(ctx.workload())
    low, high = bare.band
    assert bare.uncalibrated and low < bare.tokens_per_second_per_gpu < high
    import launcher.predict.speed as speed

    narrow = speed.UNCALIBRATED_WIDEN
    try:
        speed.UNCALIBRATED_WIDEN = 0.0
        unwidened = predict(ctx.workload()).band
    finally:
        speed.UNCALIBRATED_WIDEN = narrow
    assert low == pytest.approx(unwidened[0] / (1 + UNCALIBRATED_WIDEN))
    assert high == pytest.approx(unwidened[1] * (1 + UNCALIBRATED_WIDEN))
    moe = _plan(write_spec, "model.preset=mixtral-8x7b", "cluster.instance_type=ml.p5.48xlarge",
                "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4").performance
    assert any(u.startswith("expert parallelism 2: no published point") for u in moe.uncalibrated)
