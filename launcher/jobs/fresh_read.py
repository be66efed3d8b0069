"""The fresh read: every poll, one FilterLogEvents over the job's stream prefix, from a little below where the
read before could have missed a line, with repeats dropped by eventId.

Why this shape: one FilterLogEvents read per poll over the prefix `<job>/` costs the same for 1 host and
for 256 and finds late streams on its own, where GetLogEvents per host does not scale. A page holds at most
10,000 events or 1 MB and may be partial or empty while a nextToken says there is more
(https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_FilterLogEvents.html).
FilterLogEvents selects by event timestamp, never by ingestion time, so each read starts `overlap` (2 s)
below the time the read before could have missed a line (see `FreshRead._floor`): a line whose lag is at
most the overlap is always read by it, and each event is read about 1 + overlap/interval times (1.3 to
1.45 at a 5 s poll). It assumes a line can be read as soon as CloudWatch has ingested it (its
ingestionTime); a read-after-write delay would need more overlap. Lines later than that are the late
check's (launcher.jobs.late_check); the fresh read remembers which late ones it printed (`LateKeys`).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Generator, Iterator
from typing import Any

from launcher.core.names import LOG_GROUP
from launcher.jobs.logrecords import BUCKET_MS, LogLine, Stats
from launcher.jobs.ratelimit import LogsCalls
from launcher.jobs.shaping import Shaper

_FAR = 1 << 62  # "no ingestionTime seen yet" for how far our clock runs ahead of CloudWatch's


def filter_params(prefix: str, start: int | None, end: int | None, page_size: int | None) -> dict[str, Any]:
    """FilterLogEvents arguments for the job's streams between `start` and `end` (ms, inclusive)."""
    params: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": prefix,
                              "interleaved": True}  # AWS always interleaves; moto only when asked
    if start is not None:
        params["startTime"] = start
    if end is not None:
        params["endTime"] = end
    if page_size:
        params["limit"] = page_size
    return params


class SeenIds:
    """eventIds the fresh read returned, by 2 s bucket of timestamp; only the overlap window's are kept.

    An id is held as its 64-bit hash (a 56-digit eventId string is 105 bytes): at 10,000 lines a second
    the window holds some 75,000. Two ids of one 2 s bucket sharing a hash (odds about 1e-11) would
    drop a line.
    """

    def __init__(self) -> None:
        self._buckets: dict[int, set[int]] = {}
        self.size = 0

    def add(self, event_id: str, ts: int) -> bool:
        """Remember `event_id`; False when it was remembered already."""
        key = hash(event_id)
        bucket = self._buckets.get(ts // BUCKET_MS)
        if bucket is None:
            bucket = self._buckets[ts // BUCKET_MS] = set()
        elif key in bucket:
            return False
        bucket.add(key)
        self.size += 1
        return True

    def forget_below(self, ts: int) -> None:
        """Drop every bucket that ends at or below `ts` (no fresh read returns those events again)."""
        for b in [b for b in self._buckets if (b + 1) * BUCKET_MS <= ts]:
            self.size -= len(self._buckets.pop(b))


class LateKeys:
    """Lines the fresh read printed although they arrived later than the late threshold, until checked.

    Logs Insights rows carry no eventId, so a late line is known by (stream, timestamp, message); a
    count per key keeps two identical lines of one millisecond apart. Keys are kept by 2 s bucket of
    arrival (ingestionTime): the late check reads arrivals in order and forgets what it has passed.
    Only the late few are kept (about 3% of lines with a 2 s threshold).
    """

    def __init__(self) -> None:
        self._buckets: dict[int, dict[int, int]] = {}
        self.size = 0

    @staticmethod
    def key(stream: str, ts: int, message: str) -> int:
        return hash((stream, ts, message))

    def add(self, key: int, at: int) -> None:
        """Remember a late line that arrived at `at` (ms)."""
        b = at // BUCKET_MS
        bucket = self._buckets.setdefault(b, {})
        bucket[key] = bucket.get(key, 0) + 1
        self.size += 1

    def take(self, key: int, at: int) -> bool:
        """True (and forget one) when the fresh read printed this line, which arrived at `at`, already."""
        bucket = self._buckets.get(at // BUCKET_MS, {})
        n = bucket.get(key, 0)
        if not n:
            return False
        if n == 1:
            del bucket[key]
        else:
            bucket[key] = n - 1
        self.size -= 1
        return True

    def forget_below(self, at: int) -> None:
        """Forget the lines that arrived in buckets ending at or below `at`."""
        for b in [b for b in self._buckets if (b + 1) * BUCKET_MS <= at]:
            self.size -= sum(self._buckets.pop(b).values())


class FreshRead:
    """The poll-by-poll read of a job's newest lines: pages, where the next read starts, and eventId dedup."""

    def __init__(self, prefix: str, calls: LogsCalls, shaper: Shaper, stats: Stats, late_keys: LateKeys, *,
                 since_ms: int | None, overlap_ms: int, late_ms: int, max_pages: int = 50,
                 page_size: int | None = None):
        self.prefix, self.calls, self.shaper, self.stats = prefix, calls, shaper, stats
        self.late_keys = late_keys
        self.max_pages, self.page_size = max_pages, page_size
        self._overlap, self._late_ms = overlap_ms, late_ms
        self.start: int | None = since_ms  # startTime of the next read; never moves back
        self._high: int | None = None  # the newest timestamp read
        self._resume: dict[str, Any] | None = None  # the rest of a read cut at max_pages, for the next poll
        self._pages: list[tuple[int | None, int | None, int, bool]] = []  # (lo, hi, sent, last) of this read
        self._ahead = _FAR  # how far our clock may run ahead of CloudWatch's, from ingestion times seen
        self._aheads: deque[int] = deque(maxlen=12)  # the estimates of the last reads that returned lines
        self.ahead_ms = 0  # the least of them (each is an upper bound; 0 until a read returned a line)
        self.first_sent: int | None = None  # our clock when the first page of the first read was sent
        self._ids = SeenIds()
        self._counted: int | None = None  # the least bound of a page of this read that counts, as it came

    def read(self, drain: bool) -> Generator[list[LogLine], None, int]:
        """One poll's read, a page of ordered lines at a time; returns the pages it took (its cost)."""
        params = self._resume
        if params is None:
            params = filter_params(self.prefix, self.start, None, self.page_size)
            self._pages, self._ahead, self._counted = [], _FAR, None
        self._resume = None
        lo = params.get("startTime") if not self._pages else self._pages[-1][1]
        pages = 0
        while True:
            page = self.calls.call("filter_log_events", params)
            sent = self.calls.sent_ms
            if self.first_sent is None:
                self.first_sent = sent
            pages += 1
            events = page.get("events", ())
            out: list[LogLine] = []
            for event in events:
                self._accept(event, out)
                ingested = event.get("ingestionTime")
                if ingested is not None and sent - int(ingested) < self._ahead:
                    self._ahead = max(0, sent - int(ingested))
            token = page.get("nextToken")
            hi = max(int(e["timestamp"]) for e in events) if events else lo
            self._pages.append((lo, hi, sent, not token or not events))
            lo = hi
            settled = self._settled_below()
            if settled is not None:  # a long read (a backlog) holds only the ids the next read can meet again
                self._ids.forget_below(settled)
            if out:
                yield self.shaper.order(out)
            if not token:
                break
            params = {**params, "nextToken": token}
            if pages >= self.max_pages and not drain:
                self._resume = params  # the rest next poll, the same query continued
                break
        if self._ahead < _FAR:
            self._aheads.append(self._ahead)
            self.ahead_ms = min(self._aheads)
        if self._resume is None and self._high is not None:
            floor = self._floor()
            self.start = floor if self.start is None else max(self.start, floor)
            self._ids.forget_below(self.start)
        return pages

    @property
    def newest(self) -> int | None:
        """The newest timestamp read so far (ms)."""
        return self._high

    def _floor(self) -> int:
        """Where the next read starts: no line at most `overlap` late that this read missed is below it.

        A page sent at time R returns every line of its timestamps that had arrived by R; a line it
        missed arrived after R, so with a lag of at most `overlap` its timestamp is above R - overlap.
        R is our clock less how far it may run ahead of CloudWatch's (the least gap seen between a call
        and the ingestionTime of a line it returned), so a fast local clock loses nothing. A page whose
        timestamps all lie below that bound cannot have missed such a line; the last page (open-ended)
        and empty pages always count. So each poll re-reads about `overlap` seconds, not the time its
        pages took at the call rate.
        """
        floor: int | None = None
        for bound, counts in self._bounds():
            if counts:
                floor = bound if floor is None else min(floor, bound)
        self._pages = []
        return floor if floor is not None else (self.start or 0)

    def _bounds(self) -> Iterator[tuple[int, bool]]:
        """Each page of this read: the lowest timestamp of a line it may have missed, and whether that counts."""
        for page in self._pages:
            yield self._bound(*page)

    def _bound(self, lo: int | None, hi: int | None, sent: int, last: bool) -> tuple[int, bool]:
        """A page's lowest timestamp of a line it may have missed, and whether that counts (it lies within the
        page's timestamps, or the page was the last or empty)."""
        known = self._ahead < _FAR  # no ingestionTime seen: fall back to the newest timestamp
        at = sent - self._ahead if known else min(sent, self._high if self._high is not None else sent)
        bound = at - self._overlap
        if lo is not None:
            bound = max(lo, bound)
        return bound, last or hi is None or bound <= hi

    def _settled_below(self) -> int | None:
        """While a read goes on: no later read starts below this, so ids under it will not be met again.

        The pages' times and lower ends only grow and the estimate of how far our clock runs ahead only
        shrinks, so a bound only grows: every later page's is at least the newest page's, and the floor is at
        least the least bound (as it was when its page came) of a page that counts; and this read's later pages
        lie above the newest page's top. Without an ingestionTime seen yet, nothing is settled.
        """
        if self._ahead >= _FAR or not self._pages:
            return None
        newest = self._pages[-1]
        bound, counts = self._bound(*newest)
        if counts:
            self._counted = bound if self._counted is None else min(self._counted, bound)
        if newest[1] is None:
            return None
        # this read's own later pages start at the newest page's top: the ids the read before left above it serve them
        return min(bound, newest[1]) if self._counted is None else min(self._counted, bound, newest[1])

    def _accept(self, event: dict[str, Any], out: list[LogLine]) -> None:
        self.stats.events += 1
        stream = event.get("logStreamName", "")
        if not stream.startswith(self.prefix):  # `job-a` must not show `job-ab`
            self.stats.foreign += 1
            return
        event_id, ts = str(event["eventId"]), int(event["timestamp"])
        if self._high is None or ts > self._high:
            self._high = ts
        if not self._ids.add(event_id, ts):
            self.stats.duplicates += 1
            return
        lag = int(event.get("ingestionTime", ts)) - ts
        raw = str(event.get("message", "")).rstrip("\n")
        if lag > self._late_ms:  # the late check will return it too: remember it was printed
            self.late_keys.add(LateKeys.key(stream, ts, raw), ts + lag)
            if lag > self.stats.max_late_s * 1000:
                self.stats.max_late_s = lag / 1000
        held = self._ids.size + self.late_keys.size
        if held > self.stats.max_seen:
            self.stats.max_seen = held
        self.shaper.emit(stream, ts, raw, event_id, out)
