"""Sweeps: --sweep parsing and typing, the cartesian expansion, refusal reasons, ranking, the JSON list."""
import json

import pytest

from launcher.cli.submit import shell_reasons
from launcher.core.errors import UsageError
from launcher.core.frozen import thaw
from launcher.plan.sweep import expand, parse_sweep, parse_sweeps, plan_sweep
from tests.conftest import JOBS

SPEC = str(JOBS / "llama7b.yaml")
SETS = ["role=Good", "smp.hybrid_shard_degree=0"]
GRID = ["smp.tensor_parallel_degree=1,2,3", "training.batch_size=2,4,64"]


def test_the_expansion_is_the_cartesian_product_last_key_fastest():
    plans = expand([SPEC, SPEC], ["role=Good"], parse_sweeps(["a.b=1,2", "c.d=x,y,z"]))
    assert len(plans) == 12 and [p.index for p in plans] == list(range(12))
    assert [dict(p.overrides) for p in plans[:3]] == [{"a.b": 1, "c.d": "x"}, {"a.b": 1, "c.d": "y"},
                                                      {"a.b": 1, "c.d": "z"}]
    assert plans[0].sets == ("role=Good", "a.b=1", "c.d=x")  # the user's --set first: it applies to every plan


def test_values_are_typed_as_yaml_like_set_and_commas_inside_brackets_or_quotes_do_not_split():
    sweep = parse_sweep("k=1e-4,true,null,'a,b',[1, 2],{x: 1},0x10,2", 1)
    assert sweep.values == ("1e-4", "true", "null", "'a,b'", "[1, 2]", "{x: 1}", "0x10", "2")
    typed = [thaw(e.overrides)["k"] for e in expand([SPEC], (), [sweep])]
    assert typed == [1e-4, True, None, "a,b", [1, 2], {"x": 1}, 16, 2]
    assert sweep.columns == (3, 8, 13, 18, 24, 31, 38, 43)


@pytest.mark.parametrize("expr,text", [("novalue", "expected KEY.PATH=VALUE1"), ("a..b=1", "expected KEY.PATH"),
                                       ("a=1,,2", "sweeps:1:5: a: an empty value"),
                                       ("extends=x.yaml", "extends cannot be swept")])
def test_a_malformed_sweep_is_a_usage_error(expr, text):
    from launcher.cli.options import FLAGS

    with pytest.raises(UsageError) as err:
        parse_sweeps([expr])
    assert text in str(err.value) and err.value.exit_code == 2
    shell = err.value.worded(FLAGS)  # the library names its argument; a shell reads the flag
    assert shell.startswith("--sweep:1:") and "sweeps" not in shell


def test_a_key_swept_twice_or_also_set_is_refused():
    with pytest.raises(UsageError, match="swept twice"):
        parse_sweeps(["a=1,2", "a=3"])
    with pytest.raises(UsageError, match="both swept and set by overrides") as both:
        parse_sweeps(["training.batch_size=1,2"], ["training.batch_size=4"])
    assert "both swept and set by --set" in both.value.worded({"overrides": "--set", "sweeps": "--sweep"})
    with pytest.raises(UsageError, match="at most 256"):
        parse_sweeps(["a=" + ",".join(map(str, range(20))), "b=" + ",".join(map(str, range(20)))])


def test_a_misspelt_swept_key_is_refused_with_did_you_mean_at_its_flag():
    cands = plan_sweep([SPEC], ["role=Good"], ["smp.tensor_paralel_degree=1,2"])
    assert [c.status for c in cands] == ["refused", "refused"] and all(c.plan is None for c in cands)
    (reason,) = cands[0].reasons
    assert reason.startswith("sweeps:1:") and shell_reasons(cands[0])[0] == "--sweep" + reason.removeprefix("sweeps")
    assert "did you mean 'tensor_parallel_degree'" in reason


def test_a_bad_value_points_at_that_value_in_its_flag():
    cands = plan_sweep([SPEC], ["role=Good"], ["training.batch_size=2,x"])
    ok, bad = cands
    assert ok.status == "ok" and bad.status == "refused"
    assert shell_reasons(bad) == ["--sweep:1:23: training.batch_size: input should be a valid integer (got 'x')"]
    assert bad.reasons == ("sweeps:1:23: training.batch_size: input should be a valid integer (got 'x')",)


def test_impossible_layouts_are_refused_with_one_positioned_line_per_reason_and_the_rest_ranked():
    cands = plan_sweep([SPEC], SETS, GRID, by="tokens")
    got = [(c.rank, c.overrides["smp.tensor_parallel_degree"], c.overrides["training.batch_size"], c.status)
           for c in cands]
    # fits first, then most tokens per step, then most headroom (tp 2 x batch 4 has more than tp 1 x batch 2)
    assert got == [(1, 1, 4, "ok"), (2, 2, 4, "ok"), (3, 1, 2, "ok"), (4, 2, 2, "ok"),
                   (None, 1, 64, "refused"), (None, 2, 64, "refused"), (None, 3, 2, "refused"),
                   (None, 3, 4, "refused"), (None, 3, 64, "refused")]
    ranked = [c for c in cands if c.ok]
    assert [c.global_batch_tokens for c in ranked] == [131072, 65536, 65536, 32768]
    assert ranked[1].headroom_gb > ranked[2].headroom_gb
    assert shell_reasons(cands[4])[0].startswith("--sweep:2:25: training.batch_size: SMP060 ")  # does not fit
    assert shell_reasons(cands[6])[0].startswith("--sweep:1:32: smp.tensor_parallel_degree: SMP001 ")
    assert all("\n" not in r for c in cands for r in c.reasons)
    names = [c.plan.job_name for c in cands if c.plan]
    assert len(set(names)) == len(names)  # every plan has its own job name


def test_the_api_takes_a_mapping_of_values():
    import launcher

    cands = launcher.plan_sweep([SPEC], {"role": "Good"}, {"training.batch_size": [2, 4]})
    assert [c.overrides for c in cands] == [{"training.batch_size": 4}, {"training.batch_size": 2}]


def test_dry_run_json_is_a_list_with_one_object_per_plan_and_nothing_is_created(moto_world, run_cli):
    r = run_cli("submit", SPEC, *(a for s in SETS for a in ("--set", s)), *(a for s in GRID for a in ("--sweep", s)),
                "--dry-run", "--output", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert len(data) == 9 and [d["status"] for d in data] == ["ok"] * 4 + ["refused"] * 5
    best = data[0]
    assert best["overrides"] == {"smp.tensor_parallel_degree": 1, "training.batch_size": 4}
    assert best["rank"] == 1 and best["reasons"] == [] and best["state"] == "dry_run" and not best["started"]
    assert best["request"]["TrainingJobName"] == best["job_name"] and best["memory"]["fits"]  # the plan's own keys
    assert best["submission"]["dry_run"] is True
    refused = data[-1]
    assert refused["rank"] is None and refused["state"] == "not_started" and "request" not in refused
    assert refused["reasons"][0].startswith("--sweep:1:32: ")
    assert "SMP001" in r.err and "[refused: smp.tensor_parallel_degree=3 training.batch_size=64]" in r.err
    assert moto_world.session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_the_table_ranks_plans_for_people(moto_world, run_cli):
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", "training.batch_size=2,64", "--dry-run")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert "1 would start, 1 refused" in lines[0] and lines[0].endswith("; plan: training.batch_size")
    assert lines[1].split()[:3] == ["#", "plan", "status"] and "time/Mtok" in lines[1] and "job" in lines[1]
    first = next(ln for ln in lines if ln.startswith("1 "))
    assert first.split()[1:3] == ["2", "ok"]  # the swept value, in the column of the key the title names
    assert any(ln.startswith("- ") and ln.split()[1:3] == ["64", "refused"] for ln in lines)
    assert "SMP060" in r.err and "[refused: training.batch_size=64]" in r.err  # the reasons, whole, on stderr
    assert all(len(ln) <= 100 for ln in lines[1:])  # not a terminal: 100 columns


def test_nothing_is_submitted_when_every_plan_is_refused_or_strict_and_one_is(moto_world, run_cli):
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", "smp.tensor_parallel_degree=3,5")
    assert r.code == 2 and "nothing was submitted: every plan was refused" in r.err
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", "training.batch_size=2,64", "--strict",
                "--output", "json")
    assert r.code == 2 and "--strict: 1 of 2 refused" in r.err
    assert [d["state"] for d in json.loads(r.out)] == ["not_started", "not_started"]
    assert moto_world.session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_with_several_spec_files_each_plan_is_named_by_its_file_then_its_values(run_cli):
    r = run_cli("submit", SPEC, str(JOBS / "llama70b.yaml"), "--set", "role=Good",
                "--sweep", "training.batch_size=2,64", "--strict")
    assert r.code == 2 and "nothing was submitted: --strict: 2 of 4 refused" in r.err
    refused = [ln.rsplit(" [refused: ", 1)[1] for ln in r.err.splitlines() if " [refused: " in ln]
    assert refused == ["llama7b.yaml training.batch_size=64]", "llama70b.yaml training.batch_size=64]"]
    rows = [" ".join(ln.split()[1:3]) for ln in r.out.splitlines() if ln.split()[:1] in (["1"], ["2"], ["-"])]
    assert sorted(rows) == ["llama70b.yaml, 2", "llama70b.yaml, 64", "llama7b.yaml, 2", "llama7b.yaml, 64"]


def test_local_refuses_sweep_options(run_cli):
    r = run_cli("submit", SPEC, "--local", "--sweep", "training.batch_size=2,4")
    assert r.code == 2 and "--local runs one spec here" in r.err


def test_plans_rank_by_predicted_time_per_token_by_default():
    """The default order: those that fit, then the least predicted time to train a token (batch 4 trains twice
    the tokens of batch 2 in fewer than twice the seconds), so plans of different batches compare fairly."""
    cands = plan_sweep([SPEC], SETS, GRID)
    ranked = [c for c in cands if c.ok]
    per_token = [c.per_token("time") for c in ranked]
    assert per_token == sorted(per_token) and all(t < float("inf") for t in per_token)
    assert [c.rank for c in ranked] == [1, 2, 3, 4]
    best = ranked[0].to_dict()
    assert best["time_to_train_seconds"] == round(ranked[0].plan.training_time.total_seconds, 1)
    assert best["performance"]["tokens_per_second_per_gpu"] > 0 and "usd" in best
    by_tokens = [c for c in plan_sweep([SPEC], SETS, GRID, by="tokens") if c.ok]
    assert {c.index for c in by_tokens} == {c.index for c in ranked}
    with pytest.raises(UsageError, match="not one of time, cost, tokens"):
        plan_sweep([SPEC], SETS, GRID, by="speed")


def test_by_cost_falls_back_to_time_without_a_price():
    from launcher.plan.sweep import ranked_by

    cands = plan_sweep([SPEC], SETS + ["cluster.region=sa-east-1", "cluster.instance_type=ml.p5.48xlarge"],
                       ["training.batch_size=2,4"], by="cost")
    assert ranked_by(cands, "cost") == "time" and all(c.usd is None for c in cands)
    priced = plan_sweep([SPEC], SETS + ["cluster.region=us-east-1"], ["training.batch_size=2,4"], by="cost")
    assert ranked_by(priced, "cost") == "cost"
    costs = [c.per_token("cost") for c in priced]
    assert costs == sorted(costs)


def test_the_plan_cap_counts_every_spec_times_the_sweep():
    seeds = "training.seed=" + ",".join(map(str, range(129)))  # 129 plans per spec: under the cap alone
    assert len(parse_sweeps([seeds])) == 1
    with pytest.raises(UsageError, match=r"^258 plans; at most 256 at once$"):
        plan_sweep([SPEC, SPEC], ["role=Good"], [seeds])


def test_a_value_that_is_not_yaml_stays_the_text_given():
    from launcher.plan.sweep import typed

    assert typed("[1, 2") == "[1, 2" and typed("{a: b") == "{a: b" and typed("[1, 2]") == [1, 2]


def test_a_plan_refused_outside_the_spec_is_listed_with_its_reason_and_no_plan(tmp_path):
    team = tmp_path / "team"
    team.mkdir()
    (team / "README.md").write_text("our templates go here\n")
    candidates = plan_sweep([SPEC], ["role=Good", f"templates={team}"], ["training.batch_size=2,4"])
    assert len(candidates) == 2 and all(c.plan is None for c in candidates)
    assert all(len(c.reasons) == 1 and "holds no template (*.j2)" in c.reasons[0] for c in candidates)
