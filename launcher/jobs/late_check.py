"""The late-line check: lines that reached CloudWatch more than the fresh read's overlap after their own
timestamp, found as they arrive.

A line that arrives L seconds after its timestamp is only found by a read of its timestamp made after it
arrived, and the fresh read (launcher.jobs.fresh_read) only looks `overlap` back. Logs Insights can
filter on the ingestion time as well as the timestamp, so the check reads *arrivals*: it cuts
CloudWatch's ingestion clock into windows (lo, hi] and asks, for each, for the lines of the job that
arrived in it later than the overlap but within the horizon (their timestamps then lie in
[lo - horizon, hi]). Every late line arrives in exactly one window, so it is returned once, a window
or two after it arrived, whatever its lag; nothing waits for a slice to grow `horizon` old, and when
the job ends only the last few seconds of arrivals are left to check. Insights rows carry no eventId,
so the late lines the fresh read printed already are known by (stream, timestamp, message)
(`LateKeys`, remembered by arrival). A window whose query is cut at its row limit is asked again in
parts of its timestamps, sized from the count the cut query reported (a burst of lines that all
arrived in one millisecond, as when an agent flushes at shutdown, splits that way too).

Lines later than the horizon are not printed; at the end one aggregate query counts them (how many,
how late) and a note says so. Where Logs Insights is missing (a plain moto server), refused (no
logs:StartQuery) or fails, the timestamps are re-read with FilterLogEvents once they are `horizon` old
instead (a "sweep": every event once more); nothing within the horizon is lost, the reads cost more,
and a note says so once. `finish` checks what is left when the job has ended: it keeps going while
lines keep arriving, with progress notes, unless a drain timeout says when to stop (and then how many
slices were left unchecked).

Logs Insights: a query returns at most `limit` rows (10,000 unless asked, up to 100,000); queries run
for a few seconds, 30 at once per account; the time range is whole seconds of event timestamps
(https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_StartQuery.html,
https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/CWL_QuerySyntax-Limit.html,
https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/CWL_AnalyzeLogData-discoverable-fields.html).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from launcher.core.names import LOG_GROUP
from launcher.core.sanitize import clean
from launcher.jobs.fresh_read import LateKeys, filter_params
from launcher.jobs.logrecords import BUCKET_MS, POLL_JITTER, LateCheckMode, LogLine, NoteKind, Notes, Stats
from launcher.jobs.past_horizon import LAG as _LAG
from launcher.jobs.past_horizon import PastHorizonCount
from launcher.jobs.ratelimit import LogsCalls, Unsupported
from launcher.jobs.shaping import Shaper

LATE_LIMIT = 20_000  # rows a window's query asks for (the API allows 100,000): a reply of a few MB
LATE_LIMIT_FINAL = 20_000  # the same at the job's end
FILL = 0.7  # a window is sized for this share of its row limit, so a query is rarely cut
QUERY_WAIT_S = 1.0  # between two GetQueryResults of one query
QUERY_GIVE_UP_S = 300.0  # a query still running after this is read the slow way instead
WINDOW_S = 30.0  # a window spans at least this much arrival time, unless late lines flow fast
FLOWING_ROWS = 1_000  # late lines a poll that make each poll a window of its own (a burst is seen in a poll)
QUIET_S = 10.0  # after the job's end, the check stops once this long has passed with no late arrival
MARGIN_MS = 1_000  # a window ends this far below CloudWatch's clock (a line becomes queryable after it lands)
MAX_RUNNING = 10  # queries of one follow running at once (the account allows 30)
PROGRESS_S = 10.0  # the end-of-job check says how it is getting on this often
FINAL_CHECK_S: float | None = None  # the end-of-job check's deadline when none is given (None: until done)

_ROW_FIELDS = "fields @logStream, @message, toMillis(@timestamp) as ts, toMillis(@ingestionTime) as ingested"
_SECOND = "fields floor(toMillis(@timestamp) / 1000) as sec"
HISTOGRAM_FILL = 0.98  # parts sized from an exact count per second are packed this close to the limit
MAX_LIMIT = 100_000  # the most rows StartQuery returns


class Slice:
    """A range of timestamps [start, end) the sweep reads once every line of it can have arrived."""

    __slots__ = ("start", "end", "params", "done")

    def __init__(self, start: int, end: int):
        self.start, self.end = start, end
        self.params: dict[str, Any] | None = None  # a sweep's FilterLogEvents call under way
        self.done = False


class Window:
    """Arrivals (lo, hi] of CloudWatch's clock over timestamps [ts_lo, ts_hi): one query's worth of late lines."""

    __slots__ = ("lo", "hi", "ts_lo", "ts_hi", "part", "limit", "query_id", "started", "sweep", "params", "done",
                 "histogram")

    def __init__(self, lo: int, hi: int, ts_lo: int, ts_hi: int, limit: int, part: bool = False):
        self.lo, self.hi, self.ts_lo, self.ts_hi, self.limit, self.part = lo, hi, ts_lo, ts_hi, limit, part
        self.histogram = False  # its query counts its late lines per second of timestamp, to split it by
        self.query_id: str | None = None
        self.started = 0.0
        self.sweep = False  # its query failed or ran too long: re-read its timestamps, keep its arrivals
        self.params: dict[str, Any] | None = None
        self.done = False


def _regex_literal(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "\\" + ch for ch in text)


class LateCheck:
    """Finds the lines that arrived late: Logs Insights queries over windows of arrival time, or sweeps."""

    def __init__(self, job: str, calls: LogsCalls, shaper: Shaper, stats: Stats, notes: Notes, late_keys: LateKeys,
                 *, since_ms: int | None, late_ms: int, horizon_ms: int, sweep_span_ms: int, poll_s: float = 5.0,
                 insights: bool = True, drain_timeout_s: float | None = None, page_size: int | None = None,
                 cw_now: Callable[[], int] | None = None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep):
        self.job, self.prefix = job, job + "/"
        self.calls, self.shaper, self.stats, self.notes, self.late_keys = calls, shaper, stats, notes, late_keys
        self.page_size = page_size
        self._since = since_ms
        self._late_ms, self._horizon = late_ms, horizon_ms
        self._sweep_span = sweep_span_ms
        self._poll_ms = int(poll_s * 1000)
        self._drain_timeout = drain_timeout_s if drain_timeout_s is not None else FINAL_CHECK_S
        self._clock, self._sleep = clock, sleep
        self._cw_now = cw_now or (lambda: int(self._clock() * 1000))
        self._insights: bool | None = None if insights else False  # None: not tried yet
        # Insights: windows of arrivals
        self._cut: int | None = None  # arrivals up to this are planned into windows
        self._first_cut: int | None = None  # arrivals before it were all seen by the first fresh read
        self._windows: list[Window] = []
        self._rate = 0.0  # late rows per millisecond of arrivals, from the windows read so far
        self._recent = 0.0  # the same, of the newest window read alone (a burst long past does not count)
        self._flowing = False  # late lines arrive at FLOWING_ROWS a poll or more
        self._was_cut = False  # the newest window read (not a part) was cut at its row limit
        self._last_arrival = 0  # the newest arrival among the late lines found
        self._done: list[tuple[int, int]] = []  # arrival ranges read by Insights before it was given up
        # sweeps: slices of timestamps
        self._plan_from: int | None = None  # timestamps below it are planned into slices
        self._slices: list[Slice] = []
        self._deadline: float | None = None  # the end-of-job check makes no call after this
        self._ended_cw: int | None = None  # when the job ended (or the end-of-job check began): later arrivals counted
        self._past = PastHorizonCount(job, _regex_literal(self.prefix), horizon_ms, since_ms, self._start_query,
                                      self._results, clock)

    @property
    def check_from(self) -> int | None:
        """Every line with a timestamp below this has been handed over once, late ones included."""
        if self._insights is False:
            return self._slices[0].start if self._slices else self._plan_from
        done = self._done_upto()
        return None if done is None else done - self._horizon

    def _done_upto(self) -> int | None:
        """Every late line that arrived up to this (CloudWatch's clock) has been handed over."""
        return self._windows[0].lo if self._windows else self._cut

    def begin(self, now_ms: int) -> None:
        """At the first poll: a sweep need not re-read lines older than the horizon (the first read is final)."""
        if self._plan_from is None:
            self._plan_from = now_ms - self._horizon if self._since is None else max(now_ms - self._horizon,
                                                                                    self._since)

    def start_at(self, first_sent_cw: int) -> None:
        """Arrivals up to `first_sent_cw` (CloudWatch's clock when the first fresh read was sent) were all read."""
        if self._cut is None:
            self._cut = self._first_cut = first_sent_cw

    # -- while following --------------------------------------------------------------------------------

    def check(self, now_ms: int, fresh_from: int | None, budget: int | None,
              wait: bool = True) -> Generator[list[LogLine], None, None]:
        """A poll's share of the check, within `budget` calls: queries started now are read in the same poll
        when the budget and the poll's time allow (the wait counts against the poll's interval, up to the
        soonest the next poll can start). Without `wait` (the draining read at the job's end, which the
        end-of-job check follows at once) nothing is waited for."""
        spent = yield from self._run(now_ms, fresh_from, budget, final=False)
        if not wait:
            return
        until = now_ms / 1000 + (1 - POLL_JITTER) * self._poll_ms / 1000
        while self._insights is not False and (budget is None or spent < budget) and self._clock() < until:
            pending = [w for w in self._windows if not w.done]
            running = [w.started for w in pending if w.query_id and not w.sweep]
            startable = len(running) < MAX_RUNNING and any(w.query_id is None for w in pending)
            if not startable:  # wait for the oldest query, if that fits in the poll
                if not running or min(running) + QUERY_WAIT_S > until:
                    return
                self._sleep(max(0.0, min(running) + QUERY_WAIT_S - self._clock()))
            more = yield from self._run(now_ms, fresh_from, None if budget is None else budget - spent, final=False,
                                        upper=self._cut)
            if not more:
                return
            spent += more

    def _run(self, now_ms: int, fresh_from: int | None, budget: int | None, *, final: bool,
             upper: int | Callable[[], int] | None = None) -> Generator[list[LogLine], None, int]:
        """Read the windows' results, plan windows up to `upper` (CloudWatch's clock; a callable is asked after
        the results are in), start them; or sweep, without Insights. Returns the calls made."""
        spent = 0
        if self._insights is not False and self._cut is not None:
            # the results in first: what they found (often that a burst is over) sizes the windows planned now
            spent += yield from self._windows_due(budget, final, starting=False)
            if self._insights is not False:
                self._plan(self._cw_now() if upper is None else upper() if callable(upper) else upper, final)
                spent += yield from self._windows_due(None if budget is None else budget - spent, final)
        if self._insights is False:
            left = None if budget is None else max(0, budget - spent)
            if left is None or left > 0:
                spent += yield from self._sweeps(now_ms, fresh_from, left, final)
        return spent

    def _plan(self, upper: int, final: bool) -> None:
        """Cut arrivals from the last window's end up to `upper` into windows sized for the rows expected."""
        assert self._cut is not None
        span = upper - self._cut
        # flowing: a window each poll (half a poll at least, as polls are jittered around their interval)
        least = 1 if final else (self._poll_ms // 2 if self._flowing else int(WINDOW_S * 1000))
        if span < max(1, least):
            return
        limit = LATE_LIMIT_FINAL if final else LATE_LIMIT
        # at the job's end, sized by what arrives now: a burst read minutes ago would split a quiet tail in parts
        rate = min(self._rate, self._recent) if final else self._rate
        parts = max(1, min(8, math.ceil(rate * span / (FILL * limit))))
        lo = self._cut
        for i in range(1, parts + 1):
            hi = self._cut + span * i // parts
            ts_lo = lo - self._horizon if self._since is None else max(lo - self._horizon, self._since)
            self._windows.append(Window(lo, hi, ts_lo, hi + 1, limit))
            lo = hi
        self._cut = upper

    def _windows_due(self, budget: int | None, final: bool,
                     starting: bool = True) -> Generator[list[LogLine], None, int]:
        """Start the windows' queries and read their results, within `budget` calls (`starting`=False: only read)."""
        spent = 0
        # Windows of new arrivals go before the parts of a cut one: they are few, and what they find (often that
        # a burst is over) sizes the windows planned next.
        for w in [w for w in self._windows if not w.part] + [w for w in self._windows if w.part]:
            if (budget is not None and spent >= budget) or self._late():
                break
            if w.done or (not starting and (w.sweep or w.query_id is None)):
                continue
            if w.sweep:
                spent += yield from self._sweep_window(w, None if budget is None else budget - spent)
            elif w.query_id is None:
                if sum(1 for o in self._windows if o.query_id and not o.done and not o.sweep) >= MAX_RUNNING:
                    continue
                spent += self._start(w)
            else:
                spent += yield from self._query(w, final)
            if self._insights is False:
                return spent
        while self._windows and self._windows[0].done:
            self._windows.pop(0)
        done = self._done_upto()
        if done is not None:
            self.late_keys.forget_below(done)
        return spent

    def _late(self) -> bool:
        return self._deadline is not None and self._clock() >= self._deadline

    def _start(self, w: Window) -> int:
        where = (f"filter @logStream like /^{_regex_literal(self.prefix)}/"
                 f" and {_LAG} > {self._late_ms} and {_LAG} <= {self._horizon}"
                 f" and toMillis(@ingestionTime) > {w.lo} and toMillis(@ingestionTime) <= {w.hi}")
        if w.part:  # StartQuery's range is whole seconds: a part's own bounds keep out its neighbours' lines
            where += f" and toMillis(@timestamp) >= {w.ts_lo} and toMillis(@timestamp) < {w.ts_hi}"
        if w.histogram:
            query = f"{_SECOND} | {where} | stats count(*) as n by sec"
        else:
            query = f"{_ROW_FIELDS} | {where} | limit {w.limit}"
        try:
            query_id = self._start_query(w.ts_lo, w.ts_hi, query, w.limit)
        except Unsupported as why:
            self._give_up_insights(str(why))
            return 1
        if query_id == "":
            w.done = True  # no log group yet: nothing was written, nothing is late
        elif query_id is not None:
            w.query_id, w.started = query_id, self._clock()
        return 1

    def _start_query(self, ts_lo: int, ts_hi: int, query: str, limit: int) -> str | None:
        """StartQuery over timestamps [ts_lo, ts_hi) (ms); its id, "" with no log group, None while busy."""
        reply = self.calls.call("start_query", {"logGroupName": LOG_GROUP, "startTime": ts_lo // 1000,
                                                "endTime": -(-(ts_hi - 1) // 1000), "queryString": query,
                                                "limit": limit}, insights=True)
        if reply.get("_missing_group"):
            return ""
        if reply.get("_busy"):
            return None  # too many queries running in the account: start it on a later round
        query_id = reply.get("queryId")
        if not query_id:
            raise Unsupported("StartQuery returned no queryId")
        self.stats.queries += 1
        return str(query_id)

    def _results(self, query_id: str) -> dict[str, Any]:
        return self.calls.call("get_query_results", {"queryId": query_id}, insights=True)

    def _query(self, w: Window, final: bool) -> Generator[list[LogLine], None, int]:
        """Read a window's results when its query is done: print its late lines, or split it when cut."""
        assert w.query_id is not None
        if not final and self._clock() - w.started < QUERY_WAIT_S:
            return 0
        try:
            reply = self._results(w.query_id)
        except Unsupported as why:
            self._give_up_insights(str(why))
            return 1
        status = reply.get("status")
        if status in ("Scheduled", "Running", "Unknown"):
            if self._clock() - w.started > QUERY_GIVE_UP_S:
                w.sweep, w.query_id = True, None
            return 1
        if status != "Complete":  # Failed, Cancelled, Timeout: read this window the slow way
            self.notes.hint(NoteKind.QUERY_ENDED, f"a Logs Insights query for late lines ended "
                            f"{clean(status, limit=20)}; re-reading its timestamps instead")
            w.sweep, w.query_id = True, None
            return 1
        if w.histogram:
            self._split_by(w, reply.get("results") or [])
            return 1
        try:
            rows = self._rows(reply.get("results") or [])
        except Unsupported as why:
            self._give_up_insights(str(why))
            return 1
        matched = int(float((reply.get("statistics") or {}).get("recordsMatched") or 0))
        matched = max(matched, len(rows))
        cut = len(rows) >= w.limit or matched > len(rows)
        if not w.part:
            span = max(1, w.hi - w.lo)
            # The first window cut at its limit is taken for a burst (an agent flushing at shutdown), which the next
            # windows will not see again: it moves no estimate. A second in a row is a flow above the limit, and
            # moves it at most 4x a window.
            if not cut or self._was_cut:
                sample = matched / span if not self._rate else min(matched / span, 4 * self._rate)
                self._rate = sample if not self._rate else (self._rate + sample) / 2
                self._recent = matched / span
            self._was_cut = cut
            self._flowing = matched / span * self._poll_ms >= FLOWING_ROWS
        if cut:  # cut at the row limit: ask again in parts
            self._split(w, matched)
            return 1
        out: list[LogLine] = []
        for ts, ingested, stream, message, ptr in rows:
            if w.ts_lo <= ts < w.ts_hi and w.lo < ingested <= w.hi:  # the query's range is whole seconds
                self._accept(stream, ts, ingested, message, ptr, out)
        w.done = True
        self._insights = True
        if out:
            yield self.shaper.order(out)
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

    def _split(self, w: Window, matched: int) -> None:
        """A cut window: count its late lines per second of timestamp first (one small query), then ask again in
        parts packed from those counts; a part cut again is split in equal parts of its seconds."""
        if not w.part:
            w.histogram, w.query_id = True, None
            return
        self._split_even(w, matched)

    def _split_by(self, w: Window, results: list[Any]) -> None:
        """Replace a window by parts of whole seconds of timestamp, each with at most HISTOGRAM_FILL of the limit."""
        counts: dict[int, int] = {}
        for row in results:
            fields: dict[Any, Any] = {f.get("field"): f.get("value") for f in row if isinstance(f, dict)}
            try:
                counts[int(float(fields["sec"]))] = int(float(fields["n"]))
            except (KeyError, TypeError, ValueError):
                w.histogram, w.part = False, True  # not the counts asked for: split evenly instead
                self._split_even(w, w.limit * 2)
                return
        parts: list[Window] = []
        limit = max(w.limit, LATE_LIMIT_FINAL)
        most = int(HISTOGRAM_FILL * limit)
        start = size = 0
        for second in sorted(counts):
            n = counts[second]
            if parts and size + n <= most:
                size += n
                parts[-1].ts_hi = min(w.ts_hi, (second + 1) * 1000)
                continue
            start, size = max(w.ts_lo, second * 1000), n
            parts.append(Window(w.lo, w.hi, start, min(w.ts_hi, (second + 1) * 1000),
                                max(limit, min(MAX_LIMIT, n + 1)), part=True))
        i = self._windows.index(w)
        if not parts:
            w.histogram, w.done = False, True  # nothing arrived late in it after all
            return
        self._windows[i:i + 1] = parts

    def _split_even(self, w: Window, matched: int) -> None:
        """Ask a cut window again in parts of its timestamps, each sized for FILL of the limit (whole seconds)."""
        first, last = -(-w.ts_lo // 1000), (w.ts_hi - 1) // 1000  # the whole seconds strictly inside
        seconds = last - first
        if seconds < 2:
            w.sweep, w.query_id = True, None  # one second with more late lines than a query returns: read it all
            return
        parts = max(2, min(seconds, math.ceil(matched / (FILL * w.limit))))
        edges = [w.ts_lo] + [(first + seconds * i // parts) * 1000 for i in range(1, parts)] + [w.ts_hi]
        i = self._windows.index(w)
        self._windows[i:i + 1] = [Window(w.lo, w.hi, a, b, w.limit, part=True)
                                  for a, b in zip(edges, edges[1:], strict=False) if b > a]

    def _give_up_insights(self, why: str) -> None:
        first = self._insights is not False
        self._insights = False
        self.stats.late_check = LateCheckMode.SWEEP
        if self._cut is not None:
            # Arrivals read already are not printed again; the rest are swept from their earliest timestamp.
            self._done += [(w.lo, w.hi) for w in self._windows if w.done]
            done = self._done_upto()
            if done is not None:
                self._done.append((self._first_cut or done, done))
                start = done - self._horizon
                self._plan_from = start if self._since is None else max(start, self._since)
            self._windows = []
        if first:
            self.notes.say(NoteKind.INSIGHTS_MISSING, f"note: Logs Insights is not available for the late-line check "
                           f"({why}); re-reading each minute of logs once more instead (about twice the reads; allow "
                           "logs:StartQuery and logs:GetQueryResults to avoid it)", why=why)

    def _sweep_window(self, w: Window, budget: int | None) -> Generator[list[LogLine], None, int]:
        """A window whose query failed: re-read its timestamps, keep the lines that arrived late in it."""
        params = w.params or filter_params(self.prefix, w.ts_lo, w.ts_hi - 1, self.page_size)
        pages = 0
        while budget is None or pages < budget:
            page = self.calls.call("filter_log_events", params)
            pages += 1
            self.stats.sweep_calls += 1
            out: list[LogLine] = []
            for event in page.get("events", ()):
                self.stats.events += 1
                ts = int(event["timestamp"])
                ingested = int(event.get("ingestionTime", ts))
                if not (w.lo < ingested <= w.hi and ingested - ts <= self._horizon):
                    self.stats.duplicates += 1
                    continue
                self._accept(event.get("logStreamName", ""), ts, ingested,
                             str(event.get("message", "")).rstrip("\n"), str(event["eventId"]), out)
            if out:
                yield self.shaper.order(out)
            token = page.get("nextToken")
            if not token:
                w.done, w.params = True, None
                return pages
            params = {**params, "nextToken": token}
        w.params = params
        return pages

    # -- sweeps: without Logs Insights ------------------------------------------------------------------------

    def _sweeps(self, now_ms: int, fresh_from: int | None, budget: int | None,
                final: bool) -> Generator[list[LogLine], None, int]:
        """Re-read the slices whose lines have all arrived (all up to now once the job has ended)."""
        if self._plan_from is None or fresh_from is None:
            return 0  # nothing to sweep yet
        if not final:
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
            due = now_ms
        most = 8 if final else 2
        while self._plan_from < due and len(self._slices) < most:
            end = min(due, self._plan_from + self._sweep_span)
            if not final and end - self._plan_from < self._sweep_span:
                break
            self._slices.append(Slice(self._plan_from, end))
            self._plan_from = end
        spent = 0
        for sl in list(self._slices):
            if (budget is not None and spent >= budget) or self._late():
                break
            if not sl.done:
                spent += yield from self._sweep(sl, None if budget is None else budget - spent)
        while self._slices and self._slices[0].done:
            self._slices.pop(0)
        if self.check_from is not None:
            self.late_keys.forget_below(self.check_from)
        return spent

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
                ingested = int(event.get("ingestionTime", ts))
                if any(lo < ingested <= hi for lo, hi in self._done):  # Logs Insights returned it already
                    self.stats.duplicates += 1
                    continue
                self._accept(event.get("logStreamName", ""), ts, ingested,
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
        if ingested - ts <= self._late_ms or self.late_keys.take(LateKeys.key(stream, ts, raw), ingested):
            self.stats.duplicates += 1  # the fresh read printed it
            return
        if ingested - ts > self.stats.max_late_s * 1000:
            self.stats.max_late_s = (ingested - ts) / 1000
        if ingested > self._last_arrival:
            self._last_arrival = ingested
        if self._ended_cw is not None and ingested > self._ended_cw:
            self.stats.late_after_end += 1
        self.shaper.emit(stream, ts, raw, event_id, out)

    # -- the job's end ----------------------------------------------------------------------------------------

    def ended(self, job_end_ms: int) -> None:
        """The job ended at `job_end_ms`: late lines found from now on that arrived after it are counted."""
        self._ended_cw = job_end_ms

    def finish(self, fresh_from: int | None, newest_ms: int | None = None,
               job_start_ms: int | None = None) -> Iterator[list[LogLine]]:
        """After the job has ended (and a draining read): check every arrival not yet checked.

        Keeps going while late lines keep arriving (until QUIET_S passes without one, or every line's
        horizon has passed), saying every PROGRESS_S how it is getting on; with a drain timeout it stops
        then and says how many slices it left unchecked. The count of the lines later than the horizon runs
        beside the last windows; `stats.checked_until` says up to when arrivals were checked (a second or two
        before this returns).
        """
        if fresh_from is None or (self._cut is None and self._plan_from is None):
            return
        started = self._clock()
        deadline = self._deadline = None if self._drain_timeout is None else started + self._drain_timeout
        first_upper = self._cw_now()
        if self._ended_cw is None:
            self._ended_cw = first_upper
        end_ms = int(started * 1000) + 1
        if self._insights is False:
            self._say_reread(end_ms)
        next_note = started + PROGRESS_S
        found = self.stats.printed
        while True:
            calls = self.stats.calls + self.stats.query_calls
            target = first_upper
            if self._insights is not False and self._cut is not None:
                # a line just found moves the target on: the check waits QUIET_S past the newest arrival
                yield from self._run(end_ms, fresh_from, None, final=True,
                                     upper=lambda: self._final_upper(first_upper, newest_ms))
                target = self._target(first_upper, newest_ms)
                if self._insights is not False and self._cut >= target:
                    assert self._first_cut is not None
                    # the last windows are planned: count past the horizon beside them, not after
                    self._past.start(self._first_cut, self._cut, job_start_ms)
                    if not self._windows:
                        break
            if self._insights is False:
                yield from self._run(end_ms, fresh_from, None, final=True)
                if not self._slices and self._plan_from is not None and self._plan_from >= end_ms:
                    break
            self._past.read(QUERY_WAIT_S)
            now = self._clock()
            if deadline is not None and now >= deadline:
                self._unchecked(target, end_ms, now - started)
                return
            if now >= next_note:
                next_note = now + PROGRESS_S
                left = len([w for w in self._windows if not w.done]) + len(self._slices)
                self.notes.say(NoteKind.FINAL_PROGRESS, f"still checking {self.job} for lines that reached "
                               f"CloudWatch late: {left} slice(s) left, {self.stats.printed - found} line(s) found "
                               f"in {now - started:.0f}s", job=self.job, left=left,
                               found=self.stats.printed - found, after_s=now - started)
            if self.stats.calls + self.stats.query_calls == calls or all(
                    w.query_id is not None for w in self._windows if not w.done and not w.sweep) and self._windows:
                self._sleep(QUERY_WAIT_S)  # queries are running, or arrivals are awaited: give them a moment
        if self._insights is not False and self._cut is not None:
            self.stats.checked_until = self._cut / 1000
            assert self._first_cut is not None
            self._past.start(self._first_cut, self._cut, job_start_ms)  # what the cut reached since, if anything
            while self._past.pending and not self._late():
                self._past.read(QUERY_WAIT_S)
                self._past.give_up_older_than(QUERY_GIVE_UP_S)
                if self._past.pending:
                    self._sleep(QUERY_WAIT_S / 2)
            self._past.say(self.stats, self.notes)
            self._say_after_end()

    def _final_upper(self, first_upper: int, newest_ms: int | None) -> int:
        """Where the end-of-job check's next window ends: CloudWatch's clock, within the target; while it waits for
        arrivals, the cut itself (no window) until the wait spans half the quiet time."""
        assert self._cut is not None
        upper, target = self._cw_now(), self._target(first_upper, newest_ms)
        if self._cut < target and upper < target and upper - self._cut < int(QUIET_S * 500):
            return self._cut
        return min(upper, target)

    def _target(self, first_upper: int, newest_ms: int | None) -> int:
        """Arrivals the end-of-job check reads up to: QUIET_S past the newest late arrival found (no sooner than
        CloudWatch's clock when it began, no later than the newest line's horizon)."""
        target = max(first_upper, self._last_arrival + int(QUIET_S * 1000))
        if newest_ms is not None:
            target = max(first_upper, min(target, newest_ms + self._horizon))
        return target

    def _say_after_end(self) -> None:
        """Late lines that kept arriving after the job ended: say so, and that later ones will not print."""
        if not self.stats.late_after_end:
            return
        after_s = (self._last_arrival - (self._ended_cw or self._last_arrival)) / 1000
        quiet_s = (self._cut or self._last_arrival) / 1000 - self._last_arrival / 1000
        self.notes.say(NoteKind.ARRIVING_AFTER_END, f"note: {self.stats.late_after_end} late line(s) of {self.job} "
                       f"reached CloudWatch after the job ended, the last {after_s:.0f}s after; none for "
                       f"{quiet_s:.0f}s since, so the check stopped: lines that arrive from now on are not printed "
                       "(reading the job's logs again later shows them)", job=self.job,
                       count=self.stats.late_after_end, after_s=after_s, quiet_s=quiet_s)

    def _say_reread(self, end_ms: int) -> None:
        span_s = (end_ms - (self.check_from or end_ms)) / 1000
        self.notes.say(NoteKind.FINAL_REREAD, f"reading the last {span_s:.0f}s of {self.job} once more for lines "
                       "that reached CloudWatch late, without Logs Insights", span_s=span_s)

    def _unchecked(self, target: int, end_ms: int, after_s: float) -> None:
        """The drain timeout passed: say exactly how many slices (and seconds) were left unchecked."""
        if self._insights is not False and self._cut is not None:
            if self._cut < target:
                self._plan(target, final=True)  # what would have been read still, counted the same way
            left = [w for w in self._windows if not w.done]
            slices = len(left)
            left_s = sum((w.hi - w.lo) / 1000 for w in left if not w.part) + sum(
                (w.hi - w.lo) / 1000 for w in {(w.lo, w.hi): w for w in left if w.part}.values())
        else:
            rest = [s for s in self._slices if not s.done]
            slices = len(rest) + (1 if self._plan_from is not None and self._plan_from < end_ms else 0)
            left_s = sum((s.end - s.start) / 1000 for s in rest) + max(0, end_ms - (self._plan_from or end_ms)) / 1000
        self.stats.unchecked_s += left_s
        self.stats.unchecked_slices += slices
        self.notes.say(NoteKind.FINAL_UNCHECKED, f"warning: could not finish checking {self.job} for lines that "
                       f"reached CloudWatch late ({slices} slice(s), {left_s:.0f}s of arrivals, left unchecked after "
                       f"{after_s:.0f}s); reading its logs again later shows them", job=self.job, slices=slices,
                       left_s=left_s, after_s=after_s)
