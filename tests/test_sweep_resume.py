"""A sweep cut short (Ctrl-C while it submits, a submit that failed) and run again starts only the plans it had
not started: what it started is kept in the state folder until every plan has started. `--no-resume` starts every
plan again; a sweep that started every plan leaves nothing behind, so running it again is a new sweep; a run still
going in another terminal is never taken for an ended one."""
import json

import pytest

from launcher import api
from launcher.submission import backend
from tests.conftest import JOBS

SPEC = str(JOBS / "llama7b.yaml")
PLANS = 4


def sweep(run_cli, *flags):
    seeds = ",".join(str(s) for s in range(1, PLANS + 1))
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", f"training.seed={seeds}", "--max-concurrent", "9",
                "--output", "json", *flags)
    return r, (json.loads(r.out) if r.out.strip() else [])


def jobs_of(moto_world) -> list[str]:
    return [j["TrainingJobName"] for j in moto_world.sagemaker.list_training_jobs()["TrainingJobSummaries"]]


def seeds_started(moto_world) -> list[str]:
    """The spec hash of every job that exists (one per plan unless a plan was started twice)."""
    sm = moto_world.sagemaker
    hashes = []
    for name in jobs_of(moto_world):
        arn = sm.describe_training_job(TrainingJobName=name)["TrainingJobArn"]
        hashes.append(next(t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]
                           if t["Key"] == "smp-launch:spec-hash"))
    return hashes


class Interrupter:
    """Ctrl-C arrives while the sweep's third CreateTrainingJob is being sent (before SageMaker has it), while
    `armed`."""

    def __init__(self):
        self.armed, self.calls = True, 0

    def undo(self):
        self.armed = False


@pytest.fixture
def interrupt_third_create(monkeypatch):
    real = backend.schedule
    state = Interrupter()

    def schedule(plan, *args, **kwargs):
        state.calls += 1
        if state.armed and state.calls == 3:
            raise KeyboardInterrupt
        return real(plan, *args, **kwargs)

    monkeypatch.setattr(backend, "schedule", schedule)
    return state


def test_a_sweep_run_again_after_ctrl_c_starts_only_what_it_had_not(moto_world, run_cli, interrupt_third_create):
    first, a = sweep(run_cli)
    assert first.code == 130, first.err
    started_first = [n for d in a for n in d["jobs"]]
    assert len(started_first) == 2
    interrupt_third_create.undo()
    second, b = sweep(run_cli)
    assert second.code == 0, second.err
    assert "2 of 4 plans were started by an earlier run of this sweep" in second.err
    skipped = [d for d in b if d["state"] == "skipped"]
    assert sorted(d["job_name"] for d in skipped) == sorted(started_first)
    assert sum(d["state"] == "started" for d in b) == 2
    assert len(jobs_of(moto_world)) == PLANS and len(set(seeds_started(moto_world))) == PLANS, "a plan started twice"
    third, c = sweep(run_cli)  # the sweep is whole now: a new run is a new sweep, every plan starts
    assert third.code == 0 and "earlier run" not in third.err
    assert sum(d["state"] == "started" for d in c) == PLANS


def test_no_resume_starts_every_plan_again(moto_world, run_cli, interrupt_third_create):
    sweep(run_cli)
    interrupt_third_create.undo()
    again, b = sweep(run_cli, "--no-resume")
    assert again.code == 0 and sum(d["state"] == "started" for d in b) == PLANS
    assert len(jobs_of(moto_world)) == 2 + PLANS


def test_a_table_run_again_shows_the_skipped_plans_with_their_jobs(moto_world, run_cli, interrupt_third_create):
    _, a = sweep(run_cli)
    interrupt_third_create.undo()
    seeds = ",".join(str(s) for s in range(1, PLANS + 1))
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", f"training.seed={seeds}", "--max-concurrent", "9")
    assert r.code == 0, r.err
    for name in (n for d in a for n in d["jobs"]):
        assert any(name in line and "skipped" in line for line in r.out.splitlines()), r.out


def test_a_run_still_going_is_not_taken_for_an_ended_one(moto_world, run_cli):
    candidates = api.plan_sweep([SPEC], ["role=Good"], [f"training.seed={','.join(map(str, range(1, PLANS + 1)))}"])
    going = api.sweep_record(candidates)
    going.started(candidates[0].index, "another-terminals-job-1")
    try:
        r, data = sweep(run_cli)
        assert r.code == 0 and sum(d["state"] == "started" for d in data) == PLANS
    finally:
        going.close(finished=False)
    # once that run has ended unfinished, the next run takes its one job as started
    r, data = sweep(run_cli)
    assert [d["job_name"] for d in data if d["state"] == "skipped"] == ["another-terminals-job-1"]


def test_a_record_that_is_not_one_is_passed_over(moto_world, run_cli, tmp_path):
    import os

    from launcher.core.state import state_dir
    from launcher.orchestrate.sweep_record import sweep_id

    candidates = api.plan_sweep([SPEC], ["role=Good"], [f"training.seed={','.join(map(str, range(1, PLANS + 1)))}"])
    folder = state_dir() / "sweeps" / sweep_id([(c.index, c.plan) for c in candidates if c.ok])
    folder.mkdir(parents=True)
    (folder / "junk.json").write_bytes(b"\xff\x00 not json")
    (folder / "wrong.json").write_text(json.dumps({"started": {"0": "../../etc/passwd", "x": "a"}}))
    r, data = sweep(run_cli)
    assert r.code == 0 and sum(d["state"] == "started" for d in data) == PLANS
    assert not [n for n in os.listdir(folder) if n in ("junk.json", "wrong.json")]


def test_a_dry_run_keeps_nothing(moto_world, run_cli):
    from launcher.core.state import state_dir

    seeds = ",".join(str(s) for s in range(1, PLANS + 1))
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", f"training.seed={seeds}", "--dry-run")
    assert r.code == 0 and not (state_dir() / "sweeps").exists()


def test_a_sweep_whose_every_plan_was_started_before_starts_nothing(moto_world, run_cli):
    """A run killed after its last job started but before it could say it was done: the next run has nothing
    left to start, and says so with exit 0 (and the record is then whole, so the run after starts anew)."""
    candidates = api.plan_sweep([SPEC], ["role=Good"], [f"training.seed={','.join(map(str, range(1, PLANS + 1)))}"])
    killed = api.sweep_record(candidates)
    for c in candidates:
        killed.started(c.index, f"killed-run-job-{c.index}")
    killed.close(finished=False)
    r, data = sweep(run_cli)
    assert r.code == 0, r.err
    assert [d["state"] for d in data] == ["skipped"] * PLANS and jobs_of(moto_world) == []
    r, data = sweep(run_cli)
    assert sum(d["state"] == "started" for d in data) == PLANS
