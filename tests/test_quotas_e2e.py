"""End to end: the installed CLI against the emulator's Service Quotas and Price List API (moto has neither)."""
import json
import sys

import emulator
from emulator import pricing as fake_prices
from emulator import quotas as fake_quotas
from tests.conftest import REPO


def hold(server_world, name, count, itype="ml.p4d.24xlarge"):
    """A job of this account already running on `count` instances."""
    emulator.add_job(emulator.EmulatedJob(name, hosts=count, instance_type=itype, training=3600),
                     server_world.session.client("sagemaker"))


def jobs(server_world):
    return sorted(j["TrainingJobName"] for j in
                  server_world.session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"])


def test_a_job_over_quota_is_refused_with_exit_3_before_anything_is_created(server_world):
    fake_quotas.set_quota("ml.p4d.24xlarge", 3)
    hold(server_world, "holder", 2)
    for extra in (["--dry-run"], []):
        out = server_world.cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--set",
                               "cluster.instance_count=2", *extra)
        assert out.returncode == 3, out.stderr
        err = " ".join(out.stderr.split())
        for part in ("'ml.p4d.24xlarge for training job usage' in us-west-2 is 3",
                     "2 in use by 1 running job(s) (holder)", "this job needs 2: 4 > 3",
                     "Service Quotas console", "request-service-quota-increase --service-code sagemaker"):
            assert part in err, (part, out.stderr)
        assert "Traceback" not in out.stderr
    assert jobs(server_world) == ["holder"]
    s3 = server_world.session.client("s3")
    assert "Contents" not in s3.list_objects_v2(Bucket="my-smp-bucket")


def test_within_the_quota_the_job_starts_and_json_says_what_was_checked(server_world):
    fake_quotas.set_quota("ml.p4d.24xlarge", 4)
    hold(server_world, "holder", 2)
    out = server_world.cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--set", "cluster.instance_count=2",
                           "--output", "json")
    assert out.returncode == 0, out.stderr
    quota = json.loads(out.stdout)["quota"]
    assert (quota["verdict"], quota["quota"], quota["in_use"], quota["needed"]) == ("ok", 4, 2, 2)
    assert quota["in_use_jobs"] == ["holder"] and quota["quota_source"] == "applied"


def test_a_type_sagemaker_does_not_offer_in_the_region_is_its_own_error(server_world):
    fake_quotas.not_offered("ml.p5.48xlarge", "us-west-2")
    out = server_world.cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--set",
                           "cluster.instance_type=ml.p5.48xlarge", "--set", "framework.pytorch_version='2.5.1'",
                           "--dry-run")
    assert out.returncode == 3, out.stderr
    assert "SageMaker does not offer ml.p5.48xlarge for training in us-west-2" in out.stderr
    assert "request-service-quota-increase" not in out.stderr


def test_against_plain_moto_submit_goes_on_with_one_note_for_quotas_and_one_for_prices(server_world):
    fake_quotas.plain(True)
    fake_prices.plain(True)
    out = server_world.cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--dry-run")
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert len([x for x in lines if x.startswith("warning: quota: cannot tell")]) == 1, out.stderr
    assert len([x for x in lines if x.startswith("warning: prices: cannot tell")]) == 1, out.stderr
    assert "<html" not in out.stderr.lower() and "Traceback" not in out.stderr


def test_submit_caches_prices_and_prices_shows_them_with_their_source_without_asking_aws(server_world):
    fake_prices.set_price("ml.p4d.24xlarge", "us-west-2", 37.688)
    fake_prices.set_price("ml.p4d.24xlarge", "us-west-2", 13.19, spot=True)
    before = json.loads(server_world.cli("prices", "ml.p4d.24xlarge", "--output", "json").stdout)["prices"]
    # no figure for us-west-2 shipped: us-east-1's on-demand one, named as such; no spot figure anywhere
    assert [(p["usd_per_hour"], p["price_region"]) for p in before] == [(25.251, "us-east-1"), (None, None)], before
    out = server_world.cli("submit", "jobs/llama7b.yaml", "--set", "role=Good", "--dry-run")
    assert out.returncode == 0, out.stderr
    calls = fake_prices.calls()
    shown = json.loads(server_world.cli("prices", "ml.p4d.24xlarge", "--output", "json").stdout)
    assert fake_prices.calls() == calls, "prices without --refresh asked AWS"
    assert [(p["spot"], p["usd_per_hour"], p["price_region"]) for p in shown["prices"]] == [
        (False, 37.688, "us-west-2"), (True, 13.19, "us-west-2")]  # the region's own figure, once it has one
    assert all(p["source"].startswith("AWS Price List API") and p["date"] for p in shown["prices"])
    fake_prices.set_price("ml.p4d.24xlarge", "us-west-2", 30.0)
    refreshed = json.loads(server_world.cli("prices", "ml.p4d.24xlarge", "--refresh", "--output", "json").stdout)
    assert refreshed["refreshed"] and refreshed["prices"][0]["usd_per_hour"] == 30.0
    table = server_world.cli("prices", "ml.p4d.24xlarge", "ml.p5.48xlarge")
    assert table.returncode == 0 and "30.000" in table.stdout and "no source" in table.stdout


def test_a_sweep_waits_for_quota_instead_of_failing(server_world):
    """Quota for one instance, two one-instance plans: the second waits while the first runs, and starts once it
    ended. The emulated jobs run on a clock this test holds still until the CLI says it waits, so no machine
    is too slow or too fast for it."""
    import subprocess
    import threading
    import time
    from pathlib import Path

    now = [time.time()]
    fake_quotas.set_quota("ml.p4d.24xlarge", 1)
    emulator.set_default({"starting": 1.0, "downloading": 1.0, "training": 100.0, "uploading": 1.0, "decoy": False})
    emulator.set_clock(lambda: now[0])
    args = ["submit", "jobs/llama7b.yaml", "--set", "role=Good", "--sweep", "training.batch_size=2,4",
            "--max-concurrent", "2", "--interval", "0.2", "--output", "json"]
    proc = subprocess.Popen([str(Path(sys.executable).parent / "smp-launch"), *args], cwd=REPO, env=server_world.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    waiting = threading.Event()

    def read_stderr() -> None:
        for line in proc.stderr:
            said.append(line)
            if "waiting for quota" in line:
                waiting.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert waiting.wait(180), "".join(said)
        now[0] += 1000.0  # the first job ends: the quota frees
        stdout, _ = proc.communicate(timeout=180)
    finally:
        proc.kill() if proc.poll() is None else None
        emulator.set_clock(None)
        emulator.set_default(None)
    reader.join(10)
    stderr = "".join(said)
    assert proc.returncode == 0, stderr
    runs = json.loads(stdout)
    assert [r["state"] for r in runs] == ["started", "started"], stderr
    assert stderr.count("waiting for quota") == 1 and "1 in use by 1 running job(s)" in stderr
    assert runs[0]["submission"]["quota"]["in_use"] == 0 and runs[1]["submission"]["quota"]["in_use"] == 0


def test_a_capacity_failure_falls_back_to_the_next_type_and_status_and_wait_say_which_ran(server_world):
    fake_quotas.no_capacity("ml.p5.48xlarge")
    emulator.set_default({"starting": 0.3, "downloading": 0.2, "training": 1.0, "uploading": 0.2, "decoy": False})
    overrides = ["--set", "role=Good", "--set",
                 "cluster.instance_types=[ml.p5.48xlarge, ml.p4de.24xlarge, ml.p4d.24xlarge]",
                 "--set", "cluster.instance_count=4", "--set", "smp.hybrid_shard_degree=32",
                 "--set", "training.batch_size=1"]
    try:
        out = server_world.cli("submit", "jobs/llama70b.yaml", *overrides, "--interval", "0.2")
        assert out.returncode == 0, out.stderr
        started = out.stdout.split()[1]
        assert started.endswith("-r2") and f"started {started}" in out.stdout
        first = started[:-3]
        assert f"{first}: Failed [capacity]" in out.stderr
        assert f"ml.p5.48xlarge had no capacity ({first}); trying 4 x ml.p4de.24xlarge as {started}" in out.stderr
        status = json.loads(server_world.cli("status", "latest", "--output", "json").stdout)
        assert status["job_name"] == started and status["instance_type"] == "ml.p4de.24xlarge"
        (row,) = json.loads(server_world.cli("wait", "latest", "--interval", "0.2", "--output", "json").stdout)
        assert (row["job_name"], row["status"], row["instance_type"]) == (started, "Completed", "ml.p4de.24xlarge")
        lines = server_world.cli("wait", first, started, "--interval", "0.2")
        assert f"{first}: Failed" in lines.stdout and "(4 x ml.p5.48xlarge)" in lines.stdout
        assert f"{started}: Completed (4 x ml.p4de.24xlarge)" in lines.stdout
    finally:
        emulator.set_default(None)


def test_against_a_plain_moto_server_process_quotas_and_prices_are_one_note_each(tmp_path, monkeypatch):
    """moto's own server (its console script, none of the emulator's patches): Service Quotas has no sagemaker
    quota and no ListServiceQuotas, pricing has no backend at all."""
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    import boto3

    from tests.aws_setup import create_world

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # up to 30 s for it to listen; a server that died ends the wait at once
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1)
                break
            except OSError:
                assert server.poll() is None, "moto_server exited"
                time.sleep(0.1)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("SMP_LAUNCH_")},
               **emulator.server_env(url), "XDG_STATE_HOME": str(tmp_path), "AWS_EC2_METADATA_DISABLED": "true"}
        for k, v in emulator.server_env(url).items():
            monkeypatch.setenv(k, v)
        create_world(boto3.Session(region_name="us-west-2"))
        out = subprocess.run([str(Path(sys.executable).parent / "smp-launch"), "submit", "jobs/llama7b.yaml",
                              "--set", "role=Good", "--dry-run"], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=300)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert out.returncode == 0, out.stderr
    print("plain moto server:", out.stderr)
    lines = out.stderr.splitlines()
    assert len([x for x in lines if x.startswith("warning: quota: cannot tell")]) == 1, out.stderr
    assert len([x for x in lines if x.startswith("warning: prices: cannot tell")]) == 1, out.stderr
    assert "<html" not in out.stderr.lower() and "Traceback" not in out.stderr
