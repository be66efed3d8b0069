"""Submit against moto in-process: the role check, the request contract, uploads, errors."""
import io
import tarfile
from datetime import datetime, timezone
from types import SimpleNamespace

import boto3
import pytest
from botocore.exceptions import ClientError, NoCredentialsError

from launcher import api
from launcher.core.aws import AwsError, Clients, QuotaError, explain
from launcher.core.errors import SpecError, UsageError
from launcher.core.frozen import thaw
from launcher.plan.build import build_plan
from launcher.spec import load_spec
from launcher.submission.create import submit as submit_plan
from launcher.submission.role import RoleRefused, RoleVerdict, check_role
from tests.aws_setup import BUCKET
from tests.conftest import BACKENDS, JOBS, SDK_MAJOR, TELEMETRY
from tests.doubles import one_page_paginator


def submit(loaded, clients, *, now=None, **kw):
    """What `smp-launch submit` does: the plan for the clients' region, then submit that plan."""
    plan = api.build_plan(loaded, region=clients.region, profile=clients.profile, env=clients.env, now=now)
    return submit_plan(plan, clients, **kw)

NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=timezone.utc)


def spec(*overrides, role="Good", job="llama7b.yaml"):
    return load_spec(JOBS / job, [f"role={role}", *overrides])


def run(loaded, **kw):
    clients = Clients(region="us-west-2")
    captured = {}
    clients.session.events.register("provide-client-params.sagemaker.CreateTrainingJob",
                                    lambda params, **_: captured.update(params))
    result = submit(loaded, clients, now=kw.pop("now", NOW), **kw)
    return result, captured


VARIANTS = {
    "reference": [],
    "spot-kms-vpc-channels": ["cluster.spot=true", "cluster.max_wait=2d", "cluster.kms_key_id=alias/smp",
                              "cluster.subnets=[subnet-0123456789abcdef0]",
                              "cluster.security_group_ids=[sg-0123456789abcdef0]",
                              f"data.train=s3://{BUCKET}/data/train", f"data.validation=s3://{BUCKET}/data/val",
                              "hyperparameters={lr_hint: 0.5, tag: x, flag: true}", "environment={A: b}"],
    "p5-pinned": ["cluster.instance_type=ml.p5.48xlarge", "framework.pytorch_version='2.5.1'"],
    "warm-pool": ["cluster.keep_alive=30m"],
}


@pytest.mark.parametrize("kind", BACKENDS, ids=str)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_sdk_sends_exactly_the_predicted_request(moto_world, variant, kind):
    """The contract, per backend: what the emulator received is what `plan` shows (secrets aside: none here)."""
    from emulator.sagemaker import received

    for key in ("data/train/part-0.npy", "data/val/part-0.npy"):  # the channels hold data (submit checks they do)
        moto_world.session.client("s3").put_object(Bucket=BUCKET, Key=key, Body=b"0")
    result, sent = run(spec(*VARIANTS[variant], f"cluster.backend={kind}"), skip_role_check=True)
    predicted = thaw(result.request)  # the read-only request's plain twin (JSON has lists, not tuples)
    assert sent, "CreateTrainingJob was not called"
    got = received(result.job_name)
    assert got == sent
    assert set(got) == set(predicted)
    for key in predicted:
        assert got[key] == predicted[key], key
    assert "smdistributed-modelparallel" in sent["AlgorithmSpecification"]["TrainingImage"]
    if variant == "warm-pool":
        assert sent["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 1800
    else:
        assert "KeepAlivePeriodInSeconds" not in sent["ResourceConfig"]


def test_first_and_repeated_submit(moto_world):
    first, _ = run(spec())
    second, _ = run(spec(), now=NOW.replace(second=30))
    assert first.uploaded and not second.uploaded
    assert first.source_uri == second.source_uri and first.job_name != second.job_name
    # the tarball once: what else is put is ModelTrainer's drivers, under each job's own prefix
    drivers = SDK_MAJOR >= 3
    assert first.aws_calls.count("s3.PutObject") - second.aws_calls.count("s3.PutObject") == 1
    assert ("s3.PutObject" in second.aws_calls) == drivers
    assert first.aws_calls.count("sagemaker.CreateTrainingJob") == 1
    assert second.aws_calls.count("sagemaker.CreateTrainingJob") == 1
    listed = moto_world.session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    names = [j["TrainingJobName"] for j in listed]
    assert sorted(names) == sorted([first.job_name, second.job_name])


def test_the_uploaded_tarball_is_the_rendered_source(moto_world):
    loaded = spec()
    result, _ = run(loaded)
    bucket, key = result.source_uri[5:].split("/", 1)
    body = moto_world.session.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        script = tar.extractfile("train.py").read().decode()
    assert script == build_plan(loaded, now=NOW).source.files["train.py"]


def test_dry_run_writes_nothing(moto_world):
    result, sent = run(spec(), dry_run=True)
    assert not sent and not result.uploaded
    assert not any(c in result.aws_calls for c in ("s3.PutObject", "sagemaker.CreateTrainingJob"))
    assert "iam.SimulatePrincipalPolicy" in result.aws_calls and result.role_check.verdict == RoleVerdict.PASS
    assert "Contents" not in moto_world.session.client("s3").list_objects_v2(Bucket=BUCKET)
    assert moto_world.session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def role_check(role, *overrides):
    plan = build_plan(spec(*overrides, role=role))
    clients = Clients(region="us-west-2")
    return check_role(plan, clients.iam, clients.sts)


def test_a_good_role_passes(moto_world):
    check = role_check("Good")
    assert check.verdict == RoleVerdict.PASS and check.role_arn == moto_world.arns["Good"] and check.checked >= 10


def test_a_role_sagemaker_cannot_assume_fails(moto_world):
    check = role_check("NoTrust")
    assert check.verdict == RoleVerdict.FAIL and any("trust policy" in p for p in check.problems)


def test_missing_permissions_are_listed_with_their_resources(moto_world):
    check = role_check(moto_world.arns["NoPerms"])
    assert check.verdict == RoleVerdict.FAIL
    missing = {(m["action"], m["resource"]) for m in check.missing}
    assert ("ecr:BatchGetImage",
            "arn:aws:ecr:us-west-2:658645717510:repository/smdistributed-modelparallel") in missing
    assert any(a.startswith("logs:") for a, _ in missing)
    assert not any(a.startswith("s3:") for a, _ in missing)


def test_kms_and_vpc_actions_are_checked_when_configured(moto_world):
    check = role_check("Good", *VARIANTS["spot-kms-vpc-channels"])
    actions = {m["action"] for m in check.missing}
    assert check.verdict == RoleVerdict.FAIL and {"kms:Decrypt", "ec2:CreateNetworkInterface"} <= actions
    assert role_check("Good").verdict == RoleVerdict.PASS


def test_a_missing_role_fails(moto_world):
    check = role_check("Nope")
    assert check.verdict == RoleVerdict.FAIL and "does not exist" in check.problems[0]


def test_a_caller_without_pass_role_fails(moto_world):
    moto_world.session.client("iam").delete_user_policy(UserName="moto", PolicyName="pass")
    check = role_check("Good")
    assert check.verdict == RoleVerdict.FAIL and check.missing[0]["action"] == "iam:PassRole (caller)"


class DenySimulation:
    """An IAM client whose caller may not simulate (AccessDenied), everything else real."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def simulate_principal_policy(self, **_):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, "SimulatePrincipalPolicy")

    def get_paginator(self, name):
        return one_page_paginator(getattr(self, name))


def test_cannot_tell_when_the_caller_may_not_simulate(moto_world):
    plan = build_plan(spec())
    clients = Clients(region="us-west-2")
    check = check_role(plan, DenySimulation(clients.iam), clients.sts)
    assert check.verdict == RoleVerdict.UNKNOWN and check.unknowns and not check.missing


def test_submit_goes_on_when_the_role_check_cannot_tell(moto_world):
    clients = Clients(region="us-west-2", overrides={"iam": DenySimulation(boto3.client("iam"))})
    result = submit(spec(), clients, now=NOW)
    assert result.warnings and "cannot tell" in result.warnings[0] and result.job_name


def test_a_failed_role_check_blocks_and_creates_nothing(moto_world):
    with pytest.raises(RoleRefused) as err:
        run(spec(role="NoPerms"))
    assert err.value.exit_code == 3 and "missing ecr:BatchGetImage" in str(err.value)
    assert moto_world.session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    assert "Contents" not in moto_world.session.client("s3").list_objects_v2(Bucket=BUCKET)


def test_skip_role_check_resolves_a_role_name(moto_world):
    result, sent = run(spec(role="NoPerms"), skip_role_check=True)
    assert sent["RoleArn"] == moto_world.arns["NoPerms"] and result.role_check is None


def test_advisor_errors_block_before_any_aws_call(moto_world):
    clients = Clients(region="us-west-2")
    calls = []
    clients.session.events.register("before-call.*.*", lambda model, **_: calls.append(model.name))
    with pytest.raises(SpecError) as err:
        submit(spec("model.preset=llama2-70b"), clients, now=NOW)
    assert "SMP060" in str(err.value) and calls == []


def test_no_role_is_a_usage_error(moto_world, monkeypatch):
    loaded = load_spec(JOBS / "llama7b.yaml")
    with pytest.raises(UsageError) as err:
        submit(loaded, Clients(region="us-west-2"), now=NOW)
    assert "llama7b.yaml: no IAM role: set `role:` in the spec or export SMP_LAUNCH_ROLE" in str(err.value)
    monkeypatch.setenv("SMP_LAUNCH_ROLE", "Good")
    assert submit(loaded, Clients(region="us-west-2"), now=NOW, dry_run=True).role_check.verdict == RoleVerdict.PASS


def test_a_missing_bucket_is_something_the_account_lacks_exit_3_not_an_aws_refusal(moto_world):
    with pytest.raises(api.BucketMissing) as err:
        run(spec("output.path=s3://no-such-bucket-here/x"))
    assert "no-such-bucket-here does not exist" in str(err.value) and err.value.exit_code == 3
    assert isinstance(err.value, api.PreflightError) and not isinstance(err.value, AwsError)


def test_bucket_in_another_region(moto_world):
    moto_world.session.client("s3", region_name="eu-west-1").create_bucket(
        Bucket="eu-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    with pytest.raises(api.BucketMissing) as err:
        run(spec("output.path=s3://eu-bucket/x"))
    assert "is in eu-west-1 but the job runs in us-west-2" in str(err.value) and err.value.exit_code == 3


def test_every_exit_3_error_is_a_preflight_error_and_none_is_an_aws_error():
    """One meaning per exit code: what the account lacks is a PreflightError (3), a refused call an AwsError (4)."""
    from launcher.core.errors import EXIT_AWS, EXIT_PREFLIGHT, LauncherError

    errors = {name: getattr(api, name) for name in api.__all__ if isinstance(getattr(api, name), type)
              and issubclass(getattr(api, name), LauncherError)}
    three = {name for name, cls in errors.items() if cls.exit_code == EXIT_PREFLIGHT}
    assert three == {name for name, cls in errors.items() if issubclass(cls, api.PreflightError)}
    assert {"BucketMissing", "RoleRefused", "QuotaError", "OverQuota", "NotOffered", "EmptyChannel"} <= three
    assert all(cls.exit_code == EXIT_AWS for name, cls in errors.items() if issubclass(cls, AwsError))


def failing_start(code, message):
    def start(*_args, **_kw):
        raise ClientError({"Error": {"Code": code, "Message": message}}, "CreateTrainingJob")
    return start


def test_quota_errors_say_which_quota_and_how_to_raise_it(moto_world):
    msg = ("The account-level service limit 'ml.p4d.24xlarge for training job usage' is 0 Instances, with current "
           "utilization of 0 Instances and a request delta of 1 Instances.")
    with pytest.raises(QuotaError) as err:
        run(spec(), start=failing_start("ResourceLimitExceeded", msg))
    assert err.value.exit_code == 3
    assert "ml.p4d.24xlarge for training job usage" in str(err.value) and "Service Quotas" in str(err.value)


def test_validation_exception_is_one_sentence(moto_world):
    with pytest.raises(AwsError) as err:
        run(spec(), start=failing_start("ValidationException", "Instance type is not supported"))
    assert str(err.value) == "CreateTrainingJob: SageMaker rejected the request: Instance type is not supported"


@pytest.mark.parametrize("exc,expected", [
    (NoCredentialsError(), "no AWS credentials found"),
    (ClientError({"Error": {"Code": "ExpiredToken", "Message": "x"}}, "GetRole"), "session token has expired"),
    (ClientError({"Error": {"Code": "AccessDenied", "Message": "User: x is not authorized"}}, "CreateTrainingJob"),
     "access denied for CreateTrainingJob"),
    (ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "X"), "throttling"),
])
def test_aws_errors_become_sentences(exc, expected):
    err = explain(exc)
    assert expected in str(err) and "\n" not in str(err) and err.exit_code == 4


def test_every_kind_of_aws_failure_is_its_own_sentence_after_the_action():
    from botocore import exceptions as bx

    from launcher.core.aws import QuotaError as Quota

    said = {
        bx.ProfileNotFound(profile="ghost"): "The config profile (ghost) could not be found; check AWS_PROFILE",
        bx.ConnectTimeoutError(endpoint_url="https://sm.example"): "https://sm.example did not answer in time",
        bx.ReadTimeoutError(endpoint_url=""): "AWS did not answer in time (each try timed out)",
        bx.EndpointConnectionError(endpoint_url="https://sm.example"):
            'cannot reach AWS (Could not connect to the endpoint URL: "https://sm.example")',
        ClientError({"Error": {"Code": "Weird", "Message": " odd "}}, "DescribeX"): "DescribeX failed: Weird: odd",
        ClientError({"Error": {"Code": "403", "Message": ""}}, "GetRole"): "access denied for GetRole: 403. Ask",
        ClientError({"Error": {"Code": "ValidationException", "Message": "bad"}}, "X"):
            "SageMaker rejected the request: bad",
        bx.PartialCredentialsError(provider="env", cred_var="AWS_SECRET"):
            "Partial credentials found in env, missing: AWS_SECRET",
        KeyError("k"): "KeyError: 'k'",
    }
    far = "https://" + "e" * 400  # an endpoint of any length: the sentence quotes it cut short
    long_way = str(explain(bx.EndpointConnectionError(endpoint_url=far)))
    assert long_way.startswith('cannot reach AWS (Could not connect to the endpoint URL: "https://eee')
    assert long_way.endswith("e…); check the network, the region and AWS_ENDPOINT_URL")
    assert len(long_way) == len("cannot reach AWS (); check the network, the region and AWS_ENDPOINT_URL") + 300
    slow = str(explain(bx.ConnectTimeoutError(endpoint_url=far)))
    assert slow.startswith(far[:199] + "… did not answer in time")
    partial = str(explain(bx.PartialCredentialsError(provider="env", cred_var="V" * 900)))
    assert partial == ("Partial credentials found in env, missing: " + "V" * 900)[:499] + "…"
    odd = str(explain(KeyError("k" * 900)))
    assert odd == "KeyError: '" + "k" * 498 + "…"  # 500 characters of what it says
    for exc, sentence in said.items():
        err = explain(exc, "reading job x")
        assert str(err).startswith(f"reading job x: {sentence}") and err.exit_code == 4, (exc, str(err))
    quota = explain(ClientError({"Error": {"Code": "ResourceLimitExceeded", "Message": ""}}, "CreateTrainingJob"))
    assert isinstance(quota, Quota) and quota.exit_code == 3
    assert str(quota).startswith("a SageMaker quota was exceeded. Request an increase in Service Quotas")
    nowhere = explain(bx.NoRegionError(), "reading job x")  # nothing named a region: input, not AWS refusing
    assert str(nowhere).startswith("no AWS region: pass region, set cluster.region") and nowhere.exit_code == 2
    mine = UsageError("already a sentence")
    assert explain(mine, "reading job x") is mine


def test_the_submit_path_keeps_the_sdk_out_of_other_commands():
    import subprocess
    import sys

    code = ("import sys, launcher.submission.create, launcher.submission.role, launcher.render.source,"
            " launcher.plan.request;"
            "print(any(m.split('.')[0] == 'sagemaker' for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_no_region_is_one_actionable_line(moto_world, monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(UsageError) as err:
        submit(spec("cluster.region=null"), Clients(), now=NOW)
    assert "no AWS region" in str(err.value) and err.value.exit_code == 2


@pytest.mark.parametrize("kind", BACKENDS, ids=str)
def test_the_sdk_sends_no_telemetry(moto_world, monkeypatch, kind):
    import importlib

    from launcher.submission import estimator, model_trainer

    (estimator if kind == "estimator" else model_trainer).import_sdk()
    import requests

    telemetry = importlib.import_module(TELEMETRY)

    sent, http = [], []
    monkeypatch.setattr(telemetry, "_send_telemetry_request", lambda *a, **k: sent.append(a))
    monkeypatch.setattr(requests.Session, "send", lambda _s, request, **_: http.append(request.url))
    result, request = run(spec(f"cluster.backend={kind}"))
    assert request and result.job_name and sent == [] and http == []


def test_the_sdk_sends_the_plans_own_prediction_with_only_the_role_arn_filled_in(moto_world):
    """The request `plan` shows is what SageMaker gets, bar the role's ARN, which only IAM knows."""
    clients = Clients(region="us-west-2")
    sent = {}
    clients.session.events.register("provide-client-params.sagemaker.CreateTrainingJob",
                                    lambda params, **_: sent.update(params))
    plan = api.build_plan(spec(role="Good"), region=clients.region, profile=clients.profile, env=clients.env, now=NOW)
    predicted = plan.request
    assert predicted["RoleArn"] == "<ARN of role Good>"
    submit_plan(plan, clients, skip_role_check=True)
    assert sent == {**predicted, "RoleArn": moto_world.arns["Good"]}


def test_submit_output_json_keeps_its_keys(moto_world):
    """`submit --output json` is a contract: Submission.to_dict has the keys (and order) it always had."""
    result, _ = run(spec(), dry_run=True)
    assert list(result.to_dict()) == ["job_name", "region", "console_url", "source_uri", "uploaded", "dry_run",
                                      "aws_calls", "role", "warnings", "request", "remembered", "notes", "quota",
                                      "prices"]
    assert result.to_dict()["aws_calls"] == list(result.aws_calls) and result.to_dict()["notes"] == []


# -- the role check's details: each test fails on a realistic bug (`make mutation`) --------------------------

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
def test_a_role_arn_from_another_account_fails(moto_world, simulate):
    """Kills: a role ARN whose account differs from the role found getting "cannot tell" (or "pass")."""
    from tests.aws_setup import ACCOUNT

    other = "210987654321"
    assert other != ACCOUNT
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", [f"role=arn:aws:iam::{other}:role/Good"]))
    clients = Clients(region="us-west-2")
    iam = clients.iam if simulate else _NoSimulation(clients.iam)
    check = check_role(plan, iam, clients.sts)
    assert check.verdict == RoleVerdict.FAIL
    assert any(other in p and ACCOUNT in p for p in check.problems), check.problems


def test_the_role_check_counts_each_action_it_simulated(moto_world):
    """Kills iam: the caller's PassRole counted as more than one checked action."""
    from launcher.submission.role import required_permissions
    from tests.aws_setup import ACCOUNT

    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"]))
    clients = Clients(region="us-west-2")
    check = check_role(plan, clients.iam, clients.sts)
    expected = sum(len(actions) for _, actions in required_permissions(plan, ACCOUNT)) + 1
    assert check.verdict == "pass" and check.checked == expected


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


def test_the_output_path_is_written_and_the_checkpoints_also_read(moto_world):
    """Kills iam: the output path needing s3:GetObject too (by default a write is a write only)."""
    from launcher.submission.role import required_permissions
    from tests.aws_setup import ACCOUNT

    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"]))
    needs = dict(required_permissions(plan, ACCOUNT))
    output = plan.estimator.output_path.rstrip("/")[len("s3://"):]
    checkpoints = plan.estimator.checkpoint_s3_uri.rstrip("/")[len("s3://"):]
    assert needs[f"arn:aws:s3:::{output}/*"] == ("s3:PutObject",)
    assert needs[f"arn:aws:s3:::{checkpoints}/*"] == ("s3:PutObject", "s3:GetObject")


def test_a_refused_simulation_names_the_error_code(moto_world):
    """Kills iam: the reason for "cannot tell" shown as the exception class instead of AWS's error code."""
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"]))
    clients = Clients(region="us-west-2")
    check = check_role(plan, _NoSimulation(clients.iam), clients.sts)
    assert check.unknowns and all("AccessDenied" in u for u in check.unknowns), check.unknowns


def test_a_pinned_image_needs_pull_rights_on_its_own_repository(moto_world):
    """Kills iam: the ECR repository of a pinned image replaced by the SMP image's."""
    from launcher.submission.role import required_permissions
    from tests.aws_setup import ACCOUNT

    image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.4.0-gpu-py311"
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good", f"framework.image_uri={image}"]))
    resources = dict(required_permissions(plan, ACCOUNT))
    assert "arn:aws:ecr:us-west-2:763104351884:repository/pytorch-training" in resources
    assert not any("smdistributed-modelparallel" in r for r in resources)


def test_missing_log_permissions_name_the_roles_own_account(moto_world):
    """Kills iam: the account for the log group's ARN read from the wrong part of the role's ARN."""
    from tests.aws_setup import ACCOUNT

    plan = build_plan(load_spec(JOBS / "llama7b.yaml", [f"role={moto_world.arns['NoPerms']}"]))
    clients = Clients(region="us-west-2")
    check = check_role(plan, clients.iam, clients.sts)
    logs = {m["resource"] for m in check.missing if m["action"].startswith("logs:")}
    assert logs == {f"arn:aws:logs:us-west-2:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs:*"}


def test_the_role_check_prints_one_safe_line_for_each_finding():
    """Kills iam: RoleCheck.lines() returning nothing, so `check-role` could not print its verdict."""
    from launcher.submission.role import RoleCheck

    check = RoleCheck(role="Good", role_arn="arn:aws:iam::123456789012:role/Good", verdict=RoleVerdict.FAIL,
                      missing=[{"action": "s3:GetObject", "resource": "arn:aws:s3:::b/\x1b[2Jk/*",
                                "decision": "implicitDeny"}],
                      problems=["the trust policy does not let sagemaker.amazonaws.com call sts:AssumeRole"],
                      unknowns=["cannot simulate the caller's iam:PassRole (AccessDenied)"])
    lines = check.lines()
    assert lines[0] == "role arn:aws:iam::123456789012:role/Good: fail"
    assert lines[1] == "  the trust policy does not let sagemaker.amazonaws.com call sts:AssumeRole"
    assert lines[2].startswith("  missing s3:GetObject on arn:aws:s3:::b/") and lines[2].endswith("(implicitDeny)")
    assert lines[3] == "  cannot tell: cannot simulate the caller's iam:PassRole (AccessDenied)"
    assert len(lines) == 4 and not any("\x1b" in line for line in lines)  # a key from AWS cannot clear the screen


class _RoleUnreadable:
    """An IAM client whose caller may not read roles (iam:GetRole denied)."""

    def get_role(self, **_):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, "GetRole")


def test_a_role_the_caller_may_not_read_is_cannot_tell():
    """Kills iam: the check returning no verdict at all when iam:GetRole is denied."""
    check = check_role(SimpleNamespace(role="Good"), _RoleUnreadable(), sts=None)
    assert check.verdict == RoleVerdict.UNKNOWN and not check.missing and not check.problems
    assert check.unknowns == ("cannot read the role (AccessDenied); the job may still work",)
    assert check.as_dict()["verdict"] == RoleVerdict.UNKNOWN


class _RoleWithoutArn:
    """An IAM endpoint whose GetRole answer has no ARN (an emulator, a proxy that cut it)."""

    def get_role(self, RoleName):  # noqa: N803
        return {"Role": {"RoleName": RoleName, "Path": "/"}}


def test_a_role_answer_that_cannot_be_used_is_cannot_tell_saying_why():
    check = check_role(SimpleNamespace(role="Good"), _RoleWithoutArn(), sts=None)
    assert check.verdict == RoleVerdict.UNKNOWN and not check.missing and not check.problems
    assert check.unknowns == ("IAM's answer could not be used (KeyError)",)
    assert check.lines() == ["role Good: unknown", "  cannot tell: IAM's answer could not be used (KeyError)"]


def _refuse(clients, operation, error):
    """Make `operation` raise `error` (a ClientError code, or an exception) where its request would be sent."""
    def refuse(**_kw):
        if isinstance(error, BaseException):
            raise error
        raise ClientError({"Error": {"Code": error, "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": 403}},
                          operation.rsplit(".", 1)[-1])

    clients.session.events.register(f"before-send.{operation}", refuse)
    return clients


@pytest.mark.parametrize("operation, doing", [
    ("s3.GetBucketLocation", "checking bucket my-smp-bucket"),
    ("iam.GetRole", "looking up role NoPerms"),
    ("s3.PutObject", "uploading the source tarball"),
])
def test_a_refused_call_of_submit_is_one_line_saying_what_was_being_done(moto_world, operation, doing):
    clients = _refuse(Clients(region="us-west-2"), operation, "AccessDenied")
    with pytest.raises(AwsError) as err:
        submit(spec(role="NoPerms"), clients, now=NOW, skip_role_check=True)
    assert doing in str(err.value) and "\n" not in str(err.value)
    assert moto_world.sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


def test_a_role_given_as_an_arn_is_sent_as_it_is_without_looking_it_up(moto_world):
    clients = _refuse(Clients(region="us-west-2"), "iam.GetRole", "AccessDenied")
    captured = {}
    clients.session.events.register("provide-client-params.sagemaker.CreateTrainingJob",
                                    lambda params, **_: captured.update(params))
    submit(spec(role=moto_world.arns["Good"]), clients, now=NOW, skip_role_check=True)
    assert captured["RoleArn"] == moto_world.arns["Good"]


@pytest.mark.parametrize("operation, when", [("sts.GetCallerIdentity", "interrupted: "),
                                             ("s3.PutObject", "interrupted while uploading the source: ")])
def test_ctrl_c_before_the_job_is_created_says_nothing_is_running(moto_world, operation, when):
    from launcher.core.errors import Interrupted

    clients = _refuse(Clients(region="us-west-2"), operation, KeyboardInterrupt())
    with pytest.raises(Interrupted) as err:
        submit(spec(), clients, now=NOW)
    clients.cancel_waits()  # an interrupted call emits no event to end its timers (the CLI exits here)
    assert str(err.value).startswith(when) and str(err.value).endswith("was not started; nothing is running")
    assert err.value.started is False
    assert moto_world.sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


def test_an_sdk_error_that_is_not_aws_is_one_line(moto_world):
    from launcher.core.errors import LauncherError

    def start(*_args, **_kw):
        raise ValueError("the estimator did not like it")

    with pytest.raises(LauncherError, match="^the SageMaker SDK refused the job: the estimator did not like it$"):
        run(spec(), start=start)


@pytest.mark.parametrize("action, overrides", [("iam:PassRole", []), ("batch:SubmitServiceJob", ["cluster.queue=q"])])
def test_expired_credentials_stop_the_callers_simulations_too(moto_world, action, overrides):
    # Any other failure there leaves the check unable to tell; credentials that no longer work are the user's to fix.
    clients = Clients(region="us-west-2")

    def expire(params, **_kw):
        if action in params["ActionNames"]:
            raise ClientError({"Error": {"Code": "ExpiredToken", "Message": "expired"},
                               "ResponseMetadata": {"HTTPStatusCode": 403}}, "SimulatePrincipalPolicy")

    clients.session.events.register("provide-client-params.iam.SimulatePrincipalPolicy", expire)
    with pytest.raises(ClientError, match="ExpiredToken"):
        check_role(build_plan(spec(*overrides)), clients.iam, clients.sts)


def test_expired_credentials_stop_the_pipeline_role_check(moto_world):
    from launcher.submission.role import check_pipeline_role

    clients = _refuse(Clients(region="us-west-2"), "iam.SimulatePrincipalPolicy", "ExpiredToken")
    with pytest.raises(ClientError, match="ExpiredToken"):
        check_pipeline_role(moto_world.arns["Good"], "us-west-2", clients.iam)
    unknown = check_pipeline_role(moto_world.arns["Good"], "us-west-2",
                                  _refuse(Clients(region="us-west-2"), "iam.SimulatePrincipalPolicy", "Throttling").iam)
    assert unknown.verdict == RoleVerdict.UNKNOWN


def test_a_plan_without_a_role_cannot_be_checked(moto_world, monkeypatch):
    monkeypatch.delenv("SMP_LAUNCH_ROLE", raising=False)
    plan = build_plan(load_spec(JOBS / "llama7b.yaml"))
    clients = Clients(region="us-west-2")
    with pytest.raises(UsageError, match="^no IAM role: set `role:` in the spec or export SMP_LAUNCH_ROLE"):
        check_role(plan, clients.iam, clients.sts)
