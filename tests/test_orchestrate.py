"""The queue alone, with a fake submit and fake job statuses: the limit, a failed submit, Ctrl-C, exit codes;
and the warm-pool notes for plans that set cluster.keep_alive."""
from types import SimpleNamespace

import pytest

import launcher.jobs.status
from launcher.core.errors import Interrupted, LauncherError, UsageError
from launcher.jobs.status import worst_exit_code
from launcher.orchestrate.queue import PlanState, run_queue
from launcher.plan.sweep import plan_sweep, warm_pool_notes
from tests.conftest import JOBS


class FakeJobs:
    """Jobs that end after `polls` status reads each; records how many run at once."""

    def __init__(self, polls=2, outcome=None):
        self.left, self.polls, self.outcome = {}, polls, outcome or {}
        self.started, self.peak, self.checked, self.diagnosed = [], 0, [], []

    def check(self, plan, clients, skip_role_check=False):
        self.checked.append(plan.job_name)
        if self.outcome.get(plan.job_name) == "refuse-check":
            raise LauncherError(f"the role check refused {plan.job_name}")

    def submit(self, plan, **kw):
        self.role_checked = getattr(self, "role_checked", []) + [not kw.get("skip_role_check")]
        if plan.job_name in self.outcome and self.outcome[plan.job_name] == "refuse":
            raise LauncherError(f"AWS refused {plan.job_name}")
        self.started.append(plan.job_name)
        self.left[plan.job_name] = self.polls
        self.peak = max(self.peak, sum(n > 0 for n in self.left.values()))
        return SimpleNamespace(job_name=plan.job_name, dry_run=kw["dry_run"], warnings=(), notes=())

    def status(self, clients, name, diagnose=False):
        self.diagnosed.append(diagnose)
        self.left[name] -= 1
        done = self.left[name] <= 0
        status = self.outcome.get(name, "Completed") if done else "InProgress"
        return SimpleNamespace(job_name=name, status=status, terminal=done,
                               exit_code={"Failed": 1, "Stopped": 5}.get(status, 0) if done else 0)


def plans(n):
    return [SimpleNamespace(job_name=f"job-{i}", region="us-west-2") for i in range(n)]


@pytest.fixture
def fake(monkeypatch):
    jobs = FakeJobs()
    monkeypatch.setattr(launcher.jobs.status, "job_status", jobs.status)
    return jobs


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_never_more_than_the_limit_and_every_plan_starts_in_order(fake, limit):
    runs = run_queue(plans(5), max_concurrent=limit, wait=True, clients=object(), submit=fake.submit, check=fake.check,
                     sleep=lambda s: None)
    assert fake.started == [f"job-{i}" for i in range(5)] and fake.peak == limit
    assert [r.state for r in runs] == ["started"] * 5 and all(r.status.status == "Completed" for r in runs)
    assert worst_exit_code(runs) == 0


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_under_one_is_refused_before_anything_is_checked_or_started(fake, limit):
    def sleep(_seconds):
        raise KeyboardInterrupt  # a queue that could never start a job would wait here

    with pytest.raises(UsageError, match=f"^max_concurrent {limit}: give 1 or more$"):
        run_queue(plans(2), max_concurrent=limit, clients=object(), submit=fake.submit, check=fake.check, sleep=sleep)
    assert fake.checked == [] and fake.started == []


def test_no_limit_starts_everything_and_returns_without_waiting(fake):
    slept = []
    runs = run_queue(plans(4), clients=object(), submit=fake.submit, check=fake.check, sleep=slept.append)
    assert fake.peak == 4 and slept == [] and all(r.status is None for r in runs)


def test_a_failed_submit_stops_the_queue_and_gives_its_exit_code(fake):
    fake.outcome = {"job-1": "refuse"}
    runs = run_queue(plans(4), max_concurrent=1, clients=object(), submit=fake.submit, check=fake.check,
                     sleep=lambda s: None)
    assert [r.state for r in runs] == ["started", "error", "not_started", "not_started"]
    assert fake.started == ["job-0"] and "AWS refused job-1" in str(runs[1].error)
    assert worst_exit_code(runs) == 1


def test_ctrl_c_while_waiting_leaves_the_rest_not_started_with_exit_130(fake):
    def sleep(_seconds):
        raise KeyboardInterrupt

    runs = run_queue(plans(3), max_concurrent=1, clients=object(), submit=fake.submit, check=fake.check, sleep=sleep)
    assert [r.state for r in runs] == ["started", "not_started", "not_started"]
    assert isinstance(runs[1].error, Interrupted) and worst_exit_code(runs) == 130


def test_the_worst_outcome_is_failed_then_stopped(fake):
    fake.outcome = {"job-0": "Stopped", "job-2": "Failed"}
    runs = run_queue(plans(3), max_concurrent=2, wait=True, clients=object(), submit=fake.submit, check=fake.check,
                     sleep=lambda s: None)
    assert [r.exit_code for r in runs] == [5, 0, 1] and worst_exit_code(runs) == 1
    assert worst_exit_code(runs[:2]) == 5


def test_the_hook_sees_failed_jobs_only_and_its_plan_is_submitted(fake):
    fake.outcome = {"job-0": "Failed"}
    seen = []

    def on_failure(plan, status):
        seen.append((plan.job_name, status.status))
        return SimpleNamespace(job_name="job-0-r2", region="us-west-2") if plan.job_name == "job-0" else None

    runs = run_queue(plans(2), max_concurrent=1, clients=object(), submit=fake.submit, check=fake.check,
                     sleep=lambda s: None,
                     on_failure=on_failure)
    assert seen == [("job-0", "Failed")] and fake.started == ["job-0", "job-0-r2", "job-1"]
    assert fake.diagnosed and all(fake.diagnosed)  # with a hook, a failure is classified for it
    assert runs[0].job_name == "job-0-r2" and runs[0].status.status == "Completed"


def test_every_account_check_runs_before_the_first_job_and_a_refusal_starts_nothing(fake):
    fake.outcome = {"job-2": "refuse-check"}
    runs = run_queue(plans(3), max_concurrent=1, clients=object(), submit=fake.submit, check=fake.check,
                     sleep=lambda s: None)
    assert fake.checked == ["job-0", "job-1", "job-2"] and fake.started == []
    assert [r.state for r in runs] == ["not_started", "not_started", "error"] and worst_exit_code(runs) == 1


def test_plans_that_read_the_same_account_resources_are_checked_once(moto_world):
    from launcher.orchestrate.admission import account_key

    spec = str(JOBS / "llama7b.yaml")
    same = [c.plan for c in plan_sweep([spec], ["role=Good"], ["training.batch_size=1,2,4"])]
    assert len({account_key(p) for p in same}) == 1
    buckets = [c.plan for c in plan_sweep([spec], ["role=Good"], ["output.path=s3://bucket-a/x,s3://bucket-b/x"])]
    assert len({account_key(p) for p in buckets}) == 2


def test_a_dry_run_starts_nothing_and_polls_nothing(fake):
    runs = run_queue(plans(3), max_concurrent=1, dry_run=True, wait=True, clients=object(), submit=fake.submit,
                     check=fake.check,
                     sleep=lambda s: pytest.fail("a dry run waits for nothing"))
    assert [r.state for r in runs] == ["dry_run"] * 3


def test_warm_pool_notes_say_what_keeps_plans_from_sharing_a_pool():
    spec = str(JOBS / "llama7b.yaml")
    same = [c.plan for c in plan_sweep([spec], ["role=Good", "cluster.keep_alive=10m"], ["training.batch_size=2,4"])]
    assert warm_pool_notes(same, 1) == []
    assert "one job at a time" in warm_pool_notes(same, 2)[0]
    apart = [c.plan for c in plan_sweep([spec], ["role=Good", "cluster.keep_alive=10m", "smp.hybrid_shard_degree=0"],
                                        ["cluster.instance_count=1,2"])]
    assert "differ in instance count" in warm_pool_notes(apart, 1)[0]
    assert warm_pool_notes([c.plan for c in plan_sweep([spec], ["role=Good"], ["training.batch_size=2,4"])], 2) == []
    unpooled = [c.plan for c in plan_sweep([spec], ["role=Good"], ["training.batch_size=2"])]
    assert warm_pool_notes(same + unpooled, 1)[0].startswith(
        "1 of 3 plans do not set cluster.keep_alive: a warm pool is reused only by a job that sets it too")


def test_runs_are_frozen_and_built_anew(fake):
    import dataclasses

    runs = run_queue(plans(2), max_concurrent=1, wait=True, clients=object(), submit=fake.submit, check=fake.check,
                     sleep=lambda s: None)
    assert isinstance(runs, tuple) and isinstance(runs[0].attempts, tuple)
    assert isinstance(runs[0].submissions, tuple) and isinstance(runs[0].statuses, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        runs[0].state = PlanState.ERROR
    with pytest.raises(dataclasses.FrozenInstanceError):
        runs[0].attempts[0].status = None
    assert runs[0].state is PlanState.STARTED and runs[0].state == "started"


def test_a_queue_of_one_makes_no_separate_account_check_and_a_single_submit_raises_its_error(fake, monkeypatch):
    from launcher.orchestrate import single

    (run,) = run_queue(plans(1), clients=object(), submit=fake.submit, check=fake.check, sleep=lambda s: None)
    assert fake.checked == [] and fake.started == ["job-0"] and run.state is PlanState.STARTED
    fake.outcome = {"job-0": "refuse"}
    monkeypatch.setattr("launcher.submission.create.submit", fake.submit)
    monkeypatch.setattr("launcher.submission.batch.queue_of", lambda plan: None)
    with pytest.raises(LauncherError, match="AWS refused job-0"):
        single.submit(plans(1)[0], clients=object())


def test_worst_exit_code_puts_an_error_first_then_failed_stopped_and_a_timed_out_wait():
    from launcher.jobs.status import JobState

    def job(state):
        from tests.test_retry import _status

        return _status("j", state)

    assert worst_exit_code([job("Completed"), job("InProgress")]) == 124  # a wait left it running
    assert worst_exit_code([job("InProgress"), job("Stopped")]) == 5
    assert worst_exit_code([job("Stopped"), job("Failed")]) == 1
    assert worst_exit_code([SimpleNamespace(exit_code=1), SimpleNamespace(exit_code=4)]) == 4  # an error wins
    assert worst_exit_code([]) == 0 and job("Failed").status is JobState.FAILED


def test_the_public_api_has_one_submit_path_and_its_typed_states():
    import launcher

    for name in ("worst_exit_code", "resolve_job", "warm_pool_notes", "JobState", "PlanState",
                 "EventKind"):
        assert name in launcher.__all__ and getattr(launcher, name) is not None
    assert "submit_with_retries" not in launcher.__all__
    with pytest.raises(AttributeError):
        launcher.submit_with_retries  # noqa: B018
    assert launcher.EventKind("resubmit") is launcher.EventKind.RESUBMIT and launcher.PlanState.ERROR == "error"


def test_a_plan_whose_account_was_checked_before_the_start_is_not_role_checked_again(fake):
    # the queue's own check ran the role check for each distinct account key; a submit would run it again
    runs = run_queue(plans(3), max_concurrent=3, clients=object(), submit=fake.submit, check=fake.check,
                     sleep=lambda s: None)
    assert fake.checked == ["job-0", "job-1", "job-2"] and fake.role_checked == [False, False, False]
    assert [r.state for r in runs] == ["started"] * 3
    fake.role_checked = []
    run_queue(plans(1), clients=object(), submit=fake.submit, check=fake.check, sleep=lambda s: None)
    assert fake.role_checked == [True]  # a queue of one: its submit makes the checks


def test_a_sweep_runs_the_role_check_once_per_role_and_resource_set_not_per_job(moto_world):
    from collections import Counter

    from launcher.core.aws import Clients
    from launcher.submission import create

    sweep = [c.plan for c in plan_sweep([str(JOBS / "llama7b.yaml")], ["role=Good"],
                                        ["training.batch_size=1,2,4", "training.learning_rate=1e-4,3e-4"])]
    clients = Clients(region="us-west-2")
    calls = Counter()
    clients.session.events.register("before-call.iam", lambda model, **_kw: calls.update([model.name]))

    def submit(plan, **kw):
        return create.submit(plan, kw["clients"], dry_run=kw["dry_run"], skip_role_check=kw["skip_role_check"],
                             start=lambda *_a, **_k: plan.job_name)

    runs = run_queue(sweep, clients=clients, submit=submit, sleep=lambda s: None)
    assert [r.state for r in runs] == ["started"] * 6
    simulated = calls["SimulatePrincipalPolicy"]
    calls.clear()
    create.check_account(sweep[0], clients)  # what one plan's check costs
    assert simulated == calls["SimulatePrincipalPolicy"] > 0  # once for all six jobs (each submit repeated it)
