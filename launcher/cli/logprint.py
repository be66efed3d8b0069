"""How a followed job looks on a terminal or in JSON lines: log lines with their `[algo-N]` label (coloured by
host on a terminal), status changes and notes on stderr, and the job's end.

The follower (launcher.api.follow) hands over typed, already sanitised records through the callbacks of
`Printer.hooks()`, so printing is a format and one write per line: at 10,000 lines a second the printer
must cost less than reading does. Notes that name a command or a flag are worded here, for a shell.
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO, TypedDict

from launcher.cli.present import host_colour
from launcher.core.sanitize import clean, one_line
from launcher.core.timeutil import clock_time, iso

if TYPE_CHECKING:
    from launcher.api import FollowResult, LogLine, LogNote, StatusChange

# Notes the CLI words itself (by kind), from the figures the note carries: the library speaks of arguments.
CLI_WORDS = {
    "check_behind": "the late-line check is {behind_s:.0f}s behind (reads limited by --rate); lines more than "
                    "{horizon_s:.0f}s late may be missed",
    "final_unchecked": "warning: could not finish checking {job} for lines that reached CloudWatch late ({slices} "
                       "slice(s), {left_s:.0f}s of arrivals, left unchecked at --drain-timeout after {after_s:.0f}s); "
                       "`smp-launch logs {job}` again later shows them",
    "final_progress": "still checking {job} for lines that reached CloudWatch late: {left} slice(s) left, {found} "
                      "line(s) found in {after_s:.0f}s (--drain-timeout sets a limit)",
    "past_horizon": "warning: {count} line(s) of {job} reached CloudWatch more than {horizon_s:.0f}s after their "
                    "timestamps (up to {worst_s:.0f}s) and were not printed; --late-horizon {suggest_s:.0f}s prints "
                    "them",
    "arriving_after_end": "note: {count} late line(s) of {job} reached CloudWatch after the job ended, the last "
                          "{after_s:.0f}s after; none for {quiet_s:.0f}s since, so the check stopped: lines that "
                          "arrive from now on are not printed (`smp-launch logs {job} --no-follow` later prints every "
                          "line)",
}


class Hooks(TypedDict):
    """The follower's callbacks, as launcher.api.follow takes them."""

    on_line: Callable[[LogLine], None]
    on_status: Callable[[StatusChange], None]
    on_note: Callable[[LogNote], None]
    on_idle: Callable[[], None]


def worded(note: LogNote | str) -> str:
    """The note as the CLI says it."""
    from launcher.cli.invoked import as_run

    if isinstance(note, str):
        return as_run(note)
    template = CLI_WORDS.get(note.kind.value)
    return as_run(template.format(**note.args) if template else note.message)


def job_of(line: LogLine) -> str:
    """The job a line came from: its stream's first part (`JOB/algo-N-...`)."""
    return line.stream.split("/", 1)[0]


def label(line: LogLine, color: bool = False, with_job: bool = False) -> str:
    """`[algo-N]` (`[JOB/algo-N]` with several jobs), coloured by N on a terminal (by host number, so a host
    keeps its colour)."""
    text = f"[{job_of(line)}/{line.label}]" if with_job else f"[{line.label}]"
    if color and line.host is not None:
        return f"\x1b[{host_colour(line.host)}m{text}\x1b[0m"
    return text


def record(line: LogLine, with_job: bool = False) -> dict[str, Any]:
    """The JSON-lines record of a log line (`late` only when it printed out of timestamp order; `job` when
    several jobs are followed)."""
    out: dict[str, Any] = {"type": "log", "timestamp": iso(line.timestamp / 1000), "host": line.label,
                           "stream": line.stream, "message": line.message, "event_id": line.event_id}
    if with_job:
        out["job"] = job_of(line)
    if line.late:
        out["late"] = True
    return out


def wants_colour(out: TextIO, as_json: bool) -> bool:
    """Colour for a terminal, never for JSON lines, and not where NO_COLOR is set."""
    return bool(getattr(out, "isatty", lambda: False)()) and not as_json and "NO_COLOR" not in os.environ


class Printer:
    """Log lines to `out` (text or JSON lines), notes and status changes to `err`, one write per line."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None, as_json: bool = False,
                 color: bool | None = None, with_job: bool = False):
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.as_json = as_json
        self.with_job = with_job  # several jobs: each line labelled [JOB/algo-N]
        self.color = wants_colour(self.out, as_json) if color is None else color
        self._labels: dict[tuple[int | None, str], str] = {}

    def hooks(self) -> Hooks:
        """The follower's callbacks that print here."""
        return Hooks(on_line=self.line, on_status=self.status, on_note=self.note, on_idle=self.flush)

    def line(self, line: LogLine) -> None:
        if self.as_json:
            self.out.write(json.dumps(record(line, self.with_job)) + "\n")
            return
        key = (line.host, line.stream)
        text = self._labels.get(key)
        if text is None:
            text = self._labels[key] = label(line, self.color, self.with_job)
        self.out.write(f"{text} {line.message}\n")

    def flush(self) -> None:
        self.out.flush()

    def status(self, change: StatusChange) -> None:
        if self.as_json:
            when = iso(change.time) if change.time else None  # AWS gave no time: null, never 1970
            self.out.write(json.dumps({"type": "status", "status": change.status, "time": when,
                                       "message": change.message}) + "\n")
            self.out.flush()
        else:
            self.note(f"{clock_time(change.time)} {change.status} - {change.message}".rstrip(" -"))

    def job_status(self, job: str, change: StatusChange) -> None:
        """A status change of one of several jobs followed together."""
        if self.as_json:
            self.out.write(json.dumps({"type": "status", "job": job, "status": change.status,
                                       "time": iso(change.time or 0), "message": change.message}) + "\n")
            self.out.flush()
        else:
            self.note(f"{clock_time(change.time)} {job} {change.status} - {change.message}".rstrip(" -"))

    def note(self, note: LogNote | str) -> None:
        self.err.write(worded(note) + "\n")
        self.err.flush()

    def finish(self, result: FollowResult) -> None:
        """What a follow ends with: the interruption notice, or the job's outcome once it ended."""
        if result.interrupted:
            self.flush()
            self.note(f"stopped following {result.job}; the job keeps running "
                      f"(`smp-launch stop {result.job}` stops it, `smp-launch logs {result.job}` follows again)")
        elif result.to_end:
            self.end(result.job, result.status, result.exit_code, result.failure_reason, result.billable_seconds)

    def end(self, job: str, status: str | None, exit_code: int, failure_reason: str | None, billable: Any) -> None:
        if self.as_json:
            self.out.write(json.dumps({"type": "end", "job": job, "status": status, "exit_code": exit_code,
                                       "failure_reason": None if failure_reason is None else clean(failure_reason),
                                       "billable_seconds": billable}) + "\n")
            self.out.flush()
            return
        if status == "Failed":
            self.note(f"{job} Failed: {one_line(failure_reason or 'no FailureReason given')}")
        else:
            extra = f" (billable seconds: {billable})" if billable is not None else ""
            self.note(f"{job} {status}{extra}")
