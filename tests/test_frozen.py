"""Frozen all the way down: every nested part of a plan and of the other results refuses to change.

A frozen dataclass only refuses `setattr`; these tests walk into every field, mapping and sequence and
try every way of changing each one, so a dict or list left inside a result is found.
"""
import copy
import dataclasses
import hashlib
import json
import pickle
from datetime import datetime, timezone
from enum import Enum

import pytest
from pydantic import BaseModel

from launcher.core.frozen import FrozenDict, freeze, thaw
from launcher.jobs.failures import FailureClass, classify
from launcher.plan.build import build_plan
from launcher.plan.bundle import SourceBundle
from launcher.plan.sweep import expand, parse_sweeps, plan_sweep
from launcher.rules.advise import advise
from launcher.spec import load_spec
from launcher.submission.role import RoleCheck, RoleVerdict
from tests.conftest import JOBS, MINIMAL

NOW = datetime(2026, 11, 30, 9, 15, 7, tzinfo=timezone.utc)
ARN = "arn:aws:secretsmanager:us-west-2:123456789012:secret:wandb-key-AbCdEf"
# Every collection a plan holds, non-empty, so the walk reaches into each.
FULL = MINIMAL + f"""
role: SmpRole
tags: {{team: nlp}}
environment: {{WANDB_PROJECT: demo, HF_TOKEN: hf_abcdefghijklmnopqrstuvwxyz}}
secrets: {{WANDB_API_KEY: "{ARN}"}}
hyperparameters: {{lr_scale: 2}}
data:
  train: s3://my-bucket/train
  validation: s3://my-bucket/val
  channels: {{extra: s3://my-bucket/extra}}
"""
FULL = FULL.replace("  region: us-west-2\n", "  region: us-west-2\n  subnets: [subnet-0123456789abcdef0]\n"
                    "  security_group_ids: [sg-0123456789abcdef0]\n  kms_key_id: alias/smp\n")
SCALARS = (str, bytes, int, float, bool, type(None), Enum, datetime)
_PROBE = "__probe__"


def _refuses(action) -> bool:
    try:
        action()
    except (TypeError, AttributeError, ValueError):  # FrozenInstanceError is an AttributeError; pydantic's a ValueError
        return True
    return False


def _mapping_mutators(m):
    key = next(iter(m), _PROBE)
    return {
        "setitem": lambda: m.__setitem__(_PROBE, 1), "delitem": lambda: m.__delitem__(key),
        "update": lambda: m.update({_PROBE: 1}), "setdefault": lambda: m.setdefault(_PROBE, 1),
        "pop": lambda: m.pop(key), "popitem": lambda: m.popitem(), "clear": lambda: m.clear(),
        "ior": lambda: m.__ior__({_PROBE: 1}),
    }


def walk(value, path="plan"):
    """(path, part) for `value` and everything inside it: dataclass fields, model fields, mapping values,
    sequence items."""
    yield path, value
    if isinstance(value, SCALARS):
        return
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from walk(getattr(value, f.name), f"{path}.{f.name}")
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from walk(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, f"{path}[{k!r}]")
    elif isinstance(value, (tuple, frozenset)):
        for i, v in enumerate(value):
            yield from walk(v, f"{path}[{i}]")


def assert_frozen(root, name):
    """Every part of `root` refuses every change, and reads the same afterwards."""
    before = json.dumps(thaw_any(root), sort_keys=True, default=str)
    seen = 0
    for path, part in walk(root, name):
        seen += 1
        if isinstance(part, SCALARS):
            continue
        if isinstance(part, (list, set, bytearray)):
            pytest.fail(f"{path} is a mutable {type(part).__name__}")
        if dataclasses.is_dataclass(part):
            assert type(part).__dataclass_params__.frozen, f"{path}: {type(part).__name__} is not a frozen dataclass"
            for f in dataclasses.fields(part):
                assert _refuses(lambda p=part, n=f.name: setattr(p, n, None)), f"{path}.{f.name} can be set"
                assert _refuses(lambda p=part, n=f.name: delattr(p, n)), f"{path}.{f.name} can be deleted"
        elif isinstance(part, BaseModel):
            for field in type(part).model_fields:
                assert _refuses(lambda p=part, n=field: setattr(p, n, None)), f"{path}.{field} can be set"
        elif isinstance(part, dict):
            assert isinstance(part, FrozenDict), f"{path} is a mutable {type(part).__name__}"
            for how, action in _mapping_mutators(part).items():
                assert _refuses(action), f"{path} accepts {how}"
        elif isinstance(part, (tuple, frozenset)):
            pass  # immutable; their items are walked
        else:
            pytest.fail(f"{path}: {type(part).__name__} is not known to be immutable")
    assert json.dumps(thaw_any(root), sort_keys=True, default=str) == before
    return seen


def thaw_any(value):
    if dataclasses.is_dataclass(value):
        return {f.name: thaw_any(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, BaseModel):
        return thaw_any(value.model_dump())
    if isinstance(value, bytes):
        return value.hex()
    return thaw({k: thaw_any(v) for k, v in value.items()} if isinstance(value, dict) else
                [thaw_any(v) for v in value] if isinstance(value, (tuple, list)) else value)


@pytest.fixture
def plan(write_spec):
    p = build_plan(load_spec(write_spec(FULL)), now=NOW)
    p.source, p.request  # noqa: B018 - the cached parts exist before the walk
    return p


def test_every_nested_part_of_a_plan_refuses_to_change(plan):
    assert plan.channels and plan.secrets and plan.estimator.tags and plan.estimator.subnets  # the walk reaches them
    seen = assert_frozen(plan, "plan")
    assert_frozen(plan.source, "plan.source")  # a cached property, not a field
    assert seen > 200


@pytest.mark.parametrize("name", ["llama7b.yaml", "llama70b.yaml", "llama175b.yaml"])
def test_the_example_jobs_plans_are_frozen(name):
    assert_frozen(build_plan(load_spec(JOBS / name), now=NOW), name)


def test_the_distribution_read_from_the_estimator_cannot_drift_from_the_tarball(plan):
    """The plan's distribution, the Estimator's, the tarball's distribution.json and the request's
    mp_parameters are one value: none can be changed after the source is rendered."""
    params = plan.estimator.distribution["smdistributed"]["modelparallel"]["parameters"]
    with pytest.raises(TypeError):
        params["hybrid_shard_degree"] = 2
    shown = json.loads(plan.source.files["distribution.json"])
    assert shown == plan.distribution == plan.estimator.distribution
    assert json.loads(plan.request["HyperParameters"]["mp_parameters"]) == shown["smdistributed"]["modelparallel"][
        "parameters"]


def test_the_request_and_the_json_are_copies_a_caller_may_change(plan):
    request, body = plan.request, plan.to_dict()
    request["RoleArn"] = "changed"
    body["distribution"]["torch_distributed"]["enabled"] = False
    body["estimator"]["tags"].append({"Key": "x", "Value": "y"})
    assert type(request["Tags"]) is list and type(request["VpcConfig"]["Subnets"]) is list
    assert plan.request["RoleArn"] != "changed"
    assert plan.to_dict()["distribution"]["torch_distributed"]["enabled"] is True
    assert {"Key": "x", "Value": "y"} not in plan.to_dict()["estimator"]["tags"]


def test_the_sdk_gets_plain_dicts_and_lists(plan):
    kwargs = plan.estimator.to_dict()
    for path, part in walk(kwargs, "kwargs"):
        assert not isinstance(part, (FrozenDict, tuple)), path
    assert type(kwargs["distribution"]) is dict and type(kwargs["tags"]) is list


def test_json_serialises_the_read_only_types_as_their_plain_twins(plan):
    assert json.loads(json.dumps(plan.distribution)) == thaw(plan.distribution)
    assert json.loads(json.dumps(plan.estimator.tags)) == thaw(plan.estimator.tags)
    assert json.dumps(plan.to_dict(), sort_keys=True) == json.dumps(json.loads(json.dumps(plan.to_dict())),
                                                                    sort_keys=True)


def test_with_source_gives_a_new_plan_running_that_bundle(plan):
    files = {"train.py": "print('stored')\n"}
    bundle = SourceBundle.of(files, b"stored tarball", "s3://my-bucket/smp/code/abc/sourcedir.tar.gz")
    other = plan.with_source(bundle)
    assert other.source is bundle and other.source_uri == bundle.uri
    assert other.request["HyperParameters"]["sagemaker_submit_directory"] == json.dumps(bundle.uri)
    assert plan.source is not bundle and plan.source_uri != bundle.uri  # the first plan is unchanged
    assert plan.request["HyperParameters"]["sagemaker_submit_directory"] == json.dumps(plan.source_uri)
    assert bundle.tarball_sha256 == hashlib.sha256(b"stored tarball").hexdigest()
    assert dataclasses.replace(other, job_name="x").source is bundle  # a variant keeps the bundle it runs
    assert_frozen(other, "other")


def test_sweep_expansions_are_frozen():
    sweeps = parse_sweeps(["smp.random_seed=[1, 2],{a: 1}"])
    expansions = expand([str(JOBS / "llama7b.yaml")], ("training.batch_size=2",), sweeps)
    assert [thaw(e.overrides) for e in expansions] == [{"smp.random_seed": [1, 2]}, {"smp.random_seed": {"a": 1}}]
    for e in expansions:
        assert_frozen(e, f"expansion[{e.index}]")
    assert_frozen(sweeps[0], "sweep")


def test_sweep_plans_are_frozen():
    ranked = plan_sweep([str(JOBS / "llama7b.yaml")], sweeps=["training.batch_size=2,64", "smp.random_seed=[1, 2],3"],
                        now=NOW, env={"AWS_REGION": "us-west-2"})
    assert {c.status for c in ranked} == {"ok", "refused"}
    assert any(isinstance(c.overrides["smp.random_seed"], tuple) for c in ranked)
    for c in ranked:
        assert_frozen(c, f"sweep[{c.index}]")


def test_advised_layouts_are_frozen():
    ranked = advise("llama2-70b", instances=32)
    assert ranked[0].reasons
    for i, layout in enumerate(ranked[:5]):
        assert_frozen(layout, f"advise[{i}]")


def test_role_checks_are_frozen():
    check = RoleCheck(role="Good", verdict="fail", missing=[{"action": "s3:GetObject", "resource": "*",
                                                             "decision": "implicitDeny"}],
                      problems=["no trust"], unknowns=["cannot tell"])
    assert check.verdict is RoleVerdict.FAIL and isinstance(check.missing, tuple)
    assert_frozen(check, "role_check")
    assert check.as_dict()["missing"] == [{"action": "s3:GetObject", "resource": "*", "decision": "implicitDeny"}]
    assert json.loads(json.dumps(check.as_dict()))["verdict"] == "fail"


def test_failures_are_frozen():
    found = classify("Failed", "AlgorithmError: CUDA out of memory", log_tail=["RuntimeError: CUDA out of memory"])
    assert found is not None and found.failure_class is FailureClass.OUT_OF_MEMORY
    assert_frozen(found, "failure")
    assert found.to_dict()["failure_class"] == "out_of_memory"


def test_a_frozen_dict_refuses_every_change_and_copies_as_itself():
    d = freeze({"a": [1, {"b": 2}]})
    assert d == {"a": (1, {"b": 2})} and isinstance(d["a"][1], FrozenDict)
    for how, action in _mapping_mutators(d).items():
        assert _refuses(action), how
    d.__init__({"c": 3})  # a second __init__ does not refill it
    assert d == {"a": (1, {"b": 2})}
    assert copy.copy(d) is d and copy.deepcopy(d) is d and pickle.loads(pickle.dumps(d)) == d
    assert type(d.copy()) is dict and thaw(d) == {"a": [1, {"b": 2}]} and hash(d) == hash(freeze(thaw(d)))
    assert json.dumps(d) == '{"a": [1, {"b": 2}]}'
    assert repr(d) == "FrozenDict({'a': (1, FrozenDict({'b': 2}))})"  # a debugger or a log says it is read-only
    tags = freeze({"tags": {"b", "a"}, "pair": [{"x": [1]}]})  # sets become frozensets, lists tuples, all the way
    assert tags == {"tags": frozenset({"a", "b"}), "pair": ({"x": (1,)},)} and type(tags["tags"]) is frozenset
    assert thaw(tags) == {"tags": {"a", "b"}, "pair": [{"x": [1]}]} and type(thaw(tags)["tags"]) is set


def test_a_queues_runs_events_and_submissions_are_frozen(moto_world):
    """What submit_many returns (PlanRun, its attempts and Submission, with the request sent) and each Event
    it reports: a caller can read them, not change them."""
    from launcher.api import submit_many

    plans = [build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"]), now=NOW)]
    events: list = []
    runs = submit_many(plans, dry_run=True, on_event=events.append)
    assert runs and runs[0].submissions and events
    assert runs[0].submissions[0].request["TrainingJobName"] == plans[0].job_name
    assert assert_frozen(runs, "runs") > 100
    assert assert_frozen(tuple(events), "events") > 10
    plain = runs[0].submissions[0].to_dict()["request"]
    plain["TrainingJobName"] = "changed"  # to_dict() is a plain copy a caller may change
    assert runs[0].submissions[0].request["TrainingJobName"] == plans[0].job_name


def test_a_diffs_changes_are_frozen_and_their_dicts_plain():
    from launcher.orchestrate.provenance import Change, ChangeKind

    change = Change("estimator.tags", {"team": ["nlp", "vision"]}, None, "removed")
    assert change.kind is ChangeKind.REMOVED and change.line().startswith("- estimator.tags: ")
    assert assert_frozen(change, "change") >= 4
    plain = change.to_dict()
    assert plain == {"path": "estimator.tags", "a": {"team": ["nlp", "vision"]}, "b": None, "kind": "removed"}
    plain["a"]["team"].append("x")  # a plain copy
    assert change.a["team"] == ("nlp", "vision")
