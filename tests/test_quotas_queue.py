"""A queue waits for quota instead of failing; a single submit, a dry run and a job bigger than the quota do not."""
import pytest

from launcher.orchestrate.queue import EventKind, PlanState, run_queue
from launcher.submission.quotas import OverQuota, QuotaCheck, QuotaVerdict
from tests.test_orchestrate import FakeJobs, plans


class QuotaJobs(FakeJobs):
    """FakeJobs on an account with `quota` instances: a submit that would exceed it raises OverQuota."""

    def __init__(self, quota, needed=1, polls=2):
        super().__init__(polls=polls)
        self.quota, self.needed, self.refusals = quota, needed, 0

    def submit(self, plan, **kw):
        in_use = sum(self.needed for n in self.left.values() if n > 0)
        if in_use + self.needed > self.quota:
            self.refusals += 1
            raise OverQuota(QuotaCheck("ml.p4d.24xlarge", "us-west-2", False, self.needed, QuotaVerdict.OVER,
                                       quota=self.quota, quota_code="L-1", quota_source="applied", in_use=in_use,
                                       in_use_jobs=tuple(n for n, left in self.left.items() if left > 0)))
        return super().submit(plan, **kw)


@pytest.fixture
def account(monkeypatch):
    import launcher.jobs.status

    def make(**kw):
        jobs = QuotaJobs(**kw)
        monkeypatch.setattr(launcher.jobs.status, "job_status", jobs.status)
        return jobs

    return make


def test_a_queue_waits_for_quota_and_starts_every_plan_in_order(account):
    jobs = account(quota=2)
    events = []
    runs = run_queue(plans(4), wait=True, clients=object(), submit=jobs.submit, check=jobs.check,
                     sleep=lambda s: None, on_event=events.append)
    assert jobs.started == [f"job-{i}" for i in range(4)] and jobs.peak == 2 and jobs.refusals > 0
    assert [r.state for r in runs] == [PlanState.STARTED] * 4 and all(r.error is None for r in runs)
    said = [e for e in events if e.kind is EventKind.WAITING]
    names = [e.job_name for e in said]
    assert names[0] == "job-2" and len(names) == len(set(names)), "each waiting plan is said once"
    assert jobs.refusals > len(names), "a plan waited through more than one poll, and said so once"
    assert "is 2" in said[0].message and "in use" in said[0].message


def test_max_concurrent_alone_makes_a_queue_that_waits(account):
    jobs = account(quota=1)
    runs = run_queue(plans(1) + plans(2)[1:], max_concurrent=5, clients=object(), submit=jobs.submit,
                     check=jobs.check, sleep=lambda s: None)
    assert jobs.started == ["job-0", "job-1"] and all(r.state is PlanState.STARTED for r in runs)


def test_a_single_submit_refuses_with_exit_3(account):
    jobs = account(quota=0)
    (run,) = run_queue(plans(1), clients=object(), submit=jobs.submit, check=jobs.check, sleep=lambda s: None)
    assert run.state is PlanState.ERROR and run.exit_code == 3 and jobs.started == []


def test_a_job_bigger_than_the_whole_quota_is_refused_even_in_a_queue(account):
    jobs = account(quota=2, needed=4)
    runs = run_queue(plans(2), wait=True, clients=object(), submit=jobs.submit, check=jobs.check,
                     sleep=lambda s: None)
    assert runs[0].state is PlanState.ERROR and runs[0].exit_code == 3 and "request-service-quota-increase" in \
        str(runs[0].error)
    assert runs[1].state is PlanState.NOT_STARTED and jobs.started == []


def test_a_dry_run_queue_reports_instead_of_waiting(account):
    jobs = account(quota=0)
    runs = run_queue(plans(2), dry_run=True, clients=object(), submit=jobs.submit, check=jobs.check,
                     sleep=lambda s: (_ for _ in ()).throw(AssertionError("a dry run slept")))
    assert runs[0].state is PlanState.ERROR and runs[0].exit_code == 3
