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
from bisect import bisect_left, bisect_right, insort
from itertools import islice
from typing import Any

from emulator import core, scenario

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
PAGE_EVENTS = 10_000
PAGE_BYTES = 1_048_576
EVENT_OVERHEAD = 26  # bytes counted per event besides its message, as for PutLogEvents batches


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


def _apply() -> None:
    import functools

    from moto.logs.models import LogGroup, LogsBackend

    for name in ("describe_log_streams", "get_log_events", "filter_log_events", "describe_log_groups"):
        setattr(LogsBackend, name, core.after(pump)(getattr(LogsBackend, name)))
    LogGroup.filter_log_events = functools.partialmethod(filter_log_events, _moto=LogGroup.filter_log_events)


core.register_patch("logs:hosts", _apply)


class SyntheticLogs:
    """A Logs client for one job whose hosts each write `rate` lines a second, without moto: for volume.

    Host h writes its k-th line at `start + k / rate` (plus a per-host phase), and it reaches
    CloudWatch after a lag drawn from `lag` (mostly well under 2 s, a long tail), never later than
    the end of writing. `filter_log_events` serves it as CloudWatch does (timestamp order, pages of
    10,000 events or 1 MB, startTime and endTime inclusive, a resumable nextToken), generating
    events on demand: memory stays flat, however long the job, so a benchmark measures the reader.
    """

    def __init__(self, job: str, hosts: int, rate: float, start: float, duration: float, clock: Any,
                 lag: Any = None, seed: int = 0):
        from emulator.scenario import LagModel, unit

        self.job, self.hosts, self.clock = job, hosts, clock
        self.period = 1000.0 / rate  # ms between two lines of one host
        self.start_ms, self.end_ms = int(start * 1000), int((start + duration) * 1000)
        self.count = int(duration * rate)  # lines per host
        step = max(1, int(self.period)) / hosts
        self.phase = [int(i * step) for i in range(hosts)]  # host i+1 writes `phase[i]` ms into each period
        model = lag or LagModel()
        self._lags = [int(model.sample(unit(seed, i, 1), unit(seed, i, 2)) * 1000) for i in range(1 << 16)]
        self.streams = [f"{job}/algo-{h}-{int(start)}" for h in range(1, hosts + 1)]
        self.calls = self.served = 0
        self.query_calls = self.rows_served = 0  # Logs Insights calls, and rows returned (part of `served`)
        self._queries: dict[str, tuple[int, int, int, int, int]] = {}
        self.cpu = 0.0  # process CPU spent serving reads, so a benchmark can leave it out

    def times(self, host: int, k: int) -> tuple[int, int]:
        """(timestamp, ingestionTime) in ms of host `host`'s k-th line."""
        ts = self.start_ms + int(k * self.period) + self.phase[host - 1]
        lag = self._lags[(host * 0x9E3779B1 + k * 0x85EBCA77 >> 7) & 0xFFFF]
        return ts, min(ts + lag, max(ts, self.end_ms))

    def message(self, host: int, k: int) -> str:
        return (f"[1,mpirank:{(host - 1) * 8},algo-{host}]<stdout>:[smp-progress] step={k} "
                f"loss={8.0 / (1 + 0.05 * k):.4f} lr=3.000e-04 tokens_per_s=15234.5 tflops_per_gpu=150.00 "
                "gpu_mem_gb=31.50")

    def expected(self) -> int:
        return self.hosts * self.count

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

    def start_query(self, startTime: int, endTime: int, queryString: str, limit: int = 10_000,  # noqa: N803
                    **_ignored: Any) -> dict:
        """Logs Insights for the tailer's late-line query: the lines of [startTime, endTime] (whole seconds,
        inclusive) that arrived more than the query's threshold after their timestamp. The rows are made
        when the results are read (CloudWatch keeps them, not the caller), as of the start."""
        self.calls += 1
        self.query_calls += 1
        lag = int(re.search(r"> (\d+)", queryString).group(1))
        query_id = f"q{self.query_calls}"
        self._queries[query_id] = (startTime, endTime, lag, limit, int(self.clock() * 1000))
        return {"queryId": query_id}

    def get_query_results(self, queryId: str, **_ignored: Any) -> dict:  # noqa: N803
        import time

        cpu = time.process_time()
        self.calls += 1
        self.query_calls += 1
        start_s, end_s, lag, limit, now = self._queries.pop(queryId)
        lo, hi = start_s * 1000, end_s * 1000 + 999
        rows, matched = [], 0
        k = max(0, int((lo - self.start_ms - self.period) // self.period))
        while k < self.count and self.start_ms + int(k * self.period) <= hi:
            for h in range(1, self.hosts + 1):
                ts, ingested = self.times(h, k)
                if lo <= ts <= hi and ingested - ts > lag and ingested <= now:
                    matched += 1
                    if len(rows) < limit:
                        rows.append([{"field": "@logStream", "value": self.streams[h - 1]},
                                     {"field": "@message", "value": self.message(h, k)},
                                     {"field": "ts", "value": str(ts)}, {"field": "ingested", "value": str(ingested)},
                                     {"field": "@ptr", "value": f"{h}:{k}"}])
            k += 1
        self.served += len(rows)
        self.rows_served += len(rows)
        self.cpu += time.process_time() - cpu
        return {"status": "Complete", "results": rows, "statistics": {"recordsMatched": float(matched)}}


# -- Logs Insights: the one query shape the tailer's late-line check sends ---------------------------

QUERY_LATENCY_S = 1.0  # emulated seconds a query stays Running before its results are Complete
_QUERY = re.compile(
    r"^fields (?P<fields>[^|]+?)\s*\|\s*filter @logStream like /(?P<stream>(?:[^/\\]|\\.)*)/"
    r" and toMillis\(@ingestionTime\) - toMillis\(@timestamp\) > (?P<lag>\d+)\s*\|\s*limit (?P<limit>\d+)\s*$")
_FIELD = re.compile(r"^(?:toMillis\((?P<of>@\w+)\) as (?P<alias>\w+)|(?P<plain>@\w+))$")


class InsightsQuery:
    """A Logs Insights query over the emulated group, answered as CloudWatch answers it.

    The time range is whole epoch seconds, both ends inclusive (StartQuery's startTime/endTime); rows
    carry `@ptr` and the asked fields as strings; `statistics.recordsMatched` counts every match, so a
    reader can tell a result cut at `limit`. It is Running for QUERY_LATENCY_S emulated seconds.
    """

    def __init__(self, group: Any, start_s: int, end_s: int, query: str, limit: int | None):
        m = _QUERY.match(query.strip())
        if not m:
            raise ValueError("unsupported query")
        fields = []
        for item in m.group("fields").split(","):
            f = _FIELD.match(item.strip())
            if not f:
                raise ValueError("unsupported field")
            fields.append((f.group("alias") or f.group("plain"), f.group("of") or f.group("plain")))
        stream_re = re.compile(m.group("stream"))
        lag = int(m.group("lag"))
        cap = min(int(m.group("limit")), limit or PAGE_EVENTS * 10)
        self.created = core.now()
        rows, matched, scanned, size = [], 0, 0, 0
        lo, hi = start_s * 1000, end_s * 1000 + 999
        for name, stream in group.streams.items():
            index = _index(stream)
            for key in index[bisect_left(index, lo, key=lambda k: k[0]):bisect_right(index, hi, key=lambda k: k[0])]:
                ts, ingested, _, event_id, event = key
                scanned += 1
                size += len(event.message) + EVENT_OVERHEAD
                if ingested - ts <= lag or not stream_re.search(name):
                    continue
                matched += 1
                if len(rows) < cap:
                    values = {"@timestamp": ts, "@ingestionTime": ingested, "@logStream": name,
                              "@message": event.message}
                    row = [{"field": alias, "value": str(values[of])} for alias, of in fields]
                    row.append({"field": "@ptr", "value": f"{name}@{event_id}"})
                    rows.append(row)
        self.rows = rows
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
        if query_id in _QUERIES:
            return _QUERIES[query_id]
        return original_results(self, query_id)

    LogsBackend.start_query = start_query
    LogsBackend.get_query_results = get_query_results


_QUERIES: dict[str, InsightsQuery] = {}
InsightsQuery.to_result_json = InsightsQuery.result  # what moto's response handler calls
core.register_patch("logs:insights", _apply_insights)
