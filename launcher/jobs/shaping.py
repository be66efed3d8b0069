"""From CloudWatch events to the lines a caller sees: the host and grep filters, sanitised stream names, and
timestamp order, with lines older than one already handed over marked late.

Both reads (the fresh read and the late check) hand their events here, so a line looks the same whichever
read found it, and "printed out of order" is decided in one place.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from launcher.core.sanitize import clean
from launcher.jobs.logrecords import LogLine, NoteKind, Notes, Stats


class Shaper:
    """Makes one job's `LogLine`s: filters, labels and orders them, and notes lines that came late."""

    def __init__(self, job: str, stats: Stats, notes: Notes, *, hosts: Iterable[int] | None = None,
                 grep: str | None = None, overlap_ms: int = 2_000):
        self.stats, self.notes = stats, notes
        self._host_re = re.compile(rf"^{re.escape(job)}/algo-(\d+)-\d+$")
        self._hosts = frozenset(hosts) if hosts else None
        self._grep = re.compile(grep) if grep else None
        self._overlap = overlap_ms
        self._streams: dict[str, tuple[int | None, str]] = {}
        self._printed_high: int | None = None
        self._late_count = 0  # late lines not yet noted, and the worst lateness among them
        self._late_worst = 0.0

    def emit(self, stream: str, ts: int, raw: str, event_id: str, out: list[LogLine]) -> None:
        """Append the line to `out` unless a filter drops it."""
        host, name = self._stream(stream)
        if self._hosts is not None and host not in self._hosts:
            return
        if self._grep is not None and not self._grep.search(raw):
            return
        # isprintable() holds for no string `clean` would change (controls, bidi marks, surrogates), and a line
        # without a backslash cannot pass for an escape: skip both
        plain = raw.isprintable() and "\\" not in raw
        out.append(LogLine(ts, host, name, raw if plain else clean(raw, unambiguous=True),
                           event_id if event_id.isprintable() else clean(event_id)))

    def order(self, lines: list[LogLine]) -> list[LogLine]:
        """Sort a page's lines; mark (and note, now and then) those older than one handed over before."""
        lines.sort(key=lambda ln: (ln.timestamp, ln.host or 0, ln.stream, len(ln.event_id), ln.event_id))
        high = self._printed_high
        if lines and high is not None and lines[0].timestamp < high:
            lines = [ln if ln.timestamp >= high else replace(ln, late=True) for ln in lines]
            self.stats.late += sum(ln.late for ln in lines)
            # Reordering within the overlap is ordinary cross-host jitter; beyond it, say so.
            noted = [ln for ln in lines if ln.timestamp < high - self._overlap]
            if noted:
                self._late_count += len(noted)
                self._late_worst = max(self._late_worst, (high - noted[0].timestamp) / 1000)
        if lines:
            self._printed_high = lines[-1].timestamp if high is None else max(high, lines[-1].timestamp)
        if self._late_count and self.notes.hint(
                NoteKind.OUT_OF_ORDER, f"{self._late_count} line(s) reached CloudWatch late and printed out of order "
                f"(up to {self._late_worst:.1f}s behind lines already printed)", lines=self._late_count,
                behind_s=self._late_worst):
            self._late_count, self._late_worst = 0, 0.0
        self.stats.printed += len(lines)
        return lines

    def _stream(self, stream: str) -> tuple[int | None, str]:
        known = self._streams.get(stream)
        if known is None:
            m = self._host_re.match(stream)
            known = self._streams[stream] = (int(m.group(1)) if m else None, clean(stream))
        return known
