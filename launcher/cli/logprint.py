"""How a log line looks on a terminal or in JSON: its label and record shape, with the colours and the
sanitising of launcher.cli.present (the one presentation layer).

Lines reach here already sanitised (`launcher.jobs.tail` passes every string from CloudWatch through
`sanitize.clean` once, when it reads it), so printing is a format and one write per line: at
10,000 lines a second the printer must cost less than reading does.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

from launcher.cli.present import host_colour
from launcher.cli.present import safe as clean
from launcher.core.timeutil import clock_time, epoch, iso

if TYPE_CHECKING:
    from launcher.jobs.tail import LogLine

def label(line: LogLine, color: bool = False) -> str:
    """`[algo-N]`, coloured by N on a terminal (by host number, so a host keeps its colour)."""
    text = f"[{line.label}]"
    if color and line.host is not None:
        return f"\x1b[{host_colour(line.host)}m{text}\x1b[0m"
    return text


def record(line: LogLine) -> dict[str, Any]:
    """The JSON-lines record of a log line (`late` only when it printed out of timestamp order)."""
    out: dict[str, Any] = {"type": "log", "timestamp": iso(line.timestamp / 1000), "host": line.label,
                           "stream": line.stream, "message": line.message, "event_id": line.event_id}
    if line.late:
        out["late"] = True
    return out


class Printer:
    """Log lines to `out` (text or JSON lines), notes and status changes to `err`, one write per line."""

    def __init__(self, out: TextIO, err: TextIO, as_json: bool = False, color: bool = False):
        self.out, self.err, self.as_json, self.color = out, err, as_json, color
        self._labels: dict[tuple[int | None, str], str] = {}

    def line(self, line: LogLine) -> None:
        if self.as_json:
            self.out.write(json.dumps(record(line)) + "\n")
            return
        key = (line.host, line.stream)
        text = self._labels.get(key)
        if text is None:
            text = self._labels[key] = label(line, self.color)
        self.out.write(f"{text} {line.message}\n")

    def flush(self) -> None:
        self.out.flush()

    def status(self, transition: dict[str, Any]) -> None:
        if self.as_json:
            self.out.write(json.dumps({"type": "status", "status": clean(transition["Status"]),
                                       "time": iso(epoch(transition.get("StartTime")) or 0),
                                       "message": clean(transition.get("StatusMessage", ""))}) + "\n")
            self.out.flush()
        else:
            self.note(f"{clock_time(transition.get('StartTime'))} {clean(transition['Status'])} - "
                      f"{clean(transition.get('StatusMessage', ''))}".rstrip(" -"))

    def end(self, job: str, status: str | None, exit_code: int, failure_reason: str | None, billable: Any) -> None:
        if self.as_json:
            self.out.write(json.dumps({"type": "end", "job": job, "status": status, "exit_code": exit_code,
                                       "failure_reason": None if failure_reason is None else clean(failure_reason),
                                       "billable_seconds": billable}) + "\n")
            self.out.flush()
            return
        if status == "Failed":
            self.note(f"{job} Failed: {clean(failure_reason or 'no FailureReason given')}")
        else:
            extra = f" (billable seconds: {billable})" if billable is not None else ""
            self.note(f"{job} {status}{extra}")

    def note(self, message: str) -> None:
        self.err.write(message + "\n")
        self.err.flush()
