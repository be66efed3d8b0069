"""The installed `smp-launch` console script, run as a subprocess against the emulator in a moto server."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

import emulator
from tests.conftest import REPO, ctrl_c_as_a_terminal_has_it
from tests.emulation import body_of, lost_and_duplicated

EXE = shutil.which("smp-launch", path=str(Path(sys.executable).parent))
pytestmark = pytest.mark.skipif(EXE is None, reason="the smp-launch console script is not installed")
QUICK = {"starting": 0.3, "downloading": 0.2, "training": 0.8, "uploading": 0.2, "line_interval": 0.1}


@pytest.fixture
def endpoint(moto_server):
    return moto_server  # conftest: one server per test process, reset by `env`


@pytest.fixture
def env(endpoint, tmp_path):
    emulator.reset_server(endpoint)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    yield {**base, **emulator.server_env(endpoint), "XDG_STATE_HOME": str(tmp_path), "NO_COLOR": "1"}
    emulator.set_clock(None)


@pytest.fixture
def sm(endpoint, env):
    return boto3.client("sagemaker", endpoint_url=endpoint, region_name="us-west-2",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def cli(env, *args, timeout=60):
    return subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=timeout)


def spawn(env, *args):
    return subprocess.Popen([EXE, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_as_a_terminal_has_it)


def created_ago(sm, seconds, job):
    emulator.set_clock(lambda: time.time() - seconds)
    try:
        return emulator.add_job(job, sm)
    finally:
        emulator.set_clock(None)


def test_logs_no_follow_and_status(env, sm):
    job = created_ago(sm, 3600, emulator.EmulatedJob("e2e-done", hosts=3, training=40, late_hosts={3: 9.0},
                                                     backdate_every=4))
    logs = cli(env, "logs", "e2e-done", "--no-follow")
    assert logs.returncode == 0, logs.stderr
    assert lost_and_duplicated(job.expected_messages(), body_of(logs.stdout)) == (0, 0)
    assert "decoy" not in logs.stdout
    status = cli(env, "status", "e2e-done", "--output", "json")
    assert status.returncode == 0 and json.loads(status.stdout)["status"] == "Completed"


def test_follow_until_completed_or_failed(env, sm):
    ok = emulator.add_job(emulator.EmulatedJob("e2e-ok", hosts=3, backdate_every=5, backdate_seconds=0.3, **QUICK), sm)
    emulator.add_job(emulator.EmulatedJob("e2e-bad", hosts=2, outcome="Failed", **QUICK), sm)
    procs = {name: spawn(env, "logs", name, "--interval", "0.1") for name in ("e2e-ok", "e2e-bad")}
    done = {name: (p.wait(timeout=60), *p.communicate()) for name, p in procs.items()}
    code, out, err = done["e2e-ok"]
    assert code == 0, err
    assert lost_and_duplicated(ok.expected_messages(), body_of(out)) == (0, 0)
    assert [s for s in ("Starting", "Downloading", "Training", "Uploading", "Completed") if f" {s} - " in err] == [
        "Starting", "Downloading", "Training", "Uploading", "Completed"]
    code, out, err = done["e2e-bad"]
    assert code == 1 and "e2e-bad Failed: AlgorithmError: ExecuteUserScriptError" in err
    assert "RuntimeError: CUDA out of memory" in out


def test_stop_while_following_exits_5(env, sm):
    emulator.add_job(emulator.EmulatedJob("e2e-stop", hosts=2, **{**QUICK, "training": 120, "stopping": 0.3}), sm)
    follower = spawn(env, "logs", "e2e-stop", "--interval", "0.1")
    assert follower.stdout.readline().startswith("[algo-")
    stop = cli(env, "stop", "e2e-stop", "--yes")
    assert stop.returncode == 0 and "e2e-stop is Stopping" in stop.stderr
    assert follower.wait(timeout=30) == 5
    assert "e2e-stop Stopped" in follower.stderr.read()


def test_ctrl_c_stops_following_and_leaves_the_job_running(env, sm):
    emulator.add_job(emulator.EmulatedJob("e2e-long", **{**QUICK, "training": 120}), sm)
    follower = spawn(env, "logs", "e2e-long", "--interval", "0.1")
    assert follower.stdout.readline().startswith("[algo-")
    follower.send_signal(signal.SIGINT)
    assert follower.wait(timeout=30) == 130
    assert "stopped following e2e-long; the job keeps running" in follower.stderr.read()
    assert sm.describe_training_job(TrainingJobName="e2e-long")["TrainingJobStatus"] == "InProgress"


def test_a_closed_pipe_exits_quietly(env, sm):
    created_ago(sm, 3600, emulator.EmulatedJob("e2e-big", hosts=8, training=600, decoy=False))
    reader = spawn(env, "logs", "e2e-big", "--no-follow")
    assert reader.stdout.readline().startswith("[algo-1]")
    reader.stdout.close()  # `| head -1`
    assert reader.wait(timeout=30) == 0
    # nothing but the notice a slow (loaded) machine may give for a call with no answer yet
    assert [ln for ln in reader.stderr.read().splitlines() if not ln.startswith("waiting for ")] == []


def test_lifecycle_commands_never_import_the_sdk(env, sm):
    created_ago(sm, 3600, emulator.EmulatedJob("e2e-imp", hosts=2, training=120))
    emulator.add_job(emulator.EmulatedJob("e2e-imp-run", training=600), sm)
    code = ("import sys; from launcher.cli import main\n"
            "for args in (['logs', 'e2e-imp', '--no-follow'], ['status', 'e2e-imp'], ['list'],\n"
            "             ['metrics', 'e2e-imp'], ['wait', 'e2e-imp'], ['stop', 'e2e-imp-run', '--yes'],\n"
            "             ['logs', 'e2e-imp']):\n"
            "    try:\n        main(args)\n    except SystemExit as e:\n"
            "        assert e.code == 0, (args, e.code)\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('sagemaker', 'moto', 'torch', 'pandas')]\n"
            "sys.stderr.write('IMPORTED ' + ','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert out.stderr.strip().endswith("IMPORTED"), out.stderr[-800:]


@pytest.fixture
def plain_moto(tmp_path):
    """A moto server with none of the emulator's additions: its StartQuery ignores our filter and fields."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        hung = time.monotonic() + 600  # until it answers, however long a busy machine takes to start it
        while True:
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < hung, "moto_server never answered"
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_follow_on_a_plain_moto_server_falls_back_and_loses_nothing(plain_moto, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(emulator.server_env(plain_moto), XDG_STATE_HOME=str(tmp_path), NO_COLOR="1")
    kw = {"endpoint_url": plain_moto, "region_name": "us-west-2", "aws_access_key_id": "testing",
          "aws_secret_access_key": "testing"}
    sm, logs = boto3.client("sagemaker", **kw), boto3.client("logs", **kw)
    sm.create_training_job(
        TrainingJobName="plain", RoleArn="arn:aws:iam::123456789012:role/r",
        AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://b/o"}, StoppingCondition={"MaxRuntimeInSeconds": 60},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 10})
    logs.create_log_group(logGroupName="/aws/sagemaker/TrainingJobs")
    now = int(time.time() * 1000)
    expected = []
    for host in (1, 2):
        stream = f"plain/algo-{host}-1"
        logs.create_log_stream(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream)
        # lines 5 to 60 s old, ingested now: each one later than the fresh read's overlap
        events = [{"timestamp": now - 60_000 + i * 1000, "message": f"host {host} line {i}"} for i in range(55)]
        logs.put_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream, logEvents=events)
        expected += [e["message"] for e in events]
    done = cli(env, "logs", "plain", "--interval", "0.1")
    assert done.returncode == 0, done.stderr
    assert lost_and_duplicated(expected, body_of(done.stdout)) == (0, 0)
    assert "Logs Insights is not available for the late-line check" in done.stderr
    assert "Traceback" not in done.stderr
