"""Two sweeps of one spec started in the same instant make the same job names (a name is the spec's name and the
millisecond it was planned in). Neither may stop on the other's names: a name another process on this machine
claimed is given up before anything is sent (launcher.core.claims), a name SageMaker says is another's (a process
elsewhere) is tried again under a new one, and every plan of both sweeps starts; no job is reported by both."""
import json
from datetime import datetime, timezone

import pytest

from launcher.core import claims
from tests.conftest import JOBS

SPEC = str(JOBS / "llama7b.yaml")
INSTANT = datetime(2026, 11, 30, 10, 0, 0, tzinfo=timezone.utc)
PLANS = 4


@pytest.fixture
def same_instant(monkeypatch):
    """Every sweep is planned at INSTANT, as two started together would be."""
    import launcher.plan.sweep as sweep

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return INSTANT

    monkeypatch.setattr(sweep, "datetime", Frozen)


def sweep(run_cli):
    seeds = ",".join(str(s) for s in range(1, PLANS + 1))
    r = run_cli("submit", SPEC, "--set", "role=Good", "--sweep", f"training.seed={seeds}", "--output", "json")
    return r, json.loads(r.out) if r.out.strip() else []


def started(data) -> list[str]:
    return [name for d in data for name in d["jobs"]]


def all_jobs(moto_world) -> set[str]:
    return {j["TrainingJobName"] for j in moto_world.sagemaker.list_training_jobs()["TrainingJobSummaries"]}


def test_a_second_process_on_this_machine_takes_new_names_before_sending_any(same_instant, moto_world, run_cli,
                                                                              monkeypatch):
    first, a = sweep(run_cli)
    assert first.code == 0, first.err
    monkeypatch.setattr(claims, "PROCESS", "another-process")  # the second sweep runs in another process
    creates = []
    import boto3

    real = boto3.session.Session.client

    def counting(self, service, *args, **kwargs):
        client = real(self, service, *args, **kwargs)
        if service == "sagemaker":
            client.meta.events.register("before-call.sagemaker.CreateTrainingJob", lambda **_: creates.append(1))
        return client

    monkeypatch.setattr(boto3.session.Session, "client", counting)
    second, b = sweep(run_cli)
    assert second.code == 0, second.err
    assert len(started(a)) == len(started(b)) == PLANS and not set(started(a)) & set(started(b))
    assert all_jobs(moto_world) == set(started(a)) | set(started(b))
    assert len(creates) == PLANS, "a name another process holds was sent to SageMaker"
    assert all(d["state"] == "started" for d in b)


def test_a_process_elsewhere_that_took_the_names_is_met_with_new_names(same_instant, moto_world, run_cli,
                                                                        monkeypatch, tmp_path):
    first, a = sweep(run_cli)
    assert first.code == 0, first.err
    monkeypatch.setattr(claims, "PROCESS", "a-process-on-another-machine")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "another-machine"))  # no claims shared
    second, b = sweep(run_cli)
    assert second.code == 0, second.err
    assert len(started(b)) == PLANS and not set(started(a)) & set(started(b))
    assert all_jobs(moto_world) == set(started(a)) | set(started(b))
    assert "was taken" in second.err


def test_a_plan_that_could_not_start_says_so_of_itself_not_of_the_sweep(same_instant, moto_world, run_cli,
                                                                         monkeypatch, tmp_path):
    from launcher.submission import create

    first, a = sweep(run_cli)
    monkeypatch.setattr(create, "MAX_RENAMES", 0)  # a name lost once is not tried again
    monkeypatch.setattr(claims, "PROCESS", "elsewhere")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "elsewhere"))
    second, b = sweep(run_cli)
    assert second.code == 4
    errors = [d["error"] for d in b if d["error"]]
    assert errors and all("nothing was started" not in e for e in errors)
    assert "nothing was started" not in second.err
