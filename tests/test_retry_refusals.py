"""A queue meeting a CreateTrainingJob refusal that passes with time (quota its own jobs hold, throttling):
it waits (virtual clock) and tries again, within a bound, instead of abandoning the plans after it."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import launcher.jobs.status
from launcher.core.aws import AwsError, QuotaError, ThrottledError, explain
from launcher.core.errors import LauncherError
from launcher.orchestrate.queue import EventKind, PlanState, run_queue
from launcher.orchestrate.retry import RefusalWait
from tests.conftest import JOBS


class Account:
    """A fake CreateTrainingJob that refuses named plans a number of times, and jobs that end after `polls`
    status reads."""

    def __init__(self, refusals: dict[str, list[LauncherError]], polls: int = 1):
        self.refusals, self.polls = refusals, polls
        self.tries, self.started, self.left = [], [], {}

    def submit(self, plan, **kw):
        self.tries.append(plan.job_name)
        queued = self.refusals.get(plan.job_name)
        if queued:
            raise queued.pop(0)
        self.started.append(plan.job_name)
        self.left[plan.job_name] = self.polls
        return SimpleNamespace(job_name=plan.job_name, dry_run=kw["dry_run"], warnings=(), notes=())

    def status(self, clients, name, diagnose=False):
        self.left[name] -= 1
        done = self.left[name] <= 0
        return SimpleNamespace(job_name=name, status="Completed" if done else "InProgress", terminal=done,
                               exit_code=0, failure=None)


def plans(n):
    return [SimpleNamespace(job_name=f"job-{i}", region="us-west-2") for i in range(n)]


QUOTA = QuotaError("CreateTrainingJob: The account-level service limit 'ml.p4d.24xlarge for training job usage' "
                   "is 2 Instances, with current utilization of 2 Instances")
THROTTLED = ThrottledError("AWS is throttling this account's requests (CreateTrainingJob: ThrottlingException)")


def run(account, monkeypatch, n=3, **kw):
    monkeypatch.setattr(launcher.jobs.status, "job_status", account.status)
    slept, events = [], []
    runs = run_queue(plans(n), clients=object(), submit=account.submit, check=lambda *a, **k: None,
                     sleep=slept.append, on_event=events.append, **kw)
    return runs, slept, events


def test_a_throttled_plan_waits_and_the_plans_after_it_still_start(monkeypatch):
    account = Account({"job-1": [THROTTLED, THROTTLED]})
    runs, slept, events = run(account, monkeypatch, interval=30)
    assert account.started == ["job-0", "job-1", "job-2"]
    assert account.tries == ["job-0", "job-1", "job-1", "job-1", "job-2"]
    assert [r.state for r in runs] == [PlanState.STARTED] * 3 and all(r.error is None for r in runs)
    waits = [e for e in events if e.kind is EventKind.WAIT]
    assert [(e.job_name, e.backoff_s) for e in waits] == [("job-1", 60), ("job-1", 120)]
    assert "throttling, refusal 1 of at most 5" in waits[0].message and "ThrottlingException" in waits[0].message
    assert slept == [60, 120]  # job-0 ended at its first poll: nothing to poll, the head's waits are slept whole
    assert runs[1].attempts[0].backoff_s == 180


def test_a_quota_wait_ends_when_one_of_the_queues_jobs_ends(monkeypatch):
    account = Account({"job-1": [QUOTA]}, polls=2)
    runs, slept, events = run(account, monkeypatch, n=2, interval=10)
    assert account.tries == ["job-0", "job-1", "job-1"]
    assert slept == [10]  # job-0 ended at the poll after one 10 s sleep: job-1 did not wait out its 60 s
    wait = next(e for e in events if e.kind is EventKind.WAIT)
    assert "quota" in wait.message and "or until one of this queue's jobs ends" in wait.message
    assert [r.state for r in runs] == [PlanState.STARTED] * 2


def test_a_quota_wait_without_running_jobs_waits_its_whole_backoff(monkeypatch):
    account = Account({"job-0": [QUOTA]})
    runs, slept, events = run(account, monkeypatch, n=2, interval=10)
    assert slept[0] == 60 and account.started == ["job-0", "job-1"]
    assert "until one of this queue's jobs ends" not in next(e for e in events if e.kind is EventKind.WAIT).message


def test_past_the_bound_the_queue_gives_up_as_before(monkeypatch):
    account = Account({"job-1": [THROTTLED] * 3})
    runs, slept, events = run(account, monkeypatch, refusals=RefusalWait(max_refusals=2, backoff=5), interval=100)
    assert account.tries == ["job-0", "job-1", "job-1", "job-1"] and account.started == ["job-0"]
    assert [r.state for r in runs] == [PlanState.STARTED, PlanState.ERROR, PlanState.NOT_STARTED]
    assert runs[1].error is THROTTLED
    assert [e.kind for e in events].count(EventKind.WAIT) == 2 and events[-1].kind is EventKind.ERROR
    assert slept == [5, 10]


def test_other_refusals_still_stop_the_queue_at_once(monkeypatch):
    account = Account({"job-1": [AwsError("SageMaker rejected the request: bad image")]})
    runs, slept, _ = run(account, monkeypatch)
    assert account.tries == ["job-0", "job-1"] and slept == []
    assert [r.state for r in runs] == [PlanState.STARTED, PlanState.ERROR, PlanState.NOT_STARTED]


def test_a_single_submit_and_a_queue_told_not_to_wait_fail_at_once(monkeypatch):
    account = Account({"job-0": [QUOTA]})
    (only,), slept, _ = run(account, monkeypatch, n=1)
    assert only.error is QUOTA and slept == []
    account = Account({"job-0": [QUOTA]})
    runs, slept, _ = run(account, monkeypatch, n=2, refusals=None)
    assert runs[0].error is QUOTA and slept == [] and account.started == []


def test_waits_double_up_to_their_cap():
    wait = RefusalWait(backoff=60, max_backoff=200)
    assert [wait.delay(n) for n in (1, 2, 3, 4)] == [60, 120, 200, 200]
    assert RefusalWait.passes_with_time(QUOTA) == "quota"
    assert RefusalWait.passes_with_time(THROTTLED) == "throttling"
    assert RefusalWait.passes_with_time(AwsError("x")) is None
    with pytest.raises(LauncherError):
        RefusalWait(max_refusals=-1)


@pytest.mark.parametrize("code,kind", [("ThrottlingException", ThrottledError), ("Throttling", ThrottledError),
                                       ("ResourceLimitExceeded", QuotaError), ("ValidationException", AwsError)])
def test_create_training_job_refusals_are_typed(code, kind):
    from botocore.exceptions import ClientError

    err = explain(ClientError({"Error": {"Code": code, "Message": "Rate exceeded"}}, "CreateTrainingJob"),
                  "CreateTrainingJob")
    assert type(err) is kind


def test_a_sweeps_wait_after_a_throttled_create_is_said_on_stderr(moto_world, clock, run_cli, monkeypatch):
    """CreateTrainingJob throttled for one plan of a sweep: the wait before it is tried again is said on stderr
    (stdout stays the table, or one JSON document), and the plan then starts."""
    import launcher.orchestrate.queue
    from launcher.submission import create

    real, refused = create.submit, []

    def submit(plan, **kw):
        if not refused and not kw.get("dry_run"):
            refused.append(plan.job_name)
            raise THROTTLED
        return real(plan, **kw)

    monkeypatch.setattr(create, "submit", submit)
    monkeypatch.setattr(launcher.orchestrate.queue, "time", SimpleNamespace(sleep=clock.sleep))
    for output in ("table", "json"):
        refused.clear()
        r = run_cli("submit", str(JOBS / "llama7b.yaml"), "--set", "role=Good", "--sweep", "training.batch_size=1,2",
                    "--output", output)
        assert r.code == 0, r.err
        (name,) = refused
        said = f"CreateTrainingJob refused {name} (throttling, refusal 1 of at most 5): trying again in 60 s; " \
               f"{THROTTLED}"
        assert said in r.err.splitlines() and "CreateTrainingJob refused" not in r.out
        if output == "json":
            assert all(d["state"] == "started" for d in json.loads(r.out))
        else:
            assert f"started {name} (1 running)" in r.out.splitlines() and "(2 running)" in r.out
