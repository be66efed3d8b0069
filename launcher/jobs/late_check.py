"""The late-line check: lines that reached CloudWatch more than the fresh read's overlap after their own
timestamp, found once every line of their time can have arrived.

A line that arrives L seconds after its timestamp is only found by a read of its timestamp made after it
arrived, and the fresh read (launcher.jobs.fresh_read) only looks `overlap` back. So once a slice of
timestamps is `horizon` (5 min) old, one Logs Insights query returns exactly the lines of the slice that
arrived late (`toMillis(@ingestionTime) - toMillis(@timestamp) > threshold`), about 3% of them with a
long-tailed lag, where re-reading the slice would fetch every line again. Insights rows carry no eventId,
so the late lines the fresh read printed already are known by (stream, timestamp, message) (`LateKeys`).
Where Logs Insights is missing (a plain moto server), refused (no logs:StartQuery) or fails, the slice is
re-read with FilterLogEvents instead (a "sweep": every event once more); nothing is lost, the reads cost
more, and a note says so once. `finish` checks what is left when the job has ended.

Logs Insights: a query returns at most `limit` rows (10,000 by default, the API allows more); queries run
for a few seconds, 30 at once per account (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/
APIReference/API_StartQuery.html, https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/CWL_QuerySyntax-Limit.html).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from launcher.core.names import LOG_GROUP
from launcher.core.sanitize import clean
from launcher.jobs.fresh_read import LateKeys, filter_params
from launcher.jobs.logrecords import BUCKET_MS, LateCheckMode, LogLine, NoteKind, Notes, Stats
from launcher.jobs.ratelimit import LogsCalls, Unsupported
from launcher.jobs.shaping import Shaper

LATE_LIMIT = 10_000
LATE_LIMIT_FINAL = 20_000  # the end-of-job check asks for more rows a query (the API allows 100,000): fewer calls
QUERY_WAIT_S = 1.0  # between two GetQueryResults of one query while the job's end waits on it
QUERY_GIVE_UP_S = 300.0  # a query still running after this is read the slow way instead
FINAL_CHECK_S = 60.0  # the end-of-job check for late lines gives up (and says so) after this


class Slice:
    """A range of timestamps [start, end) the late check reads once every line of it can have arrived."""

    __slots__ = ("start", "end", "query_id", "started", "params", "sweep", "done", "keys", "limit")

    def __init__(self, start: int, end: int, sweep: bool = False, keys: int = 0, limit: int = LATE_LIMIT):
        self.start, self.end, self.sweep = start, end, sweep
        self.keys, self.limit = keys, limit  # late lines the fresh read printed in it; rows a query returns
        self.query_id: str | None = None
        self.started = 0.0
        self.params: dict[str, Any] | None = None  # a sweep's FilterLogEvents call under way
        self.done = False


def _regex_literal(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "\\" + ch for ch in text)


class LateCheck:
    """Plans slices of timestamps behind the horizon and checks each once: a Logs Insights query, or a sweep."""

    def __init__(self, job: str, calls: LogsCalls, shaper: Shaper, stats: Stats, notes: Notes, late_keys: LateKeys,
                 *, since_ms: int | None, late_ms: int, horizon_ms: int, sweep_span_ms: int, query_span_ms: int,
                 insights: bool = True, final_check_s: float | None = None, page_size: int | None = None,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep):
        self.job, self.prefix = job, job + "/"
        self.calls, self.shaper, self.stats, self.notes, self.late_keys = calls, shaper, stats, notes, late_keys
        self.page_size = page_size
        self._since = since_ms
        self._late_ms, self._horizon = late_ms, horizon_ms
        self._sweep_span, self._span = sweep_span_ms, query_span_ms
        self._final_check_s = FINAL_CHECK_S if final_check_s is None else final_check_s
        self._clock, self._sleep = clock, sleep
        self._plan_from: int | None = None  # timestamps below it are planned into slices
        self._slices: list[Slice] = []
        self._insights: bool | None = None if insights else False  # None: not tried yet
        self._rows_per_key = 1.5  # rows a query returns per late line the fresh read printed (measured)

    @property
    def check_from(self) -> int | None:
        """Every line with a timestamp below this has been handed over once, late ones included."""
        return self._slices[0].start if self._slices else self._plan_from

    def begin(self, now_ms: int) -> None:
        """At the first poll: lines older than the horizon have all arrived, so the first read is final for them."""
        if self._plan_from is None:
            self._plan_from = now_ms - self._horizon if self._since is None else max(now_ms - self._horizon,
                                                                                    self._since)

    def check(self, now_ms: int, fresh_from: int | None, budget: int | None) -> Iterator[list[LogLine]]:
        """A poll's share: the slices whose lines have all arrived, within `budget` calls."""
        return self._late(now_ms, fresh_from, budget, None)

    def finish(self, fresh_from: int | None) -> Iterator[list[LogLine]]:
        """After the job has ended (and a draining read): check every slice not yet checked, to now.

        Gives up after `final_check_s` and says in a note which timestamps could not be checked.
        """
        if self._plan_from is None or fresh_from is None:
            return
        end = int(self._clock() * 1000) + 1
        deadline = self._clock() + self._final_check_s
        if self._insights is False:
            span_s = (end - (self.check_from or end)) / 1000
            self.notes.say(NoteKind.FINAL_REREAD, f"reading the last {span_s:.0f}s of {self.job} once more for lines "
                           "that reached CloudWatch late, without Logs Insights", span_s=span_s)
        while self._slices or self._plan_from < end:
            calls = self.stats.calls + self.stats.query_calls
            yield from self._late(end, fresh_from, None, end)
            if not self._slices and self._plan_from >= end:
                return
            if self._clock() >= deadline:
                first = self.check_from or end
                left_s = (end - first) / 1000
                self.stats.unchecked_s += left_s
                self.notes.say(NoteKind.FINAL_UNCHECKED, f"warning: could not finish checking {self.job} for lines "
                               f"that reached CloudWatch late ({left_s:.0f}s of timestamps left after "
                               f"{self._final_check_s:.0f}s); reading its logs again later shows them",
                               job=self.job, left_s=left_s, after_s=self._final_check_s)
                return
            pending = [s for s in self._slices if not s.done]
            if self.stats.calls + self.stats.query_calls == calls or all(
                    s.query_id is not None and not s.sweep for s in pending):
                self._sleep(QUERY_WAIT_S)  # queries are running: give them a moment

    def _late(self, now_ms: int, fresh_from: int | None, budget: int | None,
              final_end: int | None) -> Iterator[list[LogLine]]:
        """Check the slices whose lines have all arrived (all up to `final_end` once the job has ended)."""
        if self._plan_from is None or fresh_from is None:
            return
        if final_end is None:
            due = min(now_ms - self._horizon, fresh_from)
            due -= due % BUCKET_MS
            if due - self._plan_from > self._horizon:  # reads cannot keep up with the volume
                skip_to = due - self._horizon
                behind_s, horizon_s = (due - self._plan_from) / 1000, self._horizon / 1000
                self.stats.skipped_s += (skip_to - self._plan_from) / 1000
                self.notes.hint(NoteKind.CHECK_BEHIND, f"the late-line check is {behind_s:.0f}s behind (reads limited "
                                f"by the call rate); lines more than {horizon_s:.0f}s late may be missed", force=True,
                                behind_s=behind_s, horizon_s=horizon_s)
                self._plan_from = skip_to
        else:
            due = final_end
        most = 8 if final_end is not None else 2
        limit = LATE_LIMIT if final_end is None else LATE_LIMIT_FINAL
        while self._plan_from < due and len(self._slices) < most:
            planned = self._slice_end(self._plan_from, due, final_end is not None, limit)
            if planned is None:
                break
            end, keys = planned
            self._slices.append(Slice(self._plan_from, end, sweep=self._insights is False, keys=keys, limit=limit))
            self._plan_from = end
        spent = 0
        for sl in list(self._slices):
            if budget is not None and spent >= budget:
                break
            if sl.done:  # checked already, waiting for an older slice to finish before it is dropped
                continue
            if sl.sweep:
                spent += yield from self._sweep(sl, None if budget is None else budget - spent)
            else:
                spent += yield from self._query(sl, final_end is not None)
        while self._slices and self._slices[0].done:
            self._slices.pop(0)
        if self.check_from is not None:
            self.late_keys.forget_below(self.check_from)

    def _slice_end(self, start: int, due: int, final: bool, limit: int) -> tuple[int, int] | None:
        """Where the next slice from `start` ends (and its late lines), or None to wait for more.

        A sweep reads `sweep_span` at a time. A query's slice is sized from the late lines the fresh
        read printed in it, times the rows a query has returned per such line (the ones it missed come
        too), for about 80% of the row limit: a query is rarely cut at the limit, and the end-of-job
        check needs few. While following a slice spans at most `query_span`; at the end, what is left.
        """
        if self._insights is False:
            end = min(due, start + self._sweep_span)
            return (end, 0) if final or end - start >= self._sweep_span else None
        budget = 0.8 * limit / self._rows_per_key
        keys, end = 0, start
        while end < due:
            if not final and end - start >= self._span:
                return end, keys
            more = self.late_keys.count(end // BUCKET_MS)
            if keys + more > budget and end > start:
                return end, keys
            keys += more
            end = min(due, (end // BUCKET_MS + 1) * BUCKET_MS)
        return (end, keys) if final else None

    def _query(self, sl: Slice, final: bool) -> Generator[list[LogLine], None, int]:
        """One Logs Insights call for a slice: start its query, or read its results when it is done."""
        try:
            if sl.query_id is None:
                return self._start(sl)
            if not final and self._clock() - sl.started < QUERY_WAIT_S:
                return 0
            reply = self.calls.call("get_query_results", {"queryId": sl.query_id}, insights=True)
        except Unsupported as why:
            self._give_up_insights(str(why))
            sl.sweep = True
            return 1
        status = reply.get("status")
        if status in ("Scheduled", "Running", "Unknown"):
            if self._clock() - sl.started > QUERY_GIVE_UP_S:
                sl.sweep = True
            return 1
        if status != "Complete":  # Failed, Cancelled, Timeout: read this slice the slow way
            self.notes.hint(NoteKind.QUERY_ENDED, f"a Logs Insights query for late lines ended "
                            f"{clean(status, limit=20)}; re-reading its minute instead")
            sl.sweep = True
            return 1
        try:
            rows = self._rows(reply.get("results") or [])
        except Unsupported as why:
            self._give_up_insights(str(why))
            sl.sweep = True
            return 1
        matched = int((reply.get("statistics") or {}).get("recordsMatched") or 0)
        if len(rows) >= sl.limit or matched > len(rows):  # cut at the row limit: ask again in halves
            self._rows_per_key = min(4.0, self._rows_per_key * 1.5)
            self._split(sl)
            return 1
        self._insights = True
        if sl.keys >= 100:
            self._rows_per_key = max(1.0, min(4.0, (self._rows_per_key + len(rows) / sl.keys) / 2))
        out: list[LogLine] = []
        for ts, ingested, stream, message, ptr in rows:
            if sl.start <= ts < sl.end:  # the query's range is whole seconds; the slice's is not
                self._accept(stream, ts, ingested, message, ptr, out)
        sl.done = True
        if out:
            yield self.shaper.order(out)
        return 1

    def _start(self, sl: Slice) -> int:
        threshold = self._late_ms
        query = (f"fields @logStream, @message, toMillis(@timestamp) as ts, toMillis(@ingestionTime) as ingested"
                 f" | filter @logStream like /^{_regex_literal(self.prefix)}/"
                 f" and toMillis(@ingestionTime) - toMillis(@timestamp) > {threshold}"
                 f" | limit {sl.limit}")
        reply = self.calls.call("start_query", {"logGroupName": LOG_GROUP, "startTime": sl.start // 1000,
                                                "endTime": -(-(sl.end - 1) // 1000), "queryString": query,
                                                "limit": sl.limit}, insights=True)
        if reply.get("_missing_group"):
            sl.done = True  # no log group yet: nothing was written, nothing is late
            return 1
        if reply.get("_busy"):
            return 1  # too many queries running in the account: start it on a later poll
        query_id = reply.get("queryId")
        if not query_id:
            raise Unsupported("StartQuery returned no queryId")
        sl.query_id, sl.started = str(query_id), self._clock()
        self.stats.queries += 1
        return 1

    def _rows(self, results: list[Any]) -> list[tuple[int, int, str, str, str]]:
        rows = []
        for result in results:
            fields: dict[Any, Any] = {f.get("field"): f.get("value") for f in result if isinstance(f, dict)}
            try:
                ts, ingested = int(float(fields["ts"])), int(float(fields["ingested"]))
            except (KeyError, TypeError, ValueError):
                raise Unsupported("its results lack the computed fields") from None
            rows.append((ts, ingested, str(fields.get("@logStream") or ""),
                         str(fields.get("@message") or "").rstrip("\n"), str(fields.get("@ptr") or "")))
        self.stats.late_rows += len(rows)
        return rows

    def _split(self, sl: Slice) -> None:
        i = self._slices.index(sl)
        mid = (sl.start + sl.end) // 2
        mid -= mid % BUCKET_MS
        if mid <= sl.start:
            sl.sweep, sl.query_id = True, None  # one bucket with 10,000 late lines: read it all
            return
        self._slices[i:i + 1] = [Slice(sl.start, mid, limit=sl.limit), Slice(mid, sl.end, limit=sl.limit)]

    def _give_up_insights(self, why: str) -> None:
        first = self._insights is not False
        self._insights = False
        self.stats.late_check = LateCheckMode.SWEEP
        for other in self._slices:
            if other.query_id is None:
                other.sweep = True
        if first:
            self.notes.say(NoteKind.INSIGHTS_MISSING, f"note: Logs Insights is not available for the late-line check "
                           f"({why}); re-reading each minute of logs once more instead (about twice the reads; allow "
                           "logs:StartQuery and logs:GetQueryResults to avoid it)", why=why)

    def _sweep(self, sl: Slice, budget: int | None) -> Generator[list[LogLine], None, int]:
        """Re-read a slice with FilterLogEvents; keep only lines later than the fresh read could see."""
        params = sl.params or filter_params(self.prefix, sl.start, sl.end - 1, self.page_size)  # endTime inclusive
        pages = 0
        while budget is None or pages < budget:
            page = self.calls.call("filter_log_events", params)
            pages += 1
            self.stats.sweep_calls += 1
            out: list[LogLine] = []
            for event in page.get("events", ()):
                self.stats.events += 1
                ts = int(event["timestamp"])
                self._accept(event.get("logStreamName", ""), ts, int(event.get("ingestionTime", ts)),
                             str(event.get("message", "")).rstrip("\n"), str(event["eventId"]), out)
            if out:
                yield self.shaper.order(out)
            token = page.get("nextToken")
            if not token:
                sl.done, sl.params = True, None
                return pages
            params = {**params, "nextToken": token}
        sl.params = params
        return pages

    def _accept(self, stream: str, ts: int, ingested: int, raw: str, event_id: str, out: list[LogLine]) -> None:
        if not stream.startswith(self.prefix):
            self.stats.foreign += 1
            return
        if ingested - ts <= self._late_ms or self.late_keys.take(LateKeys.key(stream, ts, raw), ts):
            self.stats.duplicates += 1  # the fresh read printed it
            return
        if ingested - ts > self.stats.max_late_s * 1000:
            self.stats.max_late_s = (ingested - ts) / 1000
        self.shaper.emit(stream, ts, raw, event_id, out)
