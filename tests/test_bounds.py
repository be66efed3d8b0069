"""Everything read is bounded: --set paths, a job's stored tarball, every AWS call's time, the state file,
answers that are not UTF-8, and the folder `render -o` writes into."""
import gzip
import io
import os
import sys
import tarfile
import threading
import time
import tracemalloc

import pytest

import emulator
import launcher
from launcher.core import aws, state
from launcher.core.aws import AwsError, Clients
from launcher.core.errors import SpecError, UsageError
from launcher.jobs.stored import MAX_TARBALL, Unreadable, read_source
from launcher.render.files import write_source_dir
from launcher.spec import load_spec
from tests.conftest import JOBS, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from faultproxy import FaultProxy, Rule  # noqa: E402

MB = 2**20


# -- --set paths --------------------------------------------------------------------------------------

@pytest.mark.parametrize("parts", [33, 1000, 20000])
def test_a_deep_set_path_is_one_line_exit_2_in_bounded_memory(parts):
    tracemalloc.start()
    try:
        with pytest.raises(SpecError) as err:
            load_spec(JOBS / "llama7b.yaml", [".".join(["a"] * parts) + "=1"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.value.exit_code == 2 and len(err.value.problems) == 1
    assert f"at most 32 parts; this one has {parts}" in str(err.value)
    assert peak < 64 * MB


def test_a_set_path_of_32_parts_is_still_read():
    with pytest.raises(SpecError) as err:
        load_spec(JOBS / "llama7b.yaml", [".".join(["a"] * 32) + "=1"])
    assert "at most" not in str(err.value) and "unknown key" in str(err.value)


# -- the stored tarball -------------------------------------------------------------------------------

class _S3:
    def __init__(self, data: bytes):
        self.data = data

    def get_object(self, Bucket, Key):
        return {"ContentLength": len(self.data), "Body": io.BytesIO(self.data)}


def _tar(members) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def _long_name_bomb(size: int) -> bytes:
    """A tar header naming a GNU "long name" of `size` bytes, then those bytes: a few hundred KB of gzip."""
    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = tarfile.GNUTYPE_LONGNAME, size
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as g:
        g.write(info.tobuf(format=tarfile.GNU_FORMAT)[:512])
        chunk = b"a" * MB
        for _ in range(size // MB):
            g.write(chunk)
    return out.getvalue()


def test_a_gzip_bomb_in_the_source_is_refused_unpacking_no_more_than_the_bound():
    data = _long_name_bomb(4 * MAX_TARBALL)
    assert len(data) < MAX_TARBALL
    tracemalloc.start()
    try:
        with pytest.raises(Unreadable, match="more than 64 MiB"):
            read_source(_S3(data), "s3://b/source.tar.gz")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * MAX_TARBALL  # the bomb asks for four times the bound in one piece


def test_a_deep_plan_json_and_too_many_members_are_unreadable_not_tracebacks():
    with pytest.raises(Unreadable, match="nests deeper"):
        read_source(_S3(_tar([("plan.json", b"[" * 200000 + b"]" * 200000)])), "s3://b/k.tar.gz")
    many = _tar([(f"f{i}", b"") for i in range(1200)] + [("plan.json", b"{}")])
    with pytest.raises(Unreadable, match="more than 1000 members"):
        read_source(_S3(many), "s3://b/k.tar.gz")


def test_a_plain_source_still_reads():
    stored = read_source(_S3(_tar([("plan.json", b'{"region": "us-west-2"}'), ("train.py", b"print(1)")])),
                         "s3://b/k.tar.gz")
    assert stored.plan == {"region": "us-west-2"} and stored.files["train.py"] == b"print(1)"


def test_a_gzip_of_several_members_is_read_whole():
    from launcher.jobs.stored import gunzip

    assert gunzip(gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"
    with pytest.raises(ValueError, match="ends early"):
        gunzip(gzip.compress(b"abcdef" * 1000)[:-20])
    with pytest.raises(ValueError, match="^not gzip data"):
        gunzip(b"plain text, not a tarball")
    with pytest.raises(ValueError, match="^not gzip data"):
        gunzip(gzip.compress(b"ab") + b"trailing junk")  # a second member that is not gzip


# -- a total deadline on every AWS call ----------------------------------------------------------------

def _through(proxy, **kw) -> Clients:
    return Clients(env={**os.environ, "AWS_ENDPOINT_URL": proxy.url}, region="us-west-2", **kw)


def test_a_trickling_endpoint_ends_at_the_calls_deadline_naming_the_endpoint(server_world, monkeypatch):
    monkeypatch.setattr(aws, "CALL_DEADLINE_S", 2.0)
    rules = [Rule("sagemaker", "DescribeTrainingJob", "trickle", None)]
    with FaultProxy(server_world.url, rules, trickle_s=0.5) as proxy:  # an answer of ~100 bytes: 50 s
        clients = _through(proxy, wait_notice_s=60.0)
        began = time.monotonic()
        with pytest.raises(AwsError) as err:
            launcher.status("no-such-job", clients=clients, diagnose=False)
        took = time.monotonic() - began
    assert err.value.exit_code == 4
    assert proxy.url in str(err.value) and "no whole answer within 2 s" in str(err.value)
    assert took < 25  # the deadline, not the 50 s trickle (nor three of them)


def test_a_call_whose_deadline_ran_out_on_a_hung_try_is_not_tried_again(server_world, monkeypatch):
    """The deadline shuts the connection of a try that never answers; botocore would retry that, but the call's
    time is spent: no second request is sent, and the error names the endpoint and the deadline."""
    monkeypatch.setattr(aws, "CALL_DEADLINE_S", 2.0)
    with FaultProxy(server_world.url, [Rule("sagemaker", "DescribeTrainingJob", "hang", 1)]) as proxy:
        clients = _through(proxy, wait_notice_s=60.0)
        began = time.monotonic()
        with pytest.raises(AwsError) as err:
            launcher.status("no-such-job", clients=clients, diagnose=False)
        took = time.monotonic() - began
        tries = proxy.counts()["sagemaker:DescribeTrainingJob"]
    assert err.value.exit_code == 4 and tries == 1
    assert proxy.url in str(err.value) and "no whole answer within 2 s" in str(err.value)
    assert took < 25


def test_a_call_that_answers_within_its_deadline_is_untouched(server_world, monkeypatch):
    monkeypatch.setattr(aws, "CALL_DEADLINE_S", 2.0)
    emulator.add_job(emulator.EmulatedJob("quick-1", training=600), server_world.session.client("sagemaker"))
    with FaultProxy(server_world.url) as proxy:
        clients = _through(proxy)
        for _ in range(3):
            assert launcher.status("quick-1", clients=clients, diagnose=False).job_name == "quick-1"
        time.sleep(2.5)  # a deadline left armed would now cut the next call short
        assert launcher.status("quick-1", clients=clients, diagnose=False).job_name == "quick-1"


def test_a_trickling_s3_body_ends_at_the_deadline(monkeypatch):
    class Trickle:
        def read(self, n):
            time.sleep(5)
            return b""

    began = time.monotonic()
    with pytest.raises(AwsError, match="s3://b/k gave no whole answer within 1 s"):
        aws.read_body(Trickle(), 10, what="s3://b/k", seconds=1.0)
    assert time.monotonic() - began < 10
    long_key = "s3://b/" + "k" * 300  # a key of any length: the message names it cut to 200 characters
    with pytest.raises(AwsError) as err:
        aws.read_body(Trickle(), 10, what=long_key, seconds=1.0)
    assert str(err.value).startswith(long_key[:199] + "… gave no whole answer within 1 s")


def test_only_a_client_whose_connections_can_be_watched_gets_a_deadline():
    """A botocore client built otherwise (no urllib3 pool manager to hook) keeps its timeouts and is not cut
    short: the deadline needs to know which connection a call reads."""
    from types import SimpleNamespace

    import boto3

    assert aws._watch_connections(boto3.client("sagemaker", region_name="us-west-2")) is True
    odd = SimpleNamespace(_endpoint=SimpleNamespace(http_session=SimpleNamespace(_manager=None)))
    assert aws._watch_connections(odd) is False and aws._watch_connections(SimpleNamespace()) is False


def test_a_body_whose_read_fails_once_its_deadline_shut_it_names_what_was_read(monkeypatch):
    """The deadline shuts the connection; the read then fails with whatever the socket says, and the error
    still names the object and the deadline that ran out, not an endpoint or a default."""
    import threading

    class ShutUnderfoot:
        def read(self, n):
            me = threading.get_ident()
            while me not in aws._EXPIRED:  # until the deadline has run out for this read
                time.sleep(0.01)
            raise ConnectionResetError("connection closed")

    with pytest.raises(AwsError) as err:
        aws.read_body(ShutUnderfoot(), 10, what="s3://b/k", seconds=1.0)
    assert str(err.value).startswith("s3://b/k gave no whole answer within 1 s")


def test_a_body_whose_read_fails_before_its_deadline_passes_the_failure_through():
    """A read that fails on its own (a reset connection, not the deadline) is botocore's or the socket's error,
    as it came: no answer is made up from what was never read."""
    class Reset:
        def read(self, n):
            raise ConnectionResetError("connection reset by peer")

    with pytest.raises(ConnectionResetError, match="connection reset by peer"):
        aws.read_body(Reset(), 10, what="s3://b/k", seconds=30.0)


# -- answers that are not UTF-8 -----------------------------------------------------------------------

def test_bytes_that_are_not_utf8_in_describe_and_filter_log_events_are_no_traceback(server_world):
    from tests.emulation import started_ago

    job = started_ago(server_world.session.client("sagemaker"), 3600,
                      emulator.EmulatedJob("garbled-1", hosts=2, training=40, decoy=False))
    rules = [Rule("sagemaker", "DescribeTrainingJob", "garble", None), Rule("logs", "FilterLogEvents", "garble", None)]
    with FaultProxy(server_world.url, rules) as proxy:
        clients = _through(proxy)
        status = launcher.status("garbled-1", clients=clients, diagnose=False)
        lines = list(launcher.logs("garbled-1", clients=clients))
        fired = proxy.faults()
    assert status.status and fired["garble sagemaker:DescribeTrainingJob"] >= 1
    assert fired["garble logs:FilterLogEvents"] >= 1
    assert len(lines) == len(job.expected_messages())  # the byte lands in a field around the lines, not in them


# -- the state file ------------------------------------------------------------------------------------

def _last_submitted_within(env, seconds=10.0):
    got = {}

    def read():
        try:
            got["value"] = state.last_submitted(env)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            got["error"] = exc

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "reading the state file blocked"
    return got


def test_a_state_file_linked_to_dev_zero_is_refused_at_once(tmp_path):
    folder = tmp_path / "smp-launch"
    folder.mkdir()
    (folder / "last-submitted.json").symlink_to("/dev/zero")
    got = _last_submitted_within({"XDG_STATE_HOME": str(tmp_path)})
    assert isinstance(got.get("error"), UsageError) and "not a regular file" in str(got["error"])


def test_a_state_file_that_is_a_fifo_does_not_block(tmp_path):
    folder = tmp_path / "smp-launch"
    folder.mkdir()
    os.mkfifo(folder / "last-submitted.json")
    got = _last_submitted_within({"XDG_STATE_HOME": str(tmp_path)})
    assert isinstance(got.get("error"), UsageError) and "not a regular file" in str(got["error"])


def test_a_huge_state_file_is_refused_unread(tmp_path):
    folder = tmp_path / "smp-launch"
    folder.mkdir()
    (folder / "last-submitted.json").write_text('{"job_name": "x", "pad": "' + "a" * (2 * MB) + '"}')
    with pytest.raises(UsageError, match="larger than 64 KiB"):
        state.last_submitted({"XDG_STATE_HOME": str(tmp_path)})


def test_a_relative_xdg_state_home_is_ignored(tmp_path):
    env = {"XDG_STATE_HOME": "relative/state", "HOME": str(tmp_path)}
    assert state.state_dir(env) == tmp_path / ".local" / "state" / "smp-launch"
    assert state.state_dir({"XDG_STATE_HOME": str(tmp_path / "s"), "HOME": "/x"}) == tmp_path / "s" / "smp-launch"
    state.record_submitted("job-1", "us-west-2", env)
    assert state.last_submitted(env)["job_name"] == "job-1"


# -- render --out never follows a planted link ------------------------------------------------------------

def test_render_replaces_a_planted_link_and_leaves_its_target_alone(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.py").symlink_to(target)
    paths = write_source_dir({"train.py": "print('hi')\n", "requirements.txt": "x\n"}, out)
    assert target.read_text() == "keep me"
    assert not (out / "train.py").is_symlink() and (out / "train.py").read_text() == "print('hi')\n"
    assert sorted(p.name for p in paths) == ["requirements.txt", "train.py"]
    assert sorted(p.name for p in out.iterdir()) == ["requirements.txt", "train.py"]  # no temporary left


def test_a_file_that_cannot_be_put_in_place_fails_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "out"
    (out / "train.py").mkdir(parents=True)  # a folder where the file goes: the rename cannot replace it
    (out / "train.py" / "kept").write_text("x")
    with pytest.raises(OSError):
        write_source_dir({"train.py": "print('hi')\n"}, out)
    assert sorted(p.name for p in out.iterdir()) == ["train.py"] and (out / "train.py").is_dir()


def test_render_through_the_cli_never_writes_through_a_link(tmp_path, run_cli):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.py").symlink_to(target)
    result = run_cli("render", str(JOBS / "llama7b.yaml"), "--out", str(out))
    assert result.code == 0, result
    assert target.read_text() == "keep me" and "smp" in (out / "train.py").read_text().lower()
