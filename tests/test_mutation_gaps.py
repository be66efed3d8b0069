"""Tests for bugs the rest of the suite did not notice: each one fails on a realistic mutation of the core.

The mutation each test kills is named in its docstring; `make mutation` finds more of them.
"""
import ast
import io
import os

import boto3
import pytest
import yaml

import emulator
from launcher.core.aws import Clients
from launcher.core.errors import OVERRIDES, SpecError
from launcher.plan.build import build_plan
from launcher.rules.memory import Layout, activations, logits
from launcher.spec import load_spec
from launcher.spec.presets import PRESETS
from launcher.submission.role import FAIL, check_role
from tests.aws_setup import ACCOUNT
from tests.conftest import JOBS, MINIMAL
from tests.doubles import one_page_paginator

L7 = PRESETS["llama2-7b"].architecture
P4D = "ml.p4d.24xlarge"


def test_a_bad_value_a_child_overrides_is_reported_at_the_child(write_spec):
    """Kills: the base's marks winning over the child's when the two files merge."""
    write_spec("name: base-job\nsmp:\n  backend: nccl\n  hybrid_shard_degree: 8\n", "base.yaml")
    child = write_spec("extends: base.yaml\n" + MINIMAL + "smp:\n  backend: smdp\n")
    with pytest.raises(SpecError) as err:
        load_spec(child)
    (problem,) = err.value.problems
    assert problem.path == "smp.backend" and "did you mean 'smddp'" in problem.message
    assert problem.mark.file.endswith("job.yaml")
    assert (problem.mark.line, problem.mark.col) == (_line_of(child, "smdp"), 12)


def test_a_bad_value_only_the_base_holds_is_reported_at_the_base(write_spec):
    """The other half: a value the child does not override keeps the base's file and line."""
    write_spec("smp:\n  hybrid_shard_degree: 8\n  backend: smdp\n", "base.yaml")
    child = write_spec("extends: base.yaml\n" + MINIMAL + "smp:\n  hybrid_shard_degree: 4\n")
    with pytest.raises(SpecError) as err:
        load_spec(child)
    (problem,) = err.value.problems
    assert problem.mark.file.endswith("base.yaml") and (problem.mark.line, problem.mark.col) == (3, 12)


def _line_of(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


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


def test_context_parallelism_splits_the_logits_too():
    """Kills: context parallelism dropped from the logits term (TP alone was checked)."""
    whole = logits(L7, Layout(P4D, 8, batch_size=2))
    assert whole == 14 * 2 * 4096 * 32000
    assert logits(L7, Layout(P4D, 4, batch_size=2, context_parallel=2)) == pytest.approx(whole / 2)
    assert logits(L7, Layout(P4D, 2, batch_size=2, tensor_parallel=2, context_parallel=2)) == pytest.approx(whole / 4)


HOSTILE_TRAIN = [
    "s3://my-bucket/x'; open('pwned', 'w').close() #",
    's3://my-bucket/x"; open("pwned", "w").close() #',
    "s3://my-bucket/x'''; open('pwned', 'w').close(); '''",
    "s3://my-bucket/a'b\"c\\'d\\\\ {{ data.train }} #",
    "s3://my-bucket/x\nopen('pwned', 'w').close()",
    "s3://my-bucket/x\r\n\t'\\x00",
]


def _train_data(script: str) -> tuple[object, str]:
    """TRAIN_DATA's value in the script, and the physical lines its assignment sits on."""
    lines = script.splitlines()
    for node in ast.parse(script).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["TRAIN_DATA"]:
            assert isinstance(node.value, ast.Constant), ast.dump(node.value)
            return node.value.value, "\n".join(lines[node.lineno - 1:node.end_lineno])
    raise AssertionError("train.py has no TRAIN_DATA assignment")


def _shape(source: str, replace: str, by: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == replace:
            node.value = by
    return ast.dump(tree)


@pytest.mark.parametrize("train", HOSTILE_TRAIN, ids=range(len(HOSTILE_TRAIN)))
def test_data_train_enters_the_script_as_one_exact_string_constant(write_spec, train, tmp_path, monkeypatch):
    """Kills: data.train spliced into train.py as text (quotes in an S3 key then become code)."""
    benign = "s3://my-bucket/plain/prefix"
    spec = yaml.safe_load(MINIMAL)
    try:
        hostile = load_spec(write_spec(yaml.safe_dump({**spec, "data": {"train": train}}), "hostile.yaml"))
    except SpecError:
        pytest.skip("the spec loader refuses this value, so it never reaches a script")
    plain = load_spec(write_spec(yaml.safe_dump({**spec, "data": {"train": benign}}), "plain.yaml"))
    hostile_files, plain_files = build_plan(hostile).source.files, build_plan(plain).source.files
    value, source = _train_data(hostile_files["train.py"])
    assert value == train
    for name, content in hostile_files.items():
        if name.endswith(".py"):  # the same program as with a plain prefix: only the constant differs
            assert _shape(content, train, benign) == _shape(plain_files[name], benign, benign), name
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(source, "train.py", "exec"), namespace)  # the assignment's own lines: nothing else runs
    assert namespace["TRAIN_DATA"] == train and not (tmp_path / "pwned").exists()


def test_quotes_in_data_train_pass_the_spec_loader(write_spec):
    """So the test above never skips its quote cases: the S3 pattern allows anything after the bucket."""
    for train in HOSTILE_TRAIN[:4]:
        spec = {**yaml.safe_load(MINIMAL), "data": {"train": train}}
        assert load_spec(write_spec(yaml.safe_dump(spec))).spec.data.train == train


class _NoSimulation:
    """IAM where simulation is refused: the cross-account problem alone must still decide the verdict."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def simulate_principal_policy(self, **_):
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "SimulatePrincipalPolicy")

    def get_paginator(self, name):
        return one_page_paginator(getattr(self, name))


@pytest.mark.parametrize("simulate", [True, False], ids=["simulated", "simulation-denied"])
def test_a_role_arn_from_another_account_fails(aws, simulate):
    """Kills: a role ARN whose account differs from the role found getting "cannot tell" (or "pass")."""
    other = "210987654321"
    assert other != ACCOUNT
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", [f"role=arn:aws:iam::{other}:role/Good"]))
    clients = Clients(region="us-west-2")
    iam = clients.iam if simulate else _NoSimulation(clients.iam)
    check = check_role(plan, iam, clients.sts)
    assert check.verdict == FAIL
    assert any(other in p and ACCOUNT in p for p in check.problems), check.problems


# -- survivors of `make mutation` (benchmarks/mutation.py), each killed here ----------------------

def test_a_generic_type_error_is_one_lowercase_sentence_with_the_value(write_spec):
    """Kills loader: the first letter of pydantic's message taken from the wrong index."""
    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), ["training.max_steps=[1]"])
    (problem,) = err.value.problems
    assert problem.path == "training.max_steps"
    assert problem.message.startswith("input should be a valid integer"), problem.message


def test_offloading_keeps_two_layer_inputs_by_default():
    """Kills memory: the default activation_loading_horizon (2, SMP v2's default) changed."""
    sbh = 4096 * 4 * L7.hidden_width
    offload = Layout(P4D, 8, batch_size=4, activation_offloading=True)
    assert activations(L7, offload) == pytest.approx(2 * 2 * sbh + 34 * sbh)


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


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_is_for_a_terminal_and_never_for_json_lines(monkeypatch):
    """Kills tail: the auto colour choice ignoring --output json (or the terminal, or NO_COLOR)."""
    from launcher.jobs.tail import Polling, RateLimiter, follow
    from tests.emulation import VirtualClock

    monkeypatch.delenv("NO_COLOR", raising=False)
    clock = VirtualClock()
    emulator.set_clock(clock)
    try:
        with emulator.mocked():
            emulator.add_job(emulator.EmulatedJob("tty", hosts=2, training=3, decoy=False),
                             boto3.client("sagemaker", region_name="us-west-2"))
            clock.t += 30

            def printed(out, **kw):
                limiter = RateLimiter(2.0, clock=clock, sleep=clock.sleep)
                follow("tty", Clients(region="us-west-2"), out=out, err=io.StringIO(), follow=False, **kw,
                       polling=Polling(clock=clock, sleep=clock.sleep, limiter=limiter))
                return out.getvalue()

            assert "\x1b[36m[algo-1]" in printed(_Terminal())
            assert "\x1b[" not in printed(io.StringIO())
            as_json = printed(_Terminal(), as_json=True)
            assert "\x1b" not in as_json and as_json.lstrip().startswith("{")
            monkeypatch.setenv("NO_COLOR", "1")
            assert "\x1b[" not in printed(_Terminal())
    finally:
        emulator.set_clock(None)


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


def test_gathered_layers_hold_only_the_experts_on_this_rank():
    """Kills memory: experts per rank computed as num_experts * EP instead of num_experts // EP."""
    from launcher.rules.memory import gathered_units

    mix = PRESETS["mixtral-8x7b"].architecture
    lay = Layout(P4D, 4, expert_parallel=2)
    root = mix.embedding_parameters + mix.hidden_width
    assert gathered_units(mix, lay) == pytest.approx(2 * (3 * mix.layer_parameters(experts=4) + root))


def test_the_role_check_counts_each_action_it_simulated(aws):
    """Kills iam: the caller's PassRole counted as more than one checked action."""
    from launcher.submission.role import required_permissions

    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"]))
    clients = Clients(region="us-west-2")
    check = check_role(plan, clients.iam, clients.sts)
    expected = sum(len(actions) for _, actions in required_permissions(plan, ACCOUNT)) + 1
    assert check.verdict == "pass" and check.checked == expected


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


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 1e-300, -0.0])
def test_every_float_becomes_a_literal_that_evaluates_to_itself(value):
    """Kills render: infinities written as bare `inf` (a NameError in the script) when only NaN is special-cased."""
    import math

    from launcher.render.files import py_literal

    back = eval(py_literal(value), {"__builtins__": {"float": float}})  # noqa: S307 - our own literal
    if math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value and math.copysign(1, back) == math.copysign(1, value)


def test_a_bad_second_set_names_the_second_set(write_spec):
    """Kills loader: `--set` expressions numbered from the wrong start."""
    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), ["smp.backend=nccl", "smp.backend=smdp"])
    (problem,) = err.value.problems
    assert (problem.mark.file, problem.mark.line) == (OVERRIDES, 2)


def test_decisions_layouts_and_estimates_are_frozen():
    """Kills decisions, memory and engine: a plan's parts made mutable (`frozen=True` dropped)."""
    import dataclasses

    from launcher.rules.decisions import decide
    from launcher.rules.engine import Finding
    from launcher.rules.memory import estimate

    spec = load_spec(JOBS / "llama7b.yaml").spec
    for value, field in ((decide(spec), "backend"), (Layout(P4D, 8), "batch_size"),
                         (estimate(L7, Layout(P4D, 8)), "per_gpu_gb"), (Finding("m", "f"), "message")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, 1)


@pytest.mark.parametrize("arn, expected", [
    ("arn:aws:iam::123456789012:user/bob", "arn:aws:iam::123456789012:user/bob"),
    ("arn:aws:iam::123456789012:role/Admin", "arn:aws:iam::123456789012:role/Admin"),
    ("arn:aws:sts::123456789012:assumed-role/Admin/session-1", "arn:aws:iam::123456789012:role/Admin"),
    ("arn:aws:sts::123456789012:federated-user/bob", None),
    ("not-an-arn", None),
])
def test_the_caller_becomes_the_principal_simulation_accepts(arn, expected):
    """Kills iam: a branch of the caller-ARN conversion inverted (roles, users, assumed roles)."""
    from launcher.submission.role import _caller_arn

    class Sts:
        def get_caller_identity(self):
            return {"Arn": arn}

    assert _caller_arn(Sts()) == expected


def test_an_invalid_degree_lists_the_divisors_of_the_world(write_spec, monkeypatch):
    """Kills checks: the divisor list built from the non-divisors."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    message = _advisories(write_spec, "smp.tensor_parallel_degree=3")["SMP001"].message
    assert "valid values: 1, 2, 4, 8" in message


def test_auto_sharding_divides_by_tensor_times_expert_parallelism(write_spec):
    """Kills decisions: the degrees the automatic sharding degree leaves room for divided, not multiplied."""
    plan = build_plan(load_spec(write_spec(MINIMAL), ["model.preset=mixtral-8x7b", "smp.hybrid_shard_degree=0",
                                                      "smp.tensor_parallel_degree=2", "smp.expert_parallel_degree=2"]))
    assert plan.decisions.hybrid_shard_degree == 2


def test_the_output_path_is_written_and_the_checkpoints_also_read(aws):
    """Kills iam: the output path needing s3:GetObject too (by default a write is a write only)."""
    from launcher.submission.role import required_permissions

    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"]))
    needs = dict(required_permissions(plan, ACCOUNT))
    output = plan.estimator.output_path.rstrip("/")[len("s3://"):]
    checkpoints = plan.estimator.checkpoint_s3_uri.rstrip("/")[len("s3://"):]
    assert needs[f"arn:aws:s3:::{output}/*"] == ("s3:PutObject",)
    assert needs[f"arn:aws:s3:::{checkpoints}/*"] == ("s3:PutObject", "s3:GetObject")


@pytest.mark.parametrize("overrides", [["smp.context_parallel_degree=16", "smp.hybrid_shard_degree=1"],
                                       ["smp.context_parallel_degree=3"]])
def test_context_parallelism_past_the_world_gives_no_memory_estimate(write_spec, monkeypatch, overrides):
    """Kills engine: a degree that exceeds or does not divide the world tolerated when the others' product fits."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    assert build_plan(load_spec(write_spec(MINIMAL), overrides)).memory is None


def test_expert_parallelism_changes_nothing_for_a_dense_model():
    """Kills memory: a dense model's expert parameter count starting from 1, not 0."""
    from launcher.rules.memory import model_states

    assert model_states(L7, Layout(P4D, 8, expert_parallel=2)) == 16 * L7.parameters / 8


def test_a_refused_simulation_names_the_error_code(aws):
    """Kills iam: the reason for "cannot tell" shown as the exception class instead of AWS's error code."""
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"]))
    clients = Clients(region="us-west-2")
    check = check_role(plan, _NoSimulation(clients.iam), clients.sts)
    assert check.unknowns and all("AccessDenied" in u for u in check.unknowns), check.unknowns


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


def test_the_template_list_and_a_nested_output_folder(tmp_path):
    """Kills render: the template list dropped, and the output folder's parents not created."""
    from launcher.render.files import SOURCE_TEMPLATES, template_names, write_source_dir

    assert set(SOURCE_TEMPLATES.values()) <= set(template_names())
    written = write_source_dir({"train.py": "x = 1\n"}, tmp_path / "a" / "b" / "source")
    assert [p.read_text() for p in written] == ["x = 1\n"]
    again = write_source_dir({"train.py": "x = 2\n"}, tmp_path / "a" / "b" / "source")  # an existing folder
    assert [p.read_text() for p in again] == ["x = 2\n"]


def test_an_unthrottled_poll_leaves_the_interval_alone(monkeypatch):
    """Kills tail: the poll interval doubled after a poll with no throttling or retry."""
    from launcher.jobs.tail import LogReader, RateLimiter
    from tests.emulation import VirtualClock

    clock = VirtualClock()
    emulator.set_clock(clock)
    try:
        with emulator.mocked():
            emulator.add_job(emulator.EmulatedJob("calm", hosts=2, training=3, decoy=False),
                             boto3.client("sagemaker", region_name="us-west-2"))
            clock.t += 30
            reader = LogReader("calm", Clients(region="us-west-2").logs,
                               RateLimiter(2.0, clock=clock, sleep=clock.sleep), clock=clock, sleep=clock.sleep)
            for _ in range(3):
                reader.poll()
            assert reader.stats.throttled == reader.stats.retried == 0 and reader.slowdown == 1.0
    finally:
        emulator.set_clock(None)


def test_a_set_keeps_the_file_positions_of_every_other_key(write_spec):
    """Kills loader: `--set` forgetting the file positions of the keys it does not touch."""
    spec = write_spec(MINIMAL + "smp:\n  backend: smdp\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec, ["training.max_steps=10"])
    (problem,) = err.value.problems
    assert problem.mark.file.endswith("job.yaml") and problem.mark.line == _line_of(spec, "smdp")


@pytest.mark.parametrize("version, fires", [("2.2.0", True), ("2.3.1", False)])
def test_fp8_for_mixtral_needs_pytorch_2_3_1(write_spec, monkeypatch, version, fires):
    """Kills checks: the PyTorch version fp8 needs for Mixtral moved."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    found = _advisories(write_spec, "model.preset=mixtral-8x7b", "training.precision=fp8",
                        "cluster.instance_type=ml.p5.48xlarge", "smp.hybrid_shard_degree=8",
                        f"framework.pytorch_version='{version}'")
    assert ("SMP022" in found) == fires, found.get("SMP022")


def test_a_pinned_image_needs_pull_rights_on_its_own_repository(aws):
    """Kills iam: the ECR repository of a pinned image replaced by the SMP image's."""
    from launcher.submission.role import required_permissions

    image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.4.0-gpu-py311"
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good", f"framework.image_uri={image}"]))
    resources = dict(required_permissions(plan, ACCOUNT))
    assert "arn:aws:ecr:us-west-2:763104351884:repository/pytorch-training" in resources
    assert not any("smdistributed-modelparallel" in r for r in resources)


def test_a_plan_and_its_parts_are_frozen():
    """Kills plan: the source bundle, the Estimator arguments, the topology or the plan made mutable."""
    import dataclasses

    plan = build_plan(load_spec(JOBS / "llama7b.yaml"))
    for value, field in ((plan, "job_name"), (plan.source, "uri"), (plan.estimator, "role"),
                         (plan.topology, "instance_count"), (plan.storage, "size_gb"), (plan.advisories[0], "message"),
                         (plan.framework, "image_uri"), (plan.model, "seq_length")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, "x")


def test_a_yaml_error_points_at_its_line_and_column(write_spec):
    """Kills loader: YAML's 0-based marks shown 0-based or off by one."""
    with pytest.raises(SpecError) as err:
        load_spec(write_spec("name: demo\nmodel:\n\tpreset: x\n"))
    (problem,) = err.value.problems
    assert (problem.mark.line, problem.mark.col) == (3, 1) and "'\\t'" in problem.message


def test_a_spec_below_the_working_folder_is_named_relative(write_spec, tmp_path, monkeypatch):
    """Kills loader: the file name in errors lost for a spec under the working folder."""
    write_spec(MINIMAL + "smp:\n  backend: smdp\n", "specs/job.yaml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as err:
        load_spec("specs/job.yaml")
    assert err.value.problems[0].mark.file == os.path.join("specs", "job.yaml")


class _QuietLogs:
    """A Logs client whose pages carry no ResponseMetadata (as a stub or another SDK may send)."""

    def filter_log_events(self, **_):
        return {"events": []}


def test_calm_polls_halve_the_slowdown_and_a_page_without_metadata_is_no_retry():
    """Kills tail: the slowdown eased by a third instead of half; a missing RetryAttempts counted as one."""
    from launcher.jobs.tail import LogReader, RateLimiter
    from tests.emulation import VirtualClock

    clock = VirtualClock()
    reader = LogReader("calm", _QuietLogs(), RateLimiter(2.0, clock=clock, sleep=clock.sleep), clock=clock,
                       sleep=clock.sleep)
    reader.slowdown = 8.0
    reader.poll()
    assert reader.stats.retried == 0 and reader.slowdown == 4.0
    reader.poll()
    assert reader.slowdown == 2.0


def test_the_templates_folder_holds_the_templates():
    """Kills render: the templates folder taken from the wrong search location."""
    from launcher.render.files import SOURCE_TEMPLATES, templates_dir

    assert all((templates_dir() / name).is_file() for name in SOURCE_TEMPLATES.values())


def test_missing_log_permissions_name_the_roles_own_account(aws):
    """Kills iam: the account for the log group's ARN read from the wrong part of the role's ARN."""
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", [f"role={aws.arns['NoPerms']}"]))
    clients = Clients(region="us-west-2")
    check = check_role(plan, clients.iam, clients.sts)
    logs = {m["resource"] for m in check.missing if m["action"].startswith("logs:")}
    assert logs == {f"arn:aws:logs:us-west-2:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs:*"}


def test_a_bad_set_value_points_at_the_value(write_spec):
    """Kills loader: the column of a `--set` value (just after `=`) off by one."""
    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), ["training.max_steps=abc"])
    (problem,) = err.value.problems
    assert (problem.mark.line, problem.mark.col) == (1, len("training.max_steps=") + 1)


def test_degree_one_is_no_parallelism_for_the_model_rules(write_spec, monkeypatch):
    """Kills checks: EP or CP of degree 1 taken as "uses expert/context parallelism"."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    assert "SMP006" not in _advisories(write_spec)
    assert "SMP007" not in _advisories(write_spec, "model.preset=mixtral-8x7b", "smp.hybrid_shard_degree=8")


def test_tensor_parallelism_of_two_without_sharding_uses_nccl(write_spec):
    """Kills decisions: "tensor-parallel-only" needing a degree above 2."""
    plan = build_plan(load_spec(write_spec(MINIMAL), ["smp.hybrid_shard_degree=1", "smp.tensor_parallel_degree=2"]))
    assert plan.decisions.backend == "nccl"


def test_a_rate_limit_of_zero_is_refused():
    """Kills tail: a zero rate accepted (every call would then wait forever)."""
    from launcher.jobs.tail import RateLimiter

    with pytest.raises(ValueError):
        RateLimiter(0)
    assert RateLimiter(0.5).rate == 0.5


def test_rules_are_frozen():
    """Kills engine: the rule registry's entries made mutable."""
    import dataclasses

    from launcher.rules import RULES

    with pytest.raises(dataclasses.FrozenInstanceError):
        RULES[0].severity = "info"


class _ThrottledOnce:
    """A Logs client that refuses its first read with ThrottlingException, then answers."""

    def __init__(self):
        self.calls = 0

    def filter_log_events(self, **_):
        from botocore.exceptions import ClientError

        self.calls += 1
        if self.calls == 1:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "FilterLogEvents")
        return {"events": []}


def test_a_throttled_poll_backs_off_one_to_two_seconds_and_doubles_the_interval():
    """Kills tail: the first backoff's base or the interval's doubling changed."""
    import random

    from launcher.jobs.tail import LogReader, RateLimiter
    from tests.emulation import VirtualClock

    clock = VirtualClock()
    slept: list[float] = []
    notes: list[str] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.sleep(seconds)

    reader = LogReader("busy", _ThrottledOnce(), RateLimiter(1000.0, clock=clock, sleep=clock.sleep), clock=clock,
                       sleep=sleep, rng=random.Random(3), notify=notes.append)
    reader.poll()
    assert reader.stats.throttled == 1 and reader.slowdown == 2.0
    backoffs = [s for s in slept if s >= 0.5]
    assert len(backoffs) == 1 and 1.0 <= backoffs[0] <= 2.0 and any("throttling" in n for n in notes)


def test_a_global_batch_fix_of_exactly_one_sequence_is_offered(write_spec, monkeypatch):
    """Kills checks: a batch size of 1 not offered when it is exactly what brings the batch to 4 Mi."""
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    found = _advisories(write_spec, "cluster.instance_count=128", "training.batch_size=2")
    assert "lower training.batch_size to 1 (4,194,304 tokens" in found["SMP040"].message
