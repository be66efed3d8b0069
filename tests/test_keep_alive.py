"""cluster.keep_alive: a SageMaker managed warm pool, bounded as AWS bounds it and refused with spot."""
import pytest

from launcher.core.errors import SpecError
from launcher.plan.build import build_plan
from launcher.spec import load_spec
from tests.conftest import JOBS


def plan_with(*sets):
    return build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good", *sets]))


@pytest.mark.parametrize("value,seconds", [("600", 600), ("30m", 1800), ("1h", 3600)])
def test_keep_alive_reaches_the_estimator_and_the_predicted_request(value, seconds):
    plan = plan_with(f"cluster.keep_alive={value}")
    assert plan.estimator.to_dict()["keep_alive_period_in_seconds"] == seconds
    assert plan.request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == seconds


def test_no_keep_alive_sends_nothing_and_leaves_the_plan_as_it_was():
    plan = plan_with()
    assert "keep_alive_period_in_seconds" not in plan.estimator.to_dict()
    assert "KeepAlivePeriodInSeconds" not in plan.request["ResourceConfig"]
    assert "KeepAlivePeriodInSeconds" not in plan_with("cluster.keep_alive=0").request["ResourceConfig"]


@pytest.mark.parametrize("value", ["3601", "2h", "-1", "true"])
def test_keep_alive_outside_aws_range_is_refused(value):
    with pytest.raises(SpecError) as err:
        plan_with(f"cluster.keep_alive={value}")
    assert "cluster.keep_alive" in str(err.value.lines())


def test_keep_alive_with_spot_is_refused_citing_aws():
    with pytest.raises(SpecError) as err:
        plan_with("cluster.keep_alive=600", "cluster.spot=true")
    text = "\n".join(err.value.lines())
    assert "spot" in text and "train-warm-pools.html" in text and text.startswith("jobs/llama7b.yaml:")


def test_the_new_field_at_its_default_leaves_an_older_specs_hash_and_tarball_alone():
    """keep_alive 0 (the default) is left out of the spec hash, so a spec written before the field keeps the
    spec-hash tag and the content-addressed source tarball it had; a warm pool does change both."""
    import hashlib
    import json

    from launcher.plan.build import spec_hash

    loaded = load_spec(JOBS / "llama7b.yaml", ["role=Good"])
    before = loaded.spec.model_dump(mode="json", exclude={"extends"})
    del before["cluster"]["keep_alive"]
    del before["templates"]  # likewise a later field; None unless a team brings its own templates
    for section, key in (("cluster", "instance_types"), ("cluster", "queue"), ("cluster", "max_cost"),
                         ("training", "tokens"), ("model", "from_step"), ("output", "save_final_model")):
        if before[section][key] in (None, False, []):  # the fields added after keep_alive, where at their default
            del before[section][key]
    del before["notify"], before["pipeline"]
    if before["cluster"]["backend"] == "auto":  # a later field still: left out at its default
        del before["cluster"]["backend"]
    assert spec_hash(loaded) == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:16]
    # spec.json keeps what the spec set (a rerun replays it), so only it tells an explicit 0 from unset.
    explicit, unset = plan_with("cluster.keep_alive=0").source.files, plan_with().source.files
    assert {k: v for k, v in explicit.items() if k != "spec.json"} == {k: v for k, v in unset.items()
                                                                        if k != "spec.json"}
    assert "keep_alive" not in unset["spec.json"] and "keep_alive" in explicit["spec.json"]
    assert plan_with("cluster.keep_alive=600").source.uri != plan_with().source.uri
