"""One job's CloudWatch Logs calls (launcher.jobs.ratelimit.LogsCalls): what each answer AWS can give becomes for
the reads, before the log group exists, while Logs Insights is busy, and when a connection keeps dropping."""
import random

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError

from launcher.core.aws import AwsError
from launcher.jobs.logrecords import NoteKind, Notes, Stats
from launcher.jobs.ratelimit import MAX_TRANSIENT_RETRIES, LogsCalls, RateLimiter, Unsupported
from tests.emulation import VirtualClock


def _error(code, status=400):
    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}},
                       "Op")


class _Answers:
    """A Logs client whose every operation raises (or returns) what the test says, counting the calls."""

    def __init__(self, answer):
        self.answer, self.calls = answer, 0

    def _call(self, **_params):
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    filter_log_events = start_query = get_query_results = _call


def _calls(client):
    clock = VirtualClock()
    notes = []
    calls = LogsCalls("job", client, RateLimiter(100.0, clock=clock, sleep=clock.sleep), Stats(),
                      Notes(notes.append, clock), clock=clock, sleep=clock.sleep, rng=random.Random(0))
    return calls, notes


def test_a_client_without_the_operation_is_unsupported():
    calls, _ = _calls(object())
    with pytest.raises(Unsupported, match="this client has no start_query"):
        calls.call("start_query", {}, insights=True)


def test_before_the_log_group_exists_a_read_finds_nothing_and_a_query_says_so():
    client = _Answers(_error("ResourceNotFoundException"))
    calls, _ = _calls(client)
    assert calls.call("filter_log_events", {}) == {"events": []}
    assert calls.call("start_query", {}, insights=True) == {"_missing_group": True}
    with pytest.raises(Unsupported, match="ResourceNotFoundException"):  # a query that vanished is not trusted
        calls.call("get_query_results", {}, insights=True)
    assert client.calls == 3  # none retried


def test_thirty_queries_running_is_a_wait_for_insights_and_an_error_for_a_read():
    calls, notes = _calls(_Answers(_error("LimitExceededException")))
    assert calls.call("start_query", {}, insights=True) == {"_busy": True}
    assert [n.kind for n in notes] == [NoteKind.INSIGHTS_BUSY]
    with pytest.raises(AwsError, match="LimitExceededException"):
        calls.call("filter_log_events", {})


@pytest.mark.parametrize("insights", [True, False])
def test_a_connection_that_keeps_dropping_is_retried_a_few_times_then_given_up(insights):
    client = _Answers(ConnectionClosedError(endpoint_url="https://logs.us-west-2.amazonaws.com"))
    calls, notes = _calls(client)
    with pytest.raises(Unsupported if insights else AwsError) as raised:
        calls.call("start_query" if insights else "filter_log_events", {}, insights=insights)
    assert client.calls == MAX_TRANSIENT_RETRIES + 1
    assert [n.kind for n in notes] == [NoteKind.READ_FAILED] * MAX_TRANSIENT_RETRIES
    assert calls.stats.retried == MAX_TRANSIENT_RETRIES
    if insights:
        assert str(raised.value) == "connection dropped"
    else:
        assert "\n" not in str(raised.value)  # one line for the user


@pytest.mark.parametrize("insights", [True, False])
def test_an_endpoint_that_cannot_be_reached_is_unsupported_for_insights_and_an_error_for_a_read(insights):
    client = _Answers(EndpointConnectionError(endpoint_url="https://logs.us-west-2.amazonaws.com"))
    calls, _ = _calls(client)
    with pytest.raises(Unsupported if insights else AwsError) as raised:
        calls.call("get_query_results" if insights else "filter_log_events", {}, insights=insights)
    assert client.calls == 1
    if insights:
        assert str(raised.value) == "EndpointConnectionError"
