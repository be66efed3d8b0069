"""The last job submitted from this machine, behind `JOB=latest`."""
import pytest

from launcher.core.errors import UsageError
from launcher.core.state import last_submitted, record_submitted, resolve_job, state_dir


def test_record_and_resolve_latest(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path)}
    assert last_submitted(env) is None
    path = record_submitted("llama-1", "eu-west-1", env)
    record_submitted("llama-2", "us-east-1", env)
    assert path.parent == tmp_path / "smp-launch" and [p.name for p in path.parent.iterdir()] == [path.name]
    assert last_submitted(env)["job_name"] == "llama-2"
    assert resolve_job("latest", None, env) == ("llama-2", "us-east-1")
    assert resolve_job("latest", "ap-south-1", env) == ("llama-2", "ap-south-1")  # --region wins
    assert resolve_job("other", None, env) == ("other", None)


def test_home_fallback_and_a_broken_file(tmp_path):
    env = {"HOME": str(tmp_path)}
    assert state_dir(env) == tmp_path / ".local" / "state" / "smp-launch"
    state_dir(env).mkdir(parents=True)
    with pytest.raises(UsageError, match="no job has been submitted from this machine"):
        resolve_job("latest", None, env)


@pytest.mark.parametrize("content,why", [
    ("{not json", "is not valid JSON"),
    ('["a list"]', "does not hold a job record"),
    ('{"job_name": 7, "region": "us-west-2"}', "has no job name"),
    ('{"job_name": "  ", "region": "us-west-2"}', "has no job name"),
    ('{"job_name": "bad_name", "region": "us-west-2"}', "holds a name that is not a training job name"),
    ('{"job_name": "j-1", "region": ["us-west-2"]}', "region that is not text"),
    (b"\xff\xfe\x00junk", "cannot be read"),
])
def test_a_corrupt_state_file_is_one_clear_line(tmp_path, content, why):
    env = {"XDG_STATE_HOME": str(tmp_path)}
    state_dir(env).mkdir(parents=True)
    path = state_dir(env) / "last-submitted.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(UsageError) as err:
        resolve_job("latest", None, env)
    message = str(err.value)
    assert why in message and str(path) in message and "give a job name" in message and "\n" not in message
    assert err.value.exit_code == 2
    assert resolve_job("named-job", None, env) == ("named-job", None)  # a name never reads the file


def test_tests_never_write_the_real_state_dir(tmp_path_factory):
    assert state_dir().is_relative_to(tmp_path_factory.getbasetemp())  # conftest's autouse fixture


def test_a_record_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "not" / "made" / "yet")}  # its folders are made as needed
    path = record_submitted("llama-1", "eu-west-1", env)
    text = path.read_text()
    path.write_text(text + " " * (64 * 1024 - len(text)))  # 64 KiB exactly, the limit the message names
    assert last_submitted(env)["job_name"] == "llama-1"
    path.write_text(text + " " * (64 * 1024 - len(text) + 1))
    with pytest.raises(UsageError, match=r"cannot be read: it is larger than 64 KiB"):
        last_submitted(env)


def test_a_record_that_cannot_be_opened_says_why_in_one_line(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path)}
    state_dir(env).mkdir(parents=True)
    looped = state_dir(env) / "last-submitted.json"
    looped.symlink_to(looped)  # a link to itself: opening it fails with ELOOP
    with pytest.raises(UsageError, match=r"\(.*last-submitted.json\) cannot be read \(OSError\); give a job name"):
        last_submitted(env)
