"""More bugs the rest of the suite did not notice, in the spec loader, the role check and the log tailer.

Each test fails on a realistic mutation of the core, named in its docstring (`make mutation` finds them).
"""
from types import SimpleNamespace

import pytest
from botocore.exceptions import ClientError

from launcher.core.errors import OVERRIDES, SpecError
from launcher.jobs.tail import LogReader, RateLimiter
from launcher.spec import load_spec
from launcher.spec.loader import MAX_BYTES
from launcher.submission.role import FAIL, UNKNOWN, RoleCheck, check_role
from tests.conftest import MINIMAL


@pytest.mark.parametrize("text", ["", "# to be written\n\n"], ids=["empty", "comments-only"])
def test_an_empty_spec_is_reported_at_its_first_line(write_spec, text):
    """Kills loader: the "spec is empty" error placed at line 2 of a file that may have no line 2."""
    path = write_spec(text)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    (problem,) = err.value.problems
    assert problem.message == "the spec is empty"
    assert (problem.mark.line, problem.mark.col) == (1, 1)
    assert err.value.lines() == [f"{problem.mark.file}:1:1: (spec): the spec is empty"]


def test_a_spec_of_exactly_the_size_limit_loads(tmp_path):
    """Kills loader: a spec of exactly MAX_BYTES refused as too big (the limit is "at most")."""
    body = MINIMAL.lstrip("\n")
    at_limit = tmp_path / "at-limit.yaml"
    at_limit.write_bytes((body + "#" * (MAX_BYTES - len(body) - 1) + "\n").encode())
    assert at_limit.stat().st_size == MAX_BYTES
    assert load_spec(at_limit).spec.name == "demo"
    over = tmp_path / "over.yaml"
    over.write_bytes(at_limit.read_bytes() + b"\n")
    with pytest.raises(SpecError) as err:
        load_spec(over)
    assert f"at most {MAX_BYTES}" in err.value.problems[0].message


def test_an_unquoted_variable_in_the_base_stays_a_number_and_a_quoted_override_stays_text(write_spec):
    """Kills loader: the merge keeping a base's unquoted paths only where the child also writes them."""
    write_spec("training:\n  max_steps: ${SMP_TEST_STEPS:-250}\n  log_every: 5\n", "base.yaml")
    child = write_spec("extends: base.yaml\n" + MINIMAL.lstrip("\n") + "training:\n  log_every: 7\n")
    training = load_spec(child, env={}).spec.training
    assert (training.max_steps, training.log_every) == (250, 7)  # `max_steps: 250` in the base would read so
    assert load_spec(child, env={"SMP_TEST_STEPS": "40"}).spec.training.max_steps == 40
    override = 'training:\n  max_steps: "${SMP_TEST_STEPS:-250}"\n'
    quoted = write_spec("extends: base.yaml\n" + MINIMAL.lstrip("\n") + override, "quoted.yaml")
    with pytest.raises(SpecError) as err:  # the child quoted it: text, as `max_steps: "250"` would be
        load_spec(quoted, env={})
    (problem,) = err.value.problems
    assert problem.path == "training.max_steps" and "'250'" in problem.message
    assert problem.mark.file.endswith("quoted.yaml")


@pytest.mark.parametrize("override, col", [("description=ab\x01c", 15), ("name=\x1b[31m", 6)],
                         ids=["inside", "first"])
def test_a_control_character_in_a_set_value_points_at_its_column(override, col, write_spec):
    """Kills loader: the column of a control character in a --set value one to the left of it."""
    with pytest.raises(SpecError) as err:
        load_spec(write_spec(MINIMAL), ["cluster.instance_count=2", override])
    (problem,) = err.value.problems
    assert (problem.mark.file, problem.mark.line, problem.mark.col) == (OVERRIDES, 2, col)
    assert problem.message.startswith("control character")
    assert "\x01" not in str(err.value) and "\x1b" not in str(err.value)


def test_the_role_check_prints_one_safe_line_for_each_finding():
    """Kills iam: RoleCheck.lines() returning nothing, so `check-role` could not print its verdict."""
    check = RoleCheck(role="Good", role_arn="arn:aws:iam::123456789012:role/Good", verdict=FAIL,
                      missing=[{"action": "s3:GetObject", "resource": "arn:aws:s3:::b/\x1b[2Jk/*",
                                "decision": "implicitDeny"}],
                      problems=["the trust policy does not let sagemaker.amazonaws.com call sts:AssumeRole"],
                      unknowns=["cannot simulate the caller's iam:PassRole (AccessDenied)"])
    lines = check.lines()
    assert lines[0] == "role arn:aws:iam::123456789012:role/Good: fail"
    assert lines[1] == "  the trust policy does not let sagemaker.amazonaws.com call sts:AssumeRole"
    assert lines[2].startswith("  missing s3:GetObject on arn:aws:s3:::b/") and lines[2].endswith("(implicitDeny)")
    assert lines[3] == "  cannot tell: cannot simulate the caller's iam:PassRole (AccessDenied)"
    assert len(lines) == 4 and not any("\x1b" in line for line in lines)  # a key from AWS cannot clear the screen


class _RoleUnreadable:
    """An IAM client whose caller may not read roles (iam:GetRole denied)."""

    def get_role(self, **_):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, "GetRole")


def test_a_role_the_caller_may_not_read_is_cannot_tell():
    """Kills iam: the check returning no verdict at all when iam:GetRole is denied."""
    check = check_role(SimpleNamespace(role="Good"), _RoleUnreadable(), sts=None)
    assert check.verdict == UNKNOWN and not check.missing and not check.problems
    assert check.unknowns == ["cannot read the role (AccessDenied); the job may still work"]
    assert check.as_dict()["verdict"] == UNKNOWN


class _Logs:
    """FilterLogEvents answering the same page every time (the fresh read's overlap re-reads lines)."""

    def __init__(self, events):
        self.events = events

    def filter_log_events(self, **_):
        return {"events": list(self.events)}


def test_the_dedup_memory_statistic_is_the_most_ids_held():
    """Kills tail: stats.max_seen never rising (the dedup memory's peak, which bench_logs reports)."""
    now = 1_700_000_000.0
    ts = int(now * 1000)
    events = [{"logStreamName": f"job/algo-{h}-1", "eventId": f"id-{h}-{i}", "timestamp": ts - 3000 + i,
               "ingestionTime": ts - 3000 + i, "message": f"step {i}"} for h in (1, 2) for i in range(3)]
    reader = LogReader("job", _Logs(events), RateLimiter(100, clock=lambda: now, sleep=lambda _s: None),
                       clock=lambda: now, sleep=lambda _s: None)
    assert len(reader.poll()) == 6
    assert reader.stats.max_seen == 6
    assert reader.poll() == [] and reader.stats.duplicates == 6
    assert reader.stats.max_seen == 6  # the same ids again are not more ids held
