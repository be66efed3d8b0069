"""Paged AWS reads go through boto3's paginators: every page is read, the item limit holds, errors are sentences.

botocore's Stubber answers a real client, so the paginator's own token handling is what is exercised.
"""
import time
from datetime import datetime, timezone

import boto3
import pytest
from botocore.stub import ANY, Stubber

from launcher.core.aws import Clients, pages
from launcher.core.errors import LauncherError
from launcher.jobs import metrics
from launcher.jobs import status as jobs
from launcher.submission import role as iam


def _job(name: str, status: str = "InProgress") -> dict:
    return {"TrainingJob": {"TrainingJobName": name, "TrainingJobStatus": status,
                            "CreationTime": datetime.now(timezone.utc),
                            "Tags": [{"Key": jobs.MANAGED_TAG, "Value": "true"}],
                            "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}}}


def _client(service: str):
    return boto3.client(service, region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")


def test_list_reads_every_search_page_until_the_limit():
    sm = _client("sagemaker")
    with Stubber(sm) as stub:
        stub.add_response("search", {"Results": [_job("a-1"), _job("a-2")], "NextToken": "t1"},
                          {"Resource": "TrainingJob", "SearchExpression": ANY, "SortBy": "CreationTime",
                           "SortOrder": "Descending", "MaxResults": 50})
        stub.add_response("search", {"Results": [_job("a-3", "Completed")], "NextToken": "t2"},
                          {"Resource": "TrainingJob", "SearchExpression": ANY, "SortBy": "CreationTime",
                           "SortOrder": "Descending", "MaxResults": 50, "NextToken": "t1"})
        stub.add_response("search", {"Results": [_job("a-4")]}, {
            "Resource": "TrainingJob", "SearchExpression": ANY, "SortBy": "CreationTime",
            "SortOrder": "Descending", "MaxResults": 50, "NextToken": "t2"})
        rows = jobs.list_jobs(Clients(overrides={"sagemaker": sm}), running=True)
        stub.assert_no_pending_responses()
    assert sorted(r.job_name for r in rows) == ["a-1", "a-2", "a-4"]


def test_list_stops_paging_once_it_has_enough():
    sm = _client("sagemaker")
    with Stubber(sm) as stub:
        stub.add_response("search", {"Results": [_job("b-1"), _job("b-2")], "NextToken": "t1"})
        rows = jobs.list_jobs(Clients(overrides={"sagemaker": sm}), limit=2)  # no second call is stubbed
    assert sorted(r.job_name for r in rows) == ["b-1", "b-2"]


def test_an_error_while_paging_is_a_sentence():
    sm = _client("sagemaker")
    with Stubber(sm) as stub:
        stub.add_response("search", {"Results": [_job("c-1")], "NextToken": "t1"})
        stub.add_client_error("search", service_error_code="ThrottlingException", service_message="Rate exceeded")
        with pytest.raises(LauncherError) as err:
            list(pages(sm, "search", "listing training jobs", Resource="TrainingJob"))
    assert str(err.value).startswith("listing training jobs: ") and "throttling" in str(err.value)


def test_the_role_simulation_reads_every_truncated_page():
    client = _client("iam")
    arn = "arn:aws:iam::123456789012:role/r"
    results = [{"EvalActionName": a, "EvalDecision": "allowed"} for a in ("s3:GetObject", "s3:PutObject")]
    with Stubber(client) as stub:
        stub.add_response("simulate_principal_policy", {"EvaluationResults": results[:1], "IsTruncated": True,
                                                        "Marker": "m1"})
        stub.add_response("simulate_principal_policy", {"EvaluationResults": results[1:], "IsTruncated": False},
                          {"PolicySourceArn": arn, "ActionNames": ["s3:GetObject", "s3:PutObject"],
                           "ResourceArns": ["*"], "Marker": "m1"})
        got = iam._simulate(client, arn, ("s3:GetObject", "s3:PutObject"), "*")
        stub.assert_no_pending_responses()
    assert got == results


def test_metrics_follow_next_token_within_one_query_batch(moto_world):
    from emulator import EmulatedJob, add_job

    job = EmulatedJob("paged-metrics", hosts=1, training=600, decoy=False)
    add_job(job, moto_world.session.client("sagemaker"))
    cw = _client("cloudwatch")
    clients = Clients(region="us-west-2", overrides={"cloudwatch": cw})
    with Stubber(cw) as stub:
        stub.add_response("get_metric_data", {"MetricDataResults": [], "NextToken": "n1"})
        stub.add_response("get_metric_data", {"MetricDataResults": []}, {
            "MetricDataQueries": ANY, "ScanBy": "TimestampAscending", "StartTime": ANY, "EndTime": ANY,
            "NextToken": "n1"})
        data = metrics.fetch(clients, "paged-metrics", 600, time.time())
        stub.assert_no_pending_responses()
    assert data.get_metric_data_calls == 2


def _events_hooked(emitter) -> int:
    """How many before-call handlers an event emitter (botocore's, behind its aliaser) runs for an STS call."""
    return len(list(emitter._emitter._handlers.prefix_search("before-call.sts.GetCallerIdentity")))


def test_aws_calls_are_recorded_inside_the_block_only_and_the_hook_is_removed(moto_world):
    from launcher.core.aws import recording

    clients = Clients(region="us-west-2")
    clients.sts.get_caller_identity()  # a client made before the block
    before_session = _events_hooked(clients.session.events)
    before_client = _events_hooked(clients.sts.meta.events)
    with recording(clients) as calls:
        clients.sts.get_caller_identity()
        clients.s3.list_buckets()  # a client made inside the block
        with recording(clients) as inner:  # blocks nest; each records what happens inside it
            clients.sts.get_caller_identity()
    assert calls == ["sts.GetCallerIdentity", "s3.ListBuckets", "sts.GetCallerIdentity"]
    assert inner == ["sts.GetCallerIdentity"]
    clients.sts.get_caller_identity()
    clients.s3.list_buckets()
    clients.iam.list_roles()  # a client made after the block
    assert len(calls) == 3 and len(inner) == 1
    assert _events_hooked(clients.session.events) == before_session
    assert _events_hooked(clients.sts.meta.events) == before_client


def test_two_submits_on_shared_clients_record_only_their_own_calls(moto_world):
    import launcher
    from tests.conftest import REPO

    clients = Clients(region="us-west-2")
    plan = launcher.build_plan(launcher.load_spec(str(REPO / "jobs/llama7b.yaml"), ["role=Good"]))
    first = launcher.submit(plan, dry_run=True, clients=clients)
    second = launcher.submit(plan, dry_run=True, clients=clients)
    assert first.aws_calls and first.aws_calls == second.aws_calls  # the same reads; none counted twice
    assert "iam.SimulatePrincipalPolicy" in first.aws_calls


def test_the_region_is_resolved_by_one_function(monkeypatch):
    import launcher.plan.build
    from launcher.core import aws as core_aws

    assert launcher.plan.build.resolve_region is core_aws.resolve_region
    env = {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-east-1"}
    assert core_aws.resolve_region("ap-south-1", env, flag="sa-east-1") == "sa-east-1"
    assert core_aws.resolve_region("ap-south-1", env) == "ap-south-1"
    assert core_aws.resolve_region(None, env) == "eu-west-1"
    assert core_aws.resolve_region(None, {"AWS_DEFAULT_REGION": "us-east-1"}) == "us-east-1"
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)  # botocore reads the process's environment too
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert core_aws.resolve_region(None, {"AWS_PROFILE": "nobody"}) is None  # an unknown profile: no region
