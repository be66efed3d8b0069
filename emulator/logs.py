"""Hosts that write CloudWatch log streams as the emulator clock runs.

Each scripted job's hosts write `<job>/algo-N-<epoch>` streams into /aws/sagemaker/TrainingJobs:
some hosts start late, some lines are ingested late with older timestamps (back-dated), and a
decoy job whose name shares the prefix (`<job>-decoy/...`) logs into the same group. Nothing runs
in the background: before any Logs read, the lines due by now are written straight into moto's
backend, so a read in-process and a read through the server see the same thing.

FilterLogEvents is served here rather than by moto, as CloudWatch serves it: a page holds at most
10,000 events or 1 MB (each event's message bytes plus 26), results are interleaved by timestamp,
then ingestion time, and startTime/endTime are both inclusive
(https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_FilterLogEvents.html).
Like moto, it ignores logStreamNamePrefix (the tailer must check stream names itself). Each stream
keeps a sorted index, so a read costs a page, not a scan of the whole group.
"""
from __future__ import annotations

import heapq
import re
from array import array
from bisect import bisect_left, bisect_right, insort
from itertools import islice
from typing import Any

from emulator import core, scenario

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
PAGE_EVENTS = 10_000
PAGE_BYTES = 1_048_576
EVENT_OVERHEAD = 26  # bytes counted per event besides its message, as for PutLogEvents batches
QUERY_ROWS_MAX = 100_000  # the largest `limit` a Logs Insights query may ask for
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/CWL_QuerySyntax-Limit.html)


def pump(backend: Any) -> int:
    """Write every line due by now for the jobs in this backend's region; returns how many."""
    written = 0
    at = core.now()
    with core.lock():
        for job in scenario.created_jobs(backend.region_name):
            written += _pump_job(backend, job, at)
    return written


def _group(backend: Any):
    if LOG_GROUP not in backend.groups:
        backend.create_log_group(LOG_GROUP, {})
    return backend.groups[LOG_GROUP]


def _pump_job(backend: Any, job: scenario.EmulatedJob, at: float) -> int:
    cursor = job.cursor.setdefault("logs", {})
    written = 0
    streams = job.streams()
    window = job.training_window()
    for host, stream_name in streams.items():
        # Lines below `next_i` are written or waiting (timestamped already, ingested late): a heap by visible-at.
        next_i, waiting = cursor.get(host, (0, []))
        due = []
        while waiting and waiting[0][0] <= at:
            due.append(heapq.heappop(waiting)[1])
        n = job.line_count(host, window)
        while next_i < n:
            ts, visible = job.line_times(host, next_i, window)
            if ts > at:
                break
            if visible <= at:
                due.append(next_i)
            else:
                heapq.heappush(waiting, (visible, next_i))
            next_i += 1
        cursor[host] = (next_i, waiting)
        if due:
            events = [(*job.line_times(host, j, window), job.line(host, j, j == n - 1)) for j in due]
            written += _write(backend, stream_name, events)
    if job.decoy and streams:
        written += _pump_decoy(backend, job, cursor, at)
    return written


def _pump_decoy(backend: Any, job: scenario.EmulatedJob, cursor: dict, at: float) -> int:
    """A neighbour `<job>-decoy` that logs one line a second for as long as the job trains."""
    start, end = job.training_window()
    n = int(max(0.0, min(at, end) - start) // 1.0)
    done = cursor.get("decoy", 0)
    if n <= done:
        return 0
    cursor["decoy"] = n
    stream = f"{job.name}-decoy/algo-1-{int(start)}"
    return _write(backend, stream, [(start + i, start + i, f"decoy line {i} (must never show)")
                                    for i in range(done, n)])


def _write(backend: Any, stream_name: str, events: list[tuple[float, float, str]]) -> int:
    group = _group(backend)
    if stream_name not in group.streams:
        group.create_log_stream(stream_name)
    stream = group.streams[stream_name]
    events.sort()
    before = len(stream.events)
    stream.put_log_events([{"timestamp": int(ts * 1000), "message": msg} for ts, _, msg in events])
    for event, (_, vis, _) in zip(stream.events[before:], events, strict=True):
        event.ingestion_time = int(vis * 1000)
    return len(events)


def _index(stream: Any) -> list[tuple]:
    """The stream's events as (timestamp, ingestionTime, stream, eventId, event), sorted, kept up to date."""
    index, done = getattr(stream, "_emulator_index", ([], 0))
    name = stream.log_stream_name
    for event in stream.events[done:]:
        key = (event.timestamp, event.ingestion_time, name, event.event_id, event)
        if index and key[:4] < index[-1][:4]:
            insort(index, key, key=lambda k: k[:4])
        else:
            index.append(key)
    stream._emulator_index = (index, len(stream.events))
    return index


def filter_log_events(group: Any, log_group_name: str, log_stream_names: list[str], start_time: int,
                      end_time: int, limit: int | None, next_token: str | None, filter_pattern: str,
                      interleaved: bool, _moto: Any = None):
    """One page of a group's events, as CloudWatch pages them (see the module docstring)."""
    if filter_pattern:
        return _moto(group, log_group_name, log_stream_names, start_time, end_time, limit, next_token,
                     filter_pattern, interleaved)
    limit = min(limit or PAGE_EVENTS, PAGE_EVENTS)
    streams = [st for name, st in group.streams.items() if not log_stream_names or name in log_stream_names]
    searched = [{"logStreamName": st.log_stream_name, "searchedCompletely": True} for st in streams]
    after: tuple | None = None
    if next_token:
        try:
            head, ts, ingested, rest = next_token.split("@", 3)
            stream_name, event_id = rest.rsplit("@", 1)
            if head != log_group_name:
                raise ValueError
            after = (int(ts), int(ingested), stream_name, int(event_id))
        except ValueError:
            return [], None, searched  # AWS answers an invalid token with nothing
    runs = []
    for st in streams:
        index = _index(st)
        lo = bisect_left(index, start_time or 0, key=lambda k: k[0])
        if after is not None:
            lo = max(lo, bisect_right(index, after, key=lambda k: k[:4]))
        hi = len(index) if not end_time else bisect_right(index, end_time, key=lambda k: k[0])
        if lo < hi:
            runs.append(islice(index, lo, hi))
    page, size, more = [], 0, False
    for key in heapq.merge(*runs, key=lambda k: k[:4]):
        cost = len(key[4].message.encode("utf-8", "surrogatepass")) + EVENT_OVERHEAD
        if len(page) >= limit or (page and size + cost > PAGE_BYTES):
            more = True
            break
        size += cost
        page.append(key)
    events = [{**key[4].to_filter_dict(), "logStreamName": key[2]} for key in page]
    token = None
    if more:
        ts, ingested, stream_name, event_id, _ = page[-1]
        token = f"{log_group_name}@{ts}@{ingested}@{stream_name}@{event_id}"
    return events, token, searched


_SYNTHETIC: list[Any] = []  # a SyntheticLogs the server answers Logs reads of the group from, when set


def serve_synthetic(logs: Any | None) -> None:
    """Answer FilterLogEvents, StartQuery and GetQueryResults on the training-job group from `logs` (a
    `SyntheticLogs`), through the server and botocore, so a benchmark measures real parsing; None stops."""
    _SYNTHETIC[:] = [] if logs is None else [logs]


class _SyntheticResult:
    def __init__(self, reply: dict):
        self.reply = reply

    def to_result_json(self) -> dict:  # what moto's response handler calls
        return self.reply


def _apply() -> None:
    import functools

    from moto.logs.models import LogGroup, LogsBackend

    for name in ("describe_log_streams", "get_log_events", "filter_log_events", "describe_log_groups"):
        setattr(LogsBackend, name, core.after(pump)(getattr(LogsBackend, name)))
    LogGroup.filter_log_events = functools.partialmethod(filter_log_events, _moto=LogGroup.filter_log_events)
    pumped = LogsBackend.filter_log_events

    def synthetic_filter(self, log_group_name, log_stream_names, start_time, end_time, limit, next_token,
                         filter_pattern, interleaved):
        if _SYNTHETIC and log_group_name == LOG_GROUP:
            page = _SYNTHETIC[0].filter_log_events(startTime=start_time, endTime=end_time, nextToken=next_token,
                                                   limit=limit)
            return page["events"], page.get("nextToken"), []
        return pumped(self, log_group_name, log_stream_names, start_time, end_time, limit, next_token,
                      filter_pattern, interleaved)

    LogsBackend.filter_log_events = synthetic_filter


core.register_patch("logs:hosts", _apply)


class SyntheticLogs:
    """A Logs client for one job whose hosts each write `rate` lines a second, without moto: for volume.

    Host h writes its k-th line at `start + k / rate` (plus a per-host phase), and it reaches
    CloudWatch after a lag drawn from `lag` (mostly well under 2 s, a long tail); with `clamp`, never
    later than the end of writing (the agent flushes what it holds when the container exits), without,
    as late as the lag says. `filter_log_events` serves it as CloudWatch does (timestamp order, pages
    of 10,000 events or 1 MB, startTime and endTime inclusive, a resumable nextToken), generating
    events on demand, and Logs Insights queries of the shapes `ParsedQuery` reads come from an index of
    the late lines by arrival second (4 bytes a late line), so a benchmark measures the reader.
    """

    INDEX_LAG_MS = 1_000  # lines later than this are indexed by arrival for Insights queries

    def __init__(self, job: str, hosts: int, rate: float, start: float, duration: float, clock: Any,
                 lag: Any = None, seed: int = 0, clamp: bool = True):
        from emulator.scenario import LagModel, unit

        self.job, self.hosts, self.clock = job, hosts, clock
        self.period = 1000.0 / rate  # ms between two lines of one host
        self.start_ms, self.end_ms = int(start * 1000), int((start + duration) * 1000)
        self.count = int(duration * rate)  # lines per host
        self.clamp = clamp
        step = max(1, int(self.period)) / hosts
        self.phase = [int(i * step) for i in range(hosts)]  # host i+1 writes `phase[i]` ms into each period
        model = lag or LagModel()
        self._lags = [int(model.sample(unit(seed, i, 1), unit(seed, i, 2)) * 1000) for i in range(1 << 16)]
        self.streams = [f"{job}/algo-{h}-{int(start)}" for h in range(1, hosts + 1)]
        self.calls = self.served = 0
        self.query_calls = self.rows_served = 0  # Logs Insights calls, and rows returned (part of `served`)
        self.queries: dict[str, tuple[int, int, str, int | None, int]] = {}
        self._arrivals: dict[int, array] = {}  # arrival second -> (k * hosts + h - 1) of lines that came late
        self._indexed = 0  # lines k below this are indexed
        self.cpu = 0.0  # process CPU spent serving reads, so a benchmark can leave it out

    def times(self, host: int, k: int) -> tuple[int, int]:
        """(timestamp, ingestionTime) in ms of host `host`'s k-th line."""
        ts = self.start_ms + int(k * self.period) + self.phase[host - 1]
        lag = self._lags[(host * 0x9E3779B1 + k * 0x85EBCA77 >> 7) & 0xFFFF]
        return ts, (min(ts + lag, max(ts, self.end_ms)) if self.clamp else ts + lag)

    def message(self, host: int, k: int) -> str:
        return (f"[1,mpirank:{(host - 1) * 8},algo-{host}]<stdout>:[smp-progress] step={k} "
                f"loss={8.0 / (1 + 0.05 * k):.4f} lr=3.000e-04 tokens_per_s=15234.5 tflops_per_gpu=150.00 "
                "gpu_mem_gb=31.50")

    def expected(self) -> int:
        return self.hosts * self.count

    def arrived_after(self, at_ms: int) -> int:
        """Lines that reach CloudWatch after `at_ms` (what a reader that stopped then cannot have printed)."""
        self._index(self.end_ms + 1)
        return sum(1 for second, packed in self._arrivals.items() if second * 1000 + 999 > at_ms
                   for p in packed if self.times(p % self.hosts + 1, p // self.hosts)[1] > at_ms)

    def index_mb(self) -> float:
        """Memory the arrival index holds (part of the process's, not the reader's)."""
        return sum(len(a) * a.itemsize for a in self._arrivals.values()) / 2**20

    def late_lines(self, more_than_ms: int) -> list[tuple[int, int]]:
        """(timestamp, ingestionTime) of every line that arrives more than `more_than_ms` late."""
        self._index(self.end_ms + 1)
        found = []
        for packed in self._arrivals.values():
            for p in packed:
                ts, ingested = self.times(p % self.hosts + 1, p // self.hosts)
                if ingested - ts > more_than_ms:
                    found.append((ts, ingested))
        return found

    def filter_log_events(self, startTime: int | None = None, endTime: int | None = None,
                          nextToken: str | None = None, limit: int | None = None, **_ignored: Any) -> dict:
        import time

        cpu = time.process_time()
        try:
            return self._page(startTime, endTime, nextToken, limit)
        finally:
            self.cpu += time.process_time() - cpu

    def _page(self, startTime: int | None, endTime: int | None, nextToken: str | None,  # noqa: N803
              limit: int | None) -> dict:
        self.calls += 1
        now = int(self.clock() * 1000)
        first = self.start_ms if startTime is None else startTime
        last = now if endTime is None else min(endTime, now)
        k = max(0, int((first - self.start_ms - self.period) // self.period))
        h0 = 1
        if nextToken:
            k, h0 = (int(x) for x in nextToken.split(":"))
        limit = min(limit or PAGE_EVENTS, PAGE_EVENTS)
        events: list[dict] = []
        size = 0
        while k < self.count:
            if self.start_ms + int(k * self.period) > last:
                break
            for h in range(h0, self.hosts + 1):
                ts, ingested = self.times(h, k)
                if ts < first or ts > last or ingested > now:
                    continue
                message = self.message(h, k)
                cost = len(message) + EVENT_OVERHEAD
                if len(events) >= limit or (events and size + cost > PAGE_BYTES):
                    self.served += len(events)
                    return {"events": events, "nextToken": f"{k}:{h}"}
                size += cost
                events.append({"logStreamName": self.streams[h - 1], "eventId": f"{k * self.hosts + h:056d}",
                               "timestamp": ts, "ingestionTime": ingested, "message": message})
            k, h0 = k + 1, 1
        self.served += len(events)
        return {"events": events}

    def _index(self, now: int) -> None:
        """Index by arrival second the late lines of every step written by `now` (a line arrives after it is
        written, so every line that has arrived by `now` is indexed)."""
        top = min(self.count, max(0, int((now - self.start_ms) // self.period) + 1))
        hosts, limit = self.hosts, self.INDEX_LAG_MS
        for k in range(self._indexed, top):
            for h in range(1, hosts + 1):
                ts, ingested = self.times(h, k)
                if ingested - ts > limit:
                    bucket = self._arrivals.get(ingested // 1000)
                    if bucket is None:
                        bucket = self._arrivals[ingested // 1000] = array("i")
                    bucket.append(k * hosts + h - 1)
        self._indexed = max(self._indexed, top)

    def start_query(self, startTime: int, endTime: int, queryString: str, limit: int | None = None,  # noqa: N803
                    **_ignored: Any) -> dict:
        """Logs Insights over [startTime, endTime] (whole seconds of timestamps, inclusive), as of the start; the
        rows are made when the results are read (CloudWatch keeps them, not the caller). A `limit` past what a
        query may return is refused, as CloudWatch refuses it."""
        self.calls += 1
        if limit is not None and not 1 <= limit <= QUERY_ROWS_MAX:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "InvalidParameterException",
                                         "Message": f"limit must be between 1 and {QUERY_ROWS_MAX}"},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, "StartQuery")
        self.query_calls += 1
        query_id = f"synthetic-{self.query_calls}"
        self.queries[query_id] = (startTime, endTime, queryString, limit, int(self.clock() * 1000))
        return {"queryId": query_id}

    def get_query_results(self, queryId: str, **_ignored: Any) -> dict:  # noqa: N803
        import time

        cpu = time.process_time()
        self.calls += 1
        self.query_calls += 1
        start_s, end_s, query, limit, now = self.queries.pop(queryId)
        parsed = ParsedQuery(query)
        cap = min(parsed.limit or PAGE_EVENTS, limit or PAGE_EVENTS * 10)
        lo, hi = start_s * 1000, end_s * 1000 + 999
        floor = max((v for name, op, v in parsed.tests if name == "lag" and op(v + 1, v)), default=None)
        after = max((v for name, op, v in parsed.tests if name == "ingested" and op(v + 1, v)), default=lo)
        until = min([v for name, op, v in parsed.tests if name == "ingested" and not op(v + 1, v)] + [now])
        rows, found, matched = [], [], 0
        for h, k in self._candidates(lo, hi, now, floor, (after, until)):
            ts, ingested = self.times(h, k)
            if not (lo <= ts <= hi and ingested <= now and parsed.matches(self.streams[h - 1], ts, ingested)):
                continue
            matched += 1
            if parsed.stats:
                found.append((ts, ingested))
            elif len(rows) < cap:
                values = {"@logStream": self.streams[h - 1], "@message": self.message(h, k), "@timestamp": ts,
                          "@ingestionTime": ingested}
                row = [{"field": alias, "value": str(values[of])} for alias, of in parsed.fields]
                row.append({"field": "@ptr", "value": f"{h}:{k}"})
                rows.append(row)
        if parsed.stats:
            rows = parsed.aggregate(found)
        else:
            self.served += len(rows)
            self.rows_served += len(rows)
        self.cpu += time.process_time() - cpu
        return {"status": "Complete", "results": rows, "statistics": {"recordsMatched": float(matched)}}

    def _candidates(self, lo: int, hi: int, now: int, floor: int | None, arrivals: tuple[int, int]):
        """(host, step) of the lines a query may match: from the arrival index when it asks only for lines later
        than the index keeps, else every line of its timestamps."""
        if floor is not None and floor >= self.INDEX_LAG_MS:
            self._index(now)
            first, last = arrivals[0] // 1000, arrivals[1] // 1000
            hosts = self.hosts
            for second in sorted(s for s in self._arrivals if first <= s <= last):
                for p in self._arrivals[second]:
                    yield p % hosts + 1, p // hosts
            return
        k = max(0, int((lo - self.start_ms - self.period) // self.period))
        while k < self.count and self.start_ms + int(k * self.period) <= hi:
            for h in range(1, self.hosts + 1):
                yield h, k
            k += 1


# -- Logs Insights: the query shapes the tailer's late-line check sends ----------------------------------

QUERY_LATENCY_S = 1.0  # emulated seconds a query stays Running before its results are Complete
_MILLIS = {"toMillis(@timestamp)": "ts", "toMillis(@ingestionTime)": "ingested",
           "toMillis(@ingestionTime) - toMillis(@timestamp)": "lag"}
_COMPARE = re.compile(r"^(?P<expr>toMillis\(@\w+\)(?: - toMillis\(@\w+\))?) (?P<op>>=|<=|>|<|=) (?P<value>-?\d+)$")
_LIKE = re.compile(r"^@logStream like /(?P<stream>(?:[^/\\]|\\.)*)/$")
_FIELD = re.compile(r"^(?:toMillis\((?P<of>@\w+)\) as (?P<alias>\w+)|(?P<plain>@\w+)"
                    r"|floor\(toMillis\((?P<floor_of>@\w+)\) / (?P<per>\d+)\) as (?P<floor_alias>\w+))$")
_STAT = re.compile(r"^(?P<fn>count|max|min)\((?P<expr>[^)]*\)?(?: - toMillis\(@\w+\))?|\*)\) as (?P<alias>\w+)$")
_OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        "=": lambda a, b: a == b}


class ParsedQuery:
    """The Logs Insights subset the late-line check uses: `fields ... | filter ... | limit N`, or
    `filter ... | stats count(*) as a, max(<expr>) as b`; a filter is `and`ed clauses, each
    `@logStream like /re/` or a comparison of toMillis(@timestamp), toMillis(@ingestionTime) or
    their difference with a number. Anything else raises ValueError (moto's own answer then)."""

    def __init__(self, query: str):
        self.fields: list[tuple[str, str]] = []
        self.computed: dict[str, tuple[str, int]] = {}  # alias -> (ts or ingested, divisor) of floor(.../n)
        self.by: str | None = None
        self.stream: re.Pattern[str] | None = None
        self.tests: list[tuple[str, Any, int]] = []
        self.stats: list[tuple[str, str, str]] = []
        self.limit: int | None = None
        for stage in (part.strip() for part in query.strip().split(" | ")):
            word, _, rest = stage.partition(" ")
            if word == "fields":
                for item in rest.split(","):
                    f = _FIELD.match(item.strip())
                    if not f:
                        raise ValueError("unsupported field")
                    if f.group("floor_alias"):
                        of = _MILLIS[f"toMillis({f.group('floor_of')})"]
                        self.computed[f.group("floor_alias")] = (of, int(f.group("per")))
                        continue
                    self.fields.append((f.group("alias") or f.group("plain"), f.group("of") or f.group("plain")))
            elif word == "filter":
                for clause in rest.split(" and "):
                    self._clause(clause.strip())
            elif word == "limit":
                self.limit = int(rest)
            elif word == "stats":
                rest, _, by = rest.partition(" by ")
                if by:
                    if by.strip() not in self.computed:
                        raise ValueError("unsupported grouping")
                    self.by = by.strip()
                for item in rest.split(", "):
                    m = _STAT.match(item.strip())
                    if not m or (m.group("expr") != "*" and m.group("expr") not in _MILLIS):
                        raise ValueError("unsupported statistic")
                    self.stats.append((m.group("fn"), _MILLIS.get(m.group("expr"), "*"), m.group("alias")))
            else:
                raise ValueError("unsupported command")
        if bool(self.fields) == bool(self.stats) or (self.computed and not self.by):
            raise ValueError("unsupported query")

    def _clause(self, clause: str) -> None:
        like = _LIKE.match(clause)
        if like:
            self.stream = re.compile(like.group("stream"))
            return
        m = _COMPARE.match(clause)
        if not m or m.group("expr") not in _MILLIS:
            raise ValueError("unsupported filter")
        self.tests.append((_MILLIS[m.group("expr")], _OPS[m.group("op")], int(m.group("value"))))

    def matches(self, stream: str, ts: int, ingested: int) -> bool:
        values = {"ts": ts, "ingested": ingested, "lag": ingested - ts}
        if self.stream is not None and not self.stream.search(stream):
            return False
        return all(op(values[name], value) for name, op, value in self.tests)

    def aggregate(self, matches: list[tuple[int, int]]) -> list[list[dict[str, str]]]:
        """The rows of a `stats` query over (ts, ingested) pairs: one, or one per group of `by`."""
        if self.by:
            of, per = self.computed[self.by]
            groups: dict[int, list[tuple[int, int]]] = {}
            for t, i in matches:
                groups.setdefault({"ts": t, "ingested": i}[of] // per, []).append((t, i))
            return [[{"field": self.by, "value": str(key)}, *self._row(found)] for key, found in sorted(groups.items())]
        return [self._row(matches)]

    def _row(self, matches: list[tuple[int, int]]) -> list[dict[str, str]]:
        row = []
        for fn, of, alias in self.stats:
            if fn == "count":
                value: float = len(matches)
            else:
                seen = [{"ts": t, "ingested": i, "lag": i - t}[of] for t, i in matches]
                value = (max if fn == "max" else min)(seen) if seen else 0
            row.append({"field": alias, "value": str(value)})
        return row


class InsightsQuery:
    """A Logs Insights query over the emulated group, answered as CloudWatch answers it.

    The time range is whole epoch seconds of event timestamps, both ends inclusive (StartQuery's
    startTime/endTime); rows carry `@ptr` and the asked fields as strings; `statistics.recordsMatched`
    counts every match, so a reader can tell a result cut at `limit`. It is Running for
    QUERY_LATENCY_S emulated seconds.
    """

    def __init__(self, group: Any, start_s: int, end_s: int, query: str, limit: int | None):
        parsed = ParsedQuery(query)
        cap = min(parsed.limit or PAGE_EVENTS, limit or PAGE_EVENTS * 10)
        self.created = core.now()
        rows, matched, scanned, size = [], 0, 0, 0
        found: list[tuple[int, int]] = []
        lo, hi = start_s * 1000, end_s * 1000 + 999
        for name, stream in group.streams.items():
            index = _index(stream)
            for key in index[bisect_left(index, lo, key=lambda k: k[0]):bisect_right(index, hi, key=lambda k: k[0])]:
                ts, ingested, _, event_id, event = key
                scanned += 1
                size += len(event.message) + EVENT_OVERHEAD
                if not parsed.matches(name, ts, ingested):
                    continue
                matched += 1
                if parsed.stats:
                    found.append((ts, ingested))
                elif len(rows) < cap:
                    values = {"@timestamp": ts, "@ingestionTime": ingested, "@logStream": name,
                              "@message": event.message}
                    row = [{"field": alias, "value": str(values[of])} for alias, of in parsed.fields]
                    row.append({"field": "@ptr", "value": f"{name}@{event_id}"})
                    rows.append(row)
        self.rows = parsed.aggregate(found) if parsed.stats else rows
        self.statistics = {"recordsMatched": float(matched), "recordsScanned": float(scanned),
                           "bytesScanned": float(size)}

    def result(self) -> dict:
        if core.now() < self.created + QUERY_LATENCY_S:
            return {"status": "Running", "results": [], "statistics": self.statistics}
        return {"status": "Complete", "results": self.rows, "statistics": self.statistics}


def _apply_insights() -> None:
    from moto.logs.models import LogsBackend

    original_start, original_results = LogsBackend.start_query, LogsBackend.get_query_results

    def start_query(self, log_group_names, start_time, end_time, query_string, *args, **kwargs):
        if _SYNTHETIC and log_group_names == [LOG_GROUP]:
            return _SYNTHETIC[0].start_query(startTime=start_time, endTime=end_time,
                                             queryString=query_string)["queryId"]
        pump(self)
        if log_group_names == [LOG_GROUP] and LOG_GROUP in self.groups:
            try:
                query = InsightsQuery(self.groups[LOG_GROUP], start_time, end_time, query_string, None)
            except ValueError:
                query = None
            if query is not None:
                query_id = f"emulated-{len(_QUERIES) + 1}"
                _QUERIES[query_id] = query
                return query_id
        return original_start(self, log_group_names, start_time, end_time, query_string, *args, **kwargs)

    def get_query_results(self, query_id):
        if _SYNTHETIC and query_id in _SYNTHETIC[0].queries:
            return _SyntheticResult(_SYNTHETIC[0].get_query_results(queryId=query_id))
        if query_id in _QUERIES:
            return _QUERIES[query_id]
        return original_results(self, query_id)

    LogsBackend.start_query = start_query
    LogsBackend.get_query_results = get_query_results


_QUERIES: dict[str, InsightsQuery] = {}
InsightsQuery.to_result_json = InsightsQuery.result  # what moto's response handler calls
core.register_patch("logs:insights", _apply_insights)
