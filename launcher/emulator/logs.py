"""Hosts that write CloudWatch log streams as the emulator clock runs.

Each scripted job's hosts write `<job>/algo-N-<epoch>` streams into /aws/sagemaker/TrainingJobs:
some hosts start late, some lines are ingested late with older timestamps (back-dated), and a
decoy job whose name shares the prefix (`<job>-decoy/...`) logs into the same group. Nothing runs
in the background: before any Logs read, the lines due by now are written straight into moto's
backend, so a read in-process and a read through the server see the same thing.
"""
from __future__ import annotations

from typing import Any

from launcher.emulator import core, scenario

LOG_GROUP = "/aws/sagemaker/TrainingJobs"


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
    for host, stream_name in streams.items():
        # Lines below `next_i` are written or waiting (timestamped already, ingested late).
        next_i, waiting = cursor.get(host, (0, set()))
        due = sorted(j for j in waiting if job.line_times(host, j)[1] <= at)
        waiting.difference_update(due)
        n = job.line_count(host)
        while next_i < n:
            ts, visible = job.line_times(host, next_i)
            if ts > at:
                break
            (due.append if visible <= at else waiting.add)(next_i)
            next_i += 1
        cursor[host] = (next_i, waiting)
        if due:
            events = [(*job.line_times(host, j), job.line(host, j, j == n - 1)) for j in due]
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


def _apply() -> None:
    from moto.logs.models import LogsBackend

    for name in ("describe_log_streams", "get_log_events", "filter_log_events", "describe_log_groups"):
        setattr(LogsBackend, name, core.after(pump)(getattr(LogsBackend, name)))


core.register_patch("logs:hosts", _apply)
