"""End to end: the installed CLI as separate processes against the emulator's server, jobs handed to an AWS Batch
queue for SageMaker Training. The process that submits ends before another one waits: the queue, its capacity
and its retries live in (emulated) AWS, not on this machine.

Emulated time is the real clock, held still while jobs are submitted (they all arrive at one instant, however
slow the machine) and released when the test says so; the jobs' own durations are emulated seconds.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import emulator
from emulator import failures as scenarios
from emulator import scenario
from tests.batch_world import CAPACITY, FAIR_QUEUE, QUEUE, create_batch_world
from tests.conftest import REPO

QUICK = dict(starting=0.1, downloading=0.05, training=0.4, uploading=0.05, line_interval=0.1, decoy=False)
SPEC = "jobs/llama7b.yaml"


class HeldClock:
    """The real clock, except while held: then emulated time stands still."""

    def __init__(self) -> None:
        self.offset = 0.0
        self.held_at: float | None = None

    def __call__(self) -> float:
        return self.held_at if self.held_at is not None else time.time() - self.offset

    def hold(self) -> None:
        self.held_at = self()

    def release(self) -> None:
        if self.held_at is None:
            return
        self.offset = time.time() - self.held_at
        self.held_at = None


@pytest.fixture
def make_world():
    return create_batch_world


@pytest.fixture
def held():
    clock = HeldClock()
    emulator.set_clock(clock)
    scenario.set_default(QUICK)
    yield clock
    scenario.set_default({})
    emulator.set_clock(None)


def _submit(world, *args: str, queue: str = QUEUE) -> dict | list:
    out = world.cli("submit", SPEC, "--set", "role=Good", "--queue", queue, *args, "--output", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _batch_statuses(world, names: list[str], queue: str = QUEUE) -> dict[str, str]:
    b = world.session.client("batch")
    found = {}
    for status in ("RUNNABLE", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"):
        for s in b.list_service_jobs(jobQueue=queue, jobStatus=status)["jobSummaryList"]:
            found[s["jobName"]] = s["status"]
    return {n: found.get(n, "?") for n in names}


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(end, -1) for _, end in spans] + [(start, 1) for start, _ in spans])  # an end before a start
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def test_a_nine_job_sweep_runs_two_at_a_time_after_the_submitting_process_is_gone(server_world, held):
    """`submit --sweep` (9 plans) into a queue whose service environment holds 2 instances, in one process that
    ends at once; Batch holds 7 RUNNABLE; `wait` in another process sees all 9 complete, never more than 2
    training jobs at a time."""
    held.hold()
    rates = [f"{n}e-4" for n in range(1, 10)]
    rows = _submit(server_world, "--sweep", f"training.learning_rate={','.join(rates)}")
    assert [r["state"] for r in rows] == ["started"] * 9
    assert {r["submission"]["queue"]["name"] for r in rows} == {QUEUE}
    names = [r["job_name"] for r in rows]
    # The process is gone; the queue holds what its capacity cannot run yet.
    assert Counter(_batch_statuses(server_world, names).values()) == {"SCHEDULED": CAPACITY, "RUNNABLE": 9 - CAPACITY}
    listed = server_world.cli("list", "--output", "json")
    assert {r["job_name"] for r in json.loads(listed.stdout) if r["queue"] == QUEUE} == {
        n for n, s in _batch_statuses(server_world, names).items() if s == "RUNNABLE"}
    held.release()
    out = server_world.cli("wait", *names, "--interval", "0.2", "--output", "json", timeout=300)
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)
    assert [(r["job_name"], r["status"], r["queue"]["status"]) for r in done] == [
        (n, "Completed", "SUCCEEDED") for n in names]
    sm = server_world.session.client("sagemaker")
    spans = []
    for row in done:
        desc = sm.describe_training_job(TrainingJobName=row["queue"]["training_job"])
        spans.append((desc["CreationTime"].timestamp(), desc["TrainingEndTime"].timestamp()))
    assert len(spans) == 9 and _most_at_once(spans) == CAPACITY
    assert sorted(spans)[-1][0] > sorted(spans)[0][1]  # the last started after the first had ended


def test_a_capacity_failure_is_retried_by_batch_itself(server_world, held):
    """A training job that fails for capacity is placed again by Batch (no retryStrategy needed, no attempt
    used); `wait`, in a process of its own, sees the job complete."""
    scenario.expect_attempts("AWSBatch", [scenarios.capacity_failure(**QUICK), dict(QUICK)])
    result = _submit(server_world)
    assert result["queue"]["retry_strategy"] is None and result["queue"]["job_id"]
    out = server_world.cli("wait", result["job_name"], "--interval", "0.2", "--output", "json", timeout=120)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["status"] == "Completed" and row["queue"]["attempts"] == 2
    desc = server_world.session.client("batch").describe_service_job(jobId=result["queue"]["job_id"])
    assert "retryStrategy" not in desc
    first, second = desc["attempts"]
    assert first["statusReason"].startswith("Received status from SageMaker: CapacityError")
    assert second["statusReason"] == "Received status from SageMaker: Training job completed"
    sm = server_world.session.client("sagemaker")
    assert sm.describe_training_job(TrainingJobName=first["serviceResourceId"]["value"].split("/")[-1])[
        "TrainingJobStatus"] == "Failed"


def test_an_internal_error_is_retried_by_the_strategy_made_from_the_retry_policy(server_world, held):
    """The retry policy's classes as the job's retryStrategy: two InternalServerErrors are retried on AWS and the
    third attempt completes, with nothing of ours running between submit and wait."""
    from launcher import api
    from launcher.core.aws import Clients
    from launcher.submission import batch

    internal = dict(QUICK, outcome="Failed", fail_in="Training",
                    failure_reason="InternalServerError: We encountered an internal error. Please try again.")
    scenario.expect_attempts("AWSBatch", [internal, internal, dict(QUICK)])
    plan = api.build_plan(api.load_spec(str(REPO / SPEC), ["role=Good", f"cluster.queue={QUEUE}"]))
    result = batch.submit(plan, Clients(region="us-west-2"),
                          options=batch.QueueOptions(retry_classes=("internal_error",), attempts=3))
    assert result.queue["retry_strategy"]["attempts"] == 3
    out = server_world.cli("wait", result.job_name, "--interval", "0.2", "--output", "json", timeout=120)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["status"] == "Completed" and row["queue"]["attempts"] == 3


def test_logs_waits_in_the_queue_then_follows_the_training_job(server_world, held, tmp_path):
    """`logs` on a job still RUNNABLE says where it waits, then prints its training job's lines once Batch has
    started it, and exits with its outcome."""
    held.hold()  # a queue of capacity 1: the second job waits
    rows = _submit(server_world, "--sweep", "training.learning_rate=1e-4,2e-4", "--share", "a", queue=FAIR_QUEUE)
    waiting = [r["job_name"] for r in rows][-1]
    assert _batch_statuses(server_world, [waiting], FAIR_QUEUE) == {waiting: "RUNNABLE"}
    smp = str(Path(sys.executable).parent / "smp-launch")
    out_file = tmp_path / "logs.out"
    with out_file.open("w") as out_handle:
        proc = subprocess.Popen([smp, "logs", waiting, "--interval", "0.2"], cwd=REPO, env=server_world.env,
                                stdout=out_handle, stderr=subprocess.PIPE, text=True)
        said: list[str] = []

        def read_errors() -> None:  # the only reader of stderr: it releases the clock once logs says it waits
            assert proc.stderr is not None
            for line in proc.stderr:
                said.append(line)
                if "waiting for Batch to start it" in line:
                    held.release()

        reader = threading.Thread(target=read_errors, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
            held.release()
        reader.join(10)
    out = out_file.read_text()
    assert proc.returncode == 0, "".join(said)
    assert f"{waiting} is RUNNABLE in queue {FAIR_QUEUE}; waiting for Batch to start it\n" in said
    assert "[algo-1]" in out and "SMP_PROGRESS" in out
    assert any("Completed" in line for line in said), said


def test_stop_terminates_a_queued_job_and_status_says_so(server_world, held):
    held.hold()  # a queue of capacity 1: the second job waits
    rows = _submit(server_world, "--sweep", "training.learning_rate=1e-4,2e-4", "--share", "a", queue=FAIR_QUEUE)
    waiting = rows[-1]["job_name"]
    out = server_world.cli("stop", waiting, "--yes")
    assert out.returncode == 0, out.stderr
    assert f"{waiting} is terminated in Batch queue {FAIR_QUEUE}" in out.stderr
    status = server_world.cli("status", waiting, "--output", "json")
    assert status.returncode == 5, status.stderr
    shown = json.loads(status.stdout)
    assert shown["status"] == "Stopped" and shown["queue"]["status"] == "FAILED"
    assert shown["queue"]["training_job"] is None
    table = server_world.cli("status", waiting)
    assert f"FAILED in queue {FAIR_QUEUE}: stopped with smp-launch stop" in table.stdout


def test_the_shell_refuses_what_a_queue_cannot_do(server_world):
    out = server_world.cli("submit", SPEC, "--set", "role=Good", "--queue", QUEUE, "--max-concurrent", "2",
                           "--sweep", "training.learning_rate=1e-4,2e-4")
    assert out.returncode == 2 and "--max-concurrent limits the jobs this machine keeps running" in out.stderr
    out = server_world.cli("submit", SPEC, "--set", "role=Good", "--queue", QUEUE, "--retry", "oom")
    assert out.returncode == 2 and "a Batch queue cannot retry out_of_memory" in out.stderr
    out = server_world.cli("submit", SPEC, "--set", "role=Good", "--queue", QUEUE, "--retry", "capacity",
                           "--retry-backoff", "30")
    assert out.returncode == 2 and "--retry-backoff is this machine's wait" in out.stderr
    out = server_world.cli("submit", SPEC, "--set", "role=Good", "--priority", "5")
    assert out.returncode == 2 and "for a Batch queue" in out.stderr
    out = server_world.cli("submit", SPEC, "--set", "role=Good", "--queue", "missing", "--dry-run")
    assert out.returncode == 2 and "no such Batch job queue" in out.stderr
