"""What `logs`, `status`, `list`, `stop` and `metrics` do, kept apart from click so tests can call them.

These commands talk to AWS through boto3 only: none of them may import the SageMaker SDK.
"""
from __future__ import annotations

import sys
import time
from typing import Any

from launcher.aws import Clients
from launcher.errors import EXIT_OK, UsageError
from launcher.output import emit_json
from launcher.sanitize import clean_data
from launcher.state import resolve_job
from launcher.timeutil import clock_time, parse_since

MAX_HOST = 4096  # far above any training job's instance count; a typo like 1-100000000 is refused, not expanded


def parse_hosts(text: str | None) -> list[int] | None:
    """`1,3`, `algo-2` or `1-4` -> host numbers (algo-N), each at most MAX_HOST."""
    if not text:
        return None
    hosts: set[int] = set()
    for part in text.replace(" ", "").split(","):
        part = part.removeprefix("algo-")
        try:
            lo, _, hi = part.partition("-")
            first, last = int(lo), int(hi or lo)
            if first < 1 or last < first:
                raise ValueError
        except ValueError:
            raise UsageError(f"--host {text[:80]!r}: give host numbers like 1,3 or 1-4 (algo-N)") from None
        if last > MAX_HOST:
            raise UsageError(f"--host {text[:80]!r}: host numbers go up to {MAX_HOST} (algo-N is the N-th "
                             "instance of the job)")
        hosts.update(range(first, last + 1))
    return sorted(hosts)


def _clients(profile: str | None, region: str | None) -> Clients:
    return Clients(profile=profile, region=region)


def logs(job: str, follow: bool, hosts: str | None, since: str | None, grep: str | None, output: str,
         rate: float, interval: float, profile: str | None, region: str | None) -> int:
    import re

    from launcher.tail import follow as follow_job

    if grep:
        try:
            re.compile(grep)
        except re.error as exc:
            raise UsageError(f"--grep {grep!r} is not a regular expression: {exc}") from None
    host_list = parse_hosts(hosts)
    since_s = parse_since(since) if since else None
    name, region = resolve_job(job, region)
    result = follow_job(name, _clients(profile, region), follow=follow, since=since_s, hosts=host_list, grep=grep,
                        as_json=output == "json", rate=rate, interval=interval)
    return result.exit_code


def status(job: str, output: str, profile: str | None, region: str | None) -> int:
    from launcher.jobs import exit_code_for, job_status

    name, region = resolve_job(job, region)
    data = job_status(_clients(profile, region), name).to_dict()
    if output == "json":
        emit_json(data)
    else:
        _show_status(data)
    return exit_code_for(data["status"])


def _show_status(d: dict[str, Any]) -> None:
    secondary = d["secondary_status"]
    status = d["status"] + (f" ({secondary})" if secondary and secondary != d["status"] else "")
    rows = [("job", d["job_name"]), ("status", status), ("instances", f"{d['instance_count']} x {d['instance_type']}"),
            ("image", d["image"] or "-"), ("created", clock_time(d["created"])),
            ("training start", clock_time(d["training_start"])), ("training end", clock_time(d["training_end"])),
            ("billable seconds", "-" if d["billable_seconds"] is None else str(d["billable_seconds"]))]
    if d["failure_reason"]:
        rows.append(("failure reason", d["failure_reason"]))
    if d["model_artifacts"]:
        rows.append(("model artifacts", d["model_artifacts"]))
    for key, value in rows:
        print(f"{key + ':':17} {value}")
    if d["transitions"]:
        print()
        _columns(["transition", "start (UTC)", "end (UTC)", "message"],
                 [[x["status"], clock_time(x["start"]), clock_time(x["end"]), x["message"]] for x in d["transitions"]])


def _columns(header: list[str], rows: list[list[str]]) -> None:
    """Plain aligned columns: nothing truncated, whatever the terminal's width, and easy to grep."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def list_jobs(running: bool, name_contains: str | None, limit: int, output: str, profile: str | None,
              region: str | None) -> int:
    from launcher.jobs import list_jobs as find

    rows = [r.to_dict() for r in find(_clients(profile, region), running=running, name_contains=name_contains,
                                      limit=limit)]
    if output == "json":
        emit_json(rows)
        return EXIT_OK
    if not rows:
        print("no jobs launched by smp-launch match", file=sys.stderr)
        return EXIT_OK
    _columns(["job", "status", "secondary", "instances", "created (UTC)", "billable s"],
             [[r["job_name"], r["status"] or "-", r["secondary_status"] or "-",
               f"{r['instance_count']} x {r['instance_type']}", clock_time(r["created"]),
               "-" if r["billable_seconds"] is None else str(r["billable_seconds"])] for r in rows])
    return EXIT_OK


def stop(job: str, yes: bool, output: str, profile: str | None, region: str | None) -> int:
    import click

    from launcher.jobs import stop as stop_job

    name, region = resolve_job(job, region)
    confirm = (lambda q: click.confirm(q, default=False, err=True)) if sys.stdin.isatty() else None
    result = stop_job(_clients(profile, region), name, yes=yes, confirm=confirm).to_dict()
    if output == "json":
        emit_json(result)
    else:
        print(result["message"], file=sys.stderr)
    return EXIT_OK


def metrics(job: str, since: str, output: str, profile: str | None, region: str | None) -> int:
    from launcher.metrics import fetch, render

    name, region = resolve_job(job, region)
    data = clean_data(fetch(_clients(profile, region), name, parse_since(since), time.time()))
    if output == "json":
        emit_json(data)
    else:
        render(data, print)
    return EXIT_OK
