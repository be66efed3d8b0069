"""CI's short reliability run: a few fault scenarios through the proxy and a small fuzz budget.

The full run is `make reliability` (benchmarks/reliability.py), which writes docs/reliability.md.
"""
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import faultproxy  # noqa: E402
import reliability  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("smp-launch", path=str(Path(sys.executable).parent)) is None,
                                reason="the smp-launch console script is not installed")
SHORT = [s for s in reliability.scenarios() if s.short]


@pytest.fixture(scope="module")
def reliability_world():
    with reliability.World() as w:
        yield w


@pytest.mark.parametrize("scenario", SHORT, ids=[s.name for s in SHORT])
def test_a_fault_never_leaves_the_user_wrong(reliability_world, scenario):
    row = reliability.run_scenario(reliability_world, scenario)
    assert row.faults != "none" or not scenario.rules, "the fault was never injected"
    assert row.problems == [], row
    assert scenario.run is not None or row.exit_code in reliability.EXIT_CODES  # a run of several checks its own
    if scenario.command == "submit":  # another's job (the `taken` fault's) exists beside ours, never reported
        assert row.jobs_created == 1 + scenario.foreign and row.jobs_reported == 1


def test_bad_input_never_crashes_hangs_or_calls_aws():
    """Each input's validate (and submit) must end within 60 s of wall time: a hang, not a busy machine (the
    benchmark's own limit, 2 s, is a speed figure for an idle one)."""
    found = reliability.fuzz(examples=30, seed=0, time_limit_s=60.0, with_corpus=False)
    assert found["tracebacks"] == [], found["tracebacks"]
    assert found["slow"] == [], found["slow"]
    assert found["bad_exit"] == [], found["bad_exit"]
    assert found["invalid"] > 0 and found["aws_calls_on_invalid"] == 0, found["calls"]


def test_the_proxy_speaks_each_services_error_protocol():
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    rules = [faultproxy.Rule(s, None, "throttle", None) for s in ("sagemaker", "logs", "iam", "sts", "s3")]
    with faultproxy.FaultProxy("http://127.0.0.1:9", rules) as proxy:
        def client(service):
            return boto3.client(service, endpoint_url=proxy.url, region_name="us-west-2", aws_access_key_id="a",
                                aws_secret_access_key="b", config=Config(retries={"max_attempts": 1}))

        calls = {"sagemaker": lambda c: c.list_training_jobs(), "logs": lambda c: c.describe_log_groups(),
                 "iam": lambda c: c.get_role(RoleName="x"), "sts": lambda c: c.get_caller_identity(),
                 "s3": lambda c: c.list_objects_v2(Bucket="b")}
        codes = {}
        for service, call in calls.items():
            with pytest.raises(ClientError) as err:
                call(client(service))
            codes[service] = err.value.response["Error"]["Code"]
        assert codes == {"sagemaker": "ThrottlingException", "logs": "ThrottlingException", "iam": "Throttling",
                         "sts": "Throttling", "s3": "SlowDown"}
        assert set(proxy.counts()) == {"sagemaker:ListTrainingJobs", "logs:DescribeLogGroups", "iam:GetRole",
                                       "sts:GetCallerIdentity", "s3:GET ?list-type"}
