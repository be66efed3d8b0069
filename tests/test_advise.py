"""`advise`: the seed's table, the seed's ranking, derived cluster sizes, and the written spec."""
import json

import pytest

from launcher.core.errors import ArgumentError, UsageError
from launcher.rules.advise import Budget, advise, parse_tokens
from launcher.spec import load_spec

PRACTICES = Budget(by="practices")  # the order of AWS's best practices, not the predicted time
SEED = [("llama2-7b", 1, (8, 1, True, False, 4)), ("llama2-70b", 32, (256, 1, True, False, 2)),
        ("llama-175b", 64, (128, 4, True, True, 6))]


@pytest.mark.parametrize("preset,instances,ref", SEED)
def test_the_seeds_reference_is_feasible_and_the_best_says_why_it_differs(preset, instances, ref):
    ranked = advise(preset, instances=instances, budget=PRACTICES)
    layouts = [(c.shard, c.tp, c.checkpointing, c.offloading, c.batch) for c in ranked]
    assert ref in layouts
    assert ranked[layouts.index(ref)].reference
    best = ranked[0]
    if (best.shard, best.tp, best.checkpointing, best.offloading, best.batch) != ref:
        assert any("ranks above AWS's reference configuration" in r for r in best.reasons)


def test_lowest_sharding_degree_that_fits_comes_first():
    ranked = advise("llama2-7b", instances=1, budget=PRACTICES)
    best = ranked[0]
    assert best.tp == 1 and best.checkpointing and not best.offloading
    assert best.shard == min(c.shard for c in ranked if c.tp == 1 and not c.warnings)
    assert any("communicates less" in r for r in best.reasons)
    assert f"lowest sharding degree that fits ({best.shard}): the least all-gather traffic" in best.reasons
    wider = next(c for c in ranked if c.tp == best.tp and not c.warnings and c.shard > best.shard)
    assert f"sharding degree {wider.shard} communicates more than {best.shard}, which also fits" in wider.reasons


def test_the_practices_order_puts_checkpointing_on_first_among_equally_warned_layouts():
    ranked = advise("llama2-13b", "ml.p5.48xlarge", instances=4, budget=PRACTICES)
    assert {c.checkpointing for c in ranked} == {True, False}
    for a, b in zip(ranked, ranked[1:], strict=False):
        if len(a.warnings) == len(b.warnings):
            assert a.checkpointing >= b.checkpointing, (a.key, b.key)


def test_offloading_before_more_sharding():
    ranked = advise("llama2-7b", global_batch_tokens=parse_tokens("4M"), instances=16, budget=PRACTICES)
    first_offload = next(i for i, c in enumerate(ranked) if c.offloading)
    more_shard = [i for i, c in enumerate(ranked) if not c.offloading and c.shard > ranked[first_offload].shard]
    assert all(i > first_offload for i in more_shard)


def test_long_context_prefers_tensor_parallelism():
    ranked = advise("llama2-13b", instances=4, seq_length=8192, budget=PRACTICES)
    assert ranked[0].tp >= 2 and not ranked[0].warnings
    assert any(c.tp == 1 for c in ranked)


def test_world_size_is_derived_from_the_largest_batch_and_the_global_batch():
    ranked = advise("llama2-7b", global_batch_tokens=4 * 2**20)
    best = ranked[0]
    assert best.global_batch_tokens == 4 * 2**20
    world = best.instances * 8
    assert world // best.tp * best.batch * 4096 == 4 * 2**20
    assert not advise("llama2-7b", instances=best.instances // 2, global_batch_tokens=4 * 2**20)


def test_every_candidate_fits_and_passes_the_rules():
    for c in advise("llama2-70b", instances=32):
        assert c.memory.fits and c.global_batch_tokens <= 4 * 2**20


def test_json_output_has_the_spec_keys(run_cli):
    r = run_cli("advise", "--model", "llama2-13b", "--instances", "4", "--seq-length", "8192", "--output", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert {"smp", "training", "memory", "global_batch_tokens"} <= set(rows[0])
    assert {"hybrid_shard_degree", "tensor_parallel_degree"} <= set(rows[0]["smp"])
    assert rows[0]["memory"]["fits"] is True


def test_write_produces_a_valid_spec(run_cli, tmp_path):
    out = tmp_path / "best.yaml"
    r = run_cli("advise", "--model", "llama2-70b", "--instances", "32", "--tokens", "100B", "--write", str(out))
    assert r.code == 0 and out.exists() and "why #1" in r.out
    assert r.out.strip().splitlines()[-1] == f"wrote {out}"
    assert "wrote" not in run_cli("advise", "--model", "llama2-70b", "--instances", "32").out
    spec = load_spec(out, env={}).spec
    assert spec.cluster.instance_count == 32 and spec.model.preset == "llama2-70b"
    assert run_cli("validate", str(out)).code == 0


def test_bad_model_and_impossible_layouts_are_one_line_errors(run_cli):
    r = run_cli("advise", "--model", "llama2-7", "--instances", "1")
    assert r.code == 2 and "did you mean 'llama2-7b'" in r.err and len(r.err.strip().splitlines()) == 1
    r = run_cli("advise", "--model", "llama2-70b", "--instances", "1")
    assert r.code == 2 and "no configuration" in r.err


@pytest.mark.parametrize("text,tokens", [("4M", 4194304), ("4Mi", 4194304), ("512K", 524288), ("1000", 1000)])
def test_token_counts(text, tokens):
    assert parse_tokens(text) == tokens


def test_bad_token_count():
    with pytest.raises(UsageError):
        parse_tokens("lots")


# -- ranked by predicted time to train (the default) ------------------------------------------------------------

def test_the_default_order_is_the_shortest_predicted_time_and_the_winner_says_why():
    from launcher.predict.fit import published_fit

    ranked = advise("llama2-70b", instances=32)
    times = [(not c.headroom, c.time_seconds) for c in ranked]
    assert times == sorted(times) and all(c.performance is not None for c in ranked)
    best, second = ranked[0], ranked[1]
    assert best.reasons[0].startswith("fastest to train: ")
    assert "#2" in best.reasons[0] and "tokens/s per GPU" in best.reasons[1]
    spread = published_fit().spread
    for c in ranked[1:]:
        assert c.ties_with_best == (abs(c.time_seconds / best.time_seconds - 1) <= spread)
    assert ("ties with #2" in best.reasons[0]) == second.ties_with_best
    # the same layouts as the best practices' order, only ranked differently
    practices = advise("llama2-70b", instances=32, budget=PRACTICES)
    assert {(c.shard, c.tp, c.batch, c.offloading, c.checkpointing) for c in practices} == {
        (c.shard, c.tp, c.batch, c.offloading, c.checkpointing) for c in ranked}


def test_a_clear_winner_is_not_called_a_tie():
    ranked = advise("llama2-7b", instances=1)
    slowest = ranked[-1]
    assert not slowest.ties_with_best and slowest.time_seconds > ranked[0].time_seconds * 1.2


def test_the_token_budget_sets_the_steps():
    ranked = advise("llama2-7b", instances=1, budget=Budget(tokens=10**9))
    for c in ranked[:5]:
        assert c.time is not None and c.time.steps == -(-10**9 // c.global_batch_tokens)


def test_by_cost_uses_the_price_and_falls_back_to_time_without_one():
    priced = advise("llama2-7b", instances=1, budget=Budget(by="cost", region="us-east-1"))
    costs = [(not c.headroom, c.usd) for c in priced]
    assert all(u is not None for _, u in costs) and costs == sorted(costs)
    assert priced[0].reasons[0].startswith("cheapest to train: ")
    # sa-east-1 has no figure of its own: us-east-1's prices every layout, named as such
    borrowed = advise("llama2-7b", instances=1, budget=Budget(by="cost", region="sa-east-1"))
    assert borrowed[0].reasons[0].startswith("cheapest to train") and borrowed[0].cost.price_region == "us-east-1"
    # no region has a figure for ml.p5.48xlarge: refused by name, never ranked by time instead
    with pytest.raises(ArgumentError) as err:
        advise("llama2-7b", "ml.p5.48xlarge", instances=1, budget=Budget(by="cost", region="us-east-1"))
    assert "cannot rank" in str(err.value) and "no on-demand price for ml.p5.48xlarge" in str(err.value)


def test_advise_json_and_table_show_speed_time_and_cost(run_cli):
    r = run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--price-region", "us-east-1", "--tokens", "100B",
                "--output", "json")
    assert r.code == 0, r.err
    best = json.loads(r.out)[0]
    assert {"tokens_per_second_per_gpu", "mfu", "bound", "band", "time_to_train_seconds"} <= set(best["performance"])
    assert best["cost"]["usd"] > 0 and best["cost"]["price_source"]
    r = run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--by", "cost", "--price-region", "us-east-1")
    assert r.code == 0 and "sorted by cost, cheapest first" in r.out and "tok/s/GPU" in r.out and "price: " in r.out
    assert "free" in r.out.splitlines()[1].split()
    r = run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--by", "cost", "--instance-type",
                "ml.p5.48xlarge")
    assert r.code == 2 and "--by" in r.err and "ml.p5.48xlarge" in r.err and len(r.err.strip().splitlines()) == 1
    r = run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--tokens", "lots")
    assert r.code == 2 and "--tokens" in r.err and len(r.err.strip().splitlines()) == 1


def test_a_clear_winner_says_by_how_much_it_beats_the_second():
    ranked = advise("llama2-7b", "ml.p5.48xlarge", instances=1, global_batch_tokens=2**20)
    best, second = ranked[0], ranked[1]
    assert not second.ties_with_best
    slower = second.time_seconds / best.time_seconds - 1
    assert best.reasons[0].startswith("fastest to train")
    assert f": predicted {slower * 100:.1f}% faster than #2: " in best.reasons[0]
    own = f"predicted {best.performance.tokens_per_second_per_gpu:,.0f} tokens/s per GPU"
    assert best.reasons[1].startswith(own) and not second.reasons[0].startswith("fastest")  # its own, after the verdict


def test_the_winner_names_what_it_does_differently_in_checkpointing_and_offloading():
    from dataclasses import replace

    from launcher.rules.advise import _differences

    c = advise("llama2-7b", instances=1)[0]
    off, on = replace(c, checkpointing=False), replace(c, checkpointing=True)
    assert _differences(off, on) == ["no activation checkpointing: no forward recomputed"]
    assert _differences(on, off) == ["activation checkpointing, which the other cannot fit without"]
    kept, offloaded = replace(c, offloading=False), replace(c, offloading=True)
    assert _differences(kept, offloaded) == ["no activation offloading"]
    assert _differences(offloaded, kept) == ["activation offloading"]
    assert _differences(replace(off, performance=None), on) == []  # no prediction: nothing to explain


def test_the_api_refuses_an_unknown_order_or_instance_type_and_an_unreachable_batch():
    from launcher.core.errors import ArgumentError
    from launcher.rules.advise import INSTANCE_COUNTS

    with pytest.raises(ArgumentError, match=r"'fastest' is not one of time, cost, practices"):
        advise("llama2-7b", instances=1, budget=Budget(by="fastest"))
    with pytest.raises(ArgumentError, match=r"ml.g5.48xlarge is not one of ml.p4d.24xlarge, "):
        advise("llama2-7b", "ml.g5.48xlarge", instances=1)
    with pytest.raises(ArgumentError) as err:
        advise("llama2-70b", global_batch_tokens=2**40)
    assert str(err.value).startswith(f"no cluster of up to {INSTANCE_COUNTS[-1]} instances reaches "
                                     f"{2**40:,} tokens per step")


def test_a_refusal_of_the_spec_other_than_its_token_budget_is_not_told_as_a_budget_no_layout_can_train():
    """Only the token budget depends on the layout; any other refusal (a precision the spec does not know) names
    its own field instead of being passed off as a budget no layout can train."""
    with pytest.raises((ValueError, UsageError)) as err:
        advise("llama2-7b", instances=1, precision="fp64")
    assert "training.precision" in str(err.value) and "no layout can train" not in str(err.value)


def test_the_table_points_to_aws_reference_only_when_the_top_rows_leave_it_out(run_cli):
    args = ("advise", "--model", "llama2-7b", "--instances", "1")
    rows = json.loads(run_cli(*args, "--output", "json", "--top", "500").out)
    rank = next(i for i, row in enumerate(rows, start=1) if row["seed_reference"])
    assert rank > 1
    note = f"AWS's reference configuration is #{rank} of {len(rows)} (--top {rank} shows it)"
    assert note in run_cli(*args, "--top", str(rank - 1)).out
    assert "AWS's reference configuration is #" not in run_cli(*args, "--top", str(rank)).out


def test_a_sequence_of_one_token_is_advised_and_a_budget_no_layout_can_train_is_one_error(run_cli):
    r = run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--seq-length", "1", "--tokens", "1M",
                "--output", "json", "--top", "1")
    assert r.code == 0 and json.loads(r.out)[0]["training"]["batch_size"] >= 1, r.err
    r = run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--seq-length", "1")
    assert r.code == 2 and r.out == "" and "Traceback" not in r.err, r.err
    assert r.err.strip().startswith("--tokens: no layout can train this budget: training.tokens 1,000,000,000,000")
    assert r.err.strip().endswith("give a smaller --tokens or a longer --seq-length")


def test_a_price_region_or_precision_advise_cannot_use_is_one_line_exit_2(run_cli):
    from launcher import api
    from launcher.core.errors import ArgumentError

    r = run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--price-region", "Mars")
    assert r.code == 2 and r.err == "--price-region: 'Mars' is not an AWS region such as us-west-2\n" and not r.out
    with pytest.raises(ArgumentError, match=r"^precision: 'fp4' is not bf16, fp16 or fp8$"):
        api.advise("llama2-7b", instances=1, precision="fp4")
    with pytest.raises(ArgumentError, match=r"^region: 'us-west-2 ' is not an AWS region"):
        api.advise("llama2-7b", instances=1, region="us-west-2 ")


def test_a_written_spec_plans_as_advise_predicted_it(run_cli, tmp_path):
    """advise --write round-trips: the token budget, the region and a max_run the prediction fits in are written,
    and `plan` of the file predicts the same time and cost (within 1%) and warns of nothing advise did not show."""
    from launcher.plan.build import build_plan

    out = tmp_path / "job.yaml"
    r = run_cli("advise", "--model", "llama2-13b", "--instances", "4", "--tokens", "10B", "--write", str(out),
                "--output", "json")
    assert r.code == 0, r.err
    best = json.loads(r.out)[0]
    spec = load_spec(out, env={}).spec
    assert spec.training.tokens == 10**10 and spec.cluster.region == "us-west-2"
    assert spec.cluster.max_run == best["max_run"] >= best["performance"]["time_to_train_seconds"]
    plan = build_plan(load_spec(out, env={"SMP_LAUNCH_BUCKET": "bucket-b"}), env={"XDG_STATE_HOME": str(tmp_path)})
    assert plan.training_time.total_seconds == pytest.approx(best["performance"]["time_to_train_seconds"], rel=0.01)
    assert plan.cost.usd == pytest.approx(best["cost"]["usd"], rel=0.01)
    assert plan.cost.price_region == best["cost"]["price_region"] == "us-east-1"
    assert plan.estimator.max_run == spec.cluster.max_run and not plan.errors
    shown = {w.split(":", 1)[0] for w in best["warnings"]}
    assert {a.rule for a in plan.advisories if a.severity == "warning"} <= shown
    assert "# Written by `smp-launch advise`" in out.read_text() and "price: us-east-1's figure" in out.read_text()


def test_a_layout_without_memory_headroom_ranks_after_every_one_with_it():
    ranked = advise("llama2-13b", instances=4, budget=Budget(tokens=10**10))
    tight = [i for i, c in enumerate(ranked) if not c.headroom]
    roomy = [i for i, c in enumerate(ranked) if c.headroom]
    assert tight and roomy and max(roomy) < min(tight)
    assert all(c.memory.per_gpu_gb > 0.95 * c.memory.capacity_gb for c in ranked if not c.headroom)
    fastest = min(ranked, key=lambda c: c.time_seconds)
    assert not fastest.headroom  # the fastest of all is at the memory limit, and does not rank first
    assert ranked[0].headroom and ranked[0].as_dict()["headroom"] is True


def test_a_budget_longer_than_one_job_still_ranks_and_says_so(run_cli, tmp_path):
    """1T tokens of a 7B model on one instance is months: every layout is ranked, each says why one job cannot
    hold it, and the spec written for it is refused by plan (SMP080) as the advice warned."""
    ranked = advise("llama2-7b", instances=1)
    assert ranked and all(c.too_long.startswith("SMP080: ") for c in ranked)
    assert "28 days" in ranked[0].too_long and ranked[0].max_run == 28 * 86400
    out = tmp_path / "long.yaml"
    r = run_cli("advise", "--model", "llama2-7b", "--instances", "1", "--write", str(out))
    assert r.code == 0 and "warning SMP080" in r.out
    assert "refused by `plan` as it stands: SMP080" in out.read_text()
    assert run_cli("validate", str(out)).code == 2
