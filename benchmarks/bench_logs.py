"""Follow jobs of 1 to 256 hosts at a fixed line rate per host, and one at 10,000 lines/s, on a virtual clock.

Part 1, volume (the tailer alone, each scenario in its own process so its peak RSS is its own):
`emulator.SyntheticLogs` serves FilterLogEvents as CloudWatch does (pages of 10,000 events
or 1 MB, timestamp order, a resumable nextToken) for hosts that each write a fixed number of lines a
second, every line reaching CloudWatch after a long-tailed lag (median 0.4 s, 97% under 2 s, 1% from
2 s to 2 minutes), nothing after the hosts stop. `smp-launch logs` follows it with its real code
(`launcher.jobs.logs.follow` with the CLI's printer) until the job ends. Reported: Logs calls per poll and
per second against the --rate budget, events fetched per line, lines lost / duplicated / printed out of order, how far
printing ran behind real time, peak RSS (and its growth over the interpreter with boto3 loaded), CPU
per 100k lines, how long after the job's end the command returned, and the resident memory every 5
simulated minutes (the curve, not only its peak). Late lines come from Logs Insights queries, served by
the fake as CloudWatch would (only lines later than the threshold); their rows count as events fetched.

Part 1b, several jobs followed together (`logs JOB1 JOB2 ...`, launcher.jobs.logs.follow_many): ten 64-host
jobs (BENCH_MULTI_JOBS, BENCH_MULTI_HOSTS) for 4 simulated minutes (BENCH_MULTI_MINUTES; shorter than the late
rows' 8 for CPU), one thread each on a shared virtual clock, every call through one bucket, at --rate 2 and 5
(BENCH_MULTI_RATES): calls a second and Insights' share, how far apart a job's polls come, lost and repeated
lines, how far printing trails, peak RSS and exit.

Part 2, through a moto server in this process (HTTP, botocore, the emulator's paging and lag): the
same tool against the SDK's `logs_for_job`, on the same scripted jobs. The SDK gets a wall-clock
budget scaled to the work (BENCH_SDK_FACTOR, 2, x our wall time, at least 10 s); where it does not
finish (it loops forever above 50 streams) its row says "did not finish" and nothing else. Hosts
1, 8 and 64 by default (BENCH_SERVER_HOSTS=1,8,64,256 adds the slowest, several minutes).

Goals: nothing lost or duplicated (but lines later than the horizon, counted, and lines that reach
CloudWatch after the command returned, which no follower that has exited can print); printing within two
polls of real time; under 100 MB for an hour at 10,000 lines/s (BENCH_LOGS_HOUR=1 runs the full hour; the
default runs 6 minutes, past the 5-minute horizon that bounds memory); calls within --rate; exit within
15 s of the job's end (30 s with half the lines late); under 150 MB through botocore; each event fetched
at most 1.5 times (a fresh read re-reads its 2 s overlap of a 5 s poll, about 1.4, and Logs Insights
returns only the few lines later than that).
"""
from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import os
import random
import re
import resource
import subprocess
import sys
import threading
import time
import types
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

POLL_S = 5.0
START = 1_800_000_000.0
PER_HOST = 20.0  # lines a second per host
HOSTS = [int(h) for h in os.environ.get("BENCH_HOSTS", "1,8,64,256").split(",")]
VOLUME_MINUTES = float(os.environ.get("BENCH_VOLUME_MINUTES", "6"))
HIGH_RATE = 10_000
HIGH_MINUTES = 60.0 if os.environ.get("BENCH_LOGS_HOUR") else VOLUME_MINUTES
HIGH_RATE_BUDGET = 5.0  # --rate for 10k lines/s: FilterLogEvents allows 10 TPS in most regions
SERVER_TRAINING_S = float(os.environ.get("BENCH_SERVER_TRAINING_S", "60"))
SDK_FACTOR = float(os.environ.get("BENCH_SDK_FACTOR", "2"))
SERVER_HOSTS = [int(h) for h in os.environ.get("BENCH_SERVER_HOSTS", "1,8,64").split(",")]
FETCH_GOAL = 1.5
LATE_MINUTES = float(os.environ.get("BENCH_LATE_MINUTES", "8"))
LATE_PLANS = [  # (hosts, lines/s per host, minutes, --rate, scenario)
    (64, PER_HOST, LATE_MINUTES, 2.0, {"lag": "half-late"}),
    (256, PER_HOST, LATE_MINUTES, 2.0, {"lag": "half-late"}),
    (256, PER_HOST, LATE_MINUTES, 2.0, {"lag": "half-late", "botocore": True}),
    (8, PER_HOST, LATE_MINUTES, 2.0, {"lag": "past-horizon"}),
    (8, PER_HOST, LATE_MINUTES, 2.0, {"lag": "past-horizon", "horizon": 660.0}),
    (8, PER_HOST, VOLUME_MINUTES, 2.0, {"clamp": False}),
]
PROGRESS = os.environ.get("BENCH_PROGRESS")  # a file each volume run appends its memory samples to


class VirtualClock:
    def __init__(self, start: float):
        self.t = start
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.t += max(0.0, seconds)


# -- part 1: volume, the tailer alone ---------------------------------------------------------------

class FakeSageMaker:
    """DescribeTrainingJob for a synthetic job: InProgress while its hosts write, Completed 10 s later."""

    def __init__(self, job: str, hosts: int, end: float, clock: VirtualClock):
        self.job, self.hosts, self.end, self.clock = job, hosts, end, clock

    def describe_training_job(self, TrainingJobName: str) -> dict:  # noqa: N803 (boto3's name)
        from datetime import datetime, timezone

        done = self.clock() >= self.end + 10
        desc = {"TrainingJobName": self.job, "TrainingJobStatus": "Completed" if done else "InProgress",
                "SecondaryStatus": "Completed" if done else "Training",
                "ResourceConfig": {"InstanceCount": self.hosts}, "SecondaryStatusTransitions": []}
        if done:
            desc["TrainingEndTime"] = datetime.fromtimestamp(self.end + 10, timezone.utc)
        return desc


SAMPLE_S = 300.0


def peak_mb() -> float:
    """This process's peak resident memory: VmHWM, its own address space's high-water mark (getrusage's
    ru_maxrss carries the parent's peak across fork and exec, so a child forked from a big bench would
    report the bench's)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def resident_mb() -> float:
    """This process's resident memory now (not its peak), from /proc."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


class CountingSink(io.TextIOBase):
    """stdout for the run: counts each (host, step) printed and how far printing runs behind the clock."""

    LINE = re.compile(r"^\[algo-(\d+)\] \S*\[smp-progress\] step=(\d+) ", re.M)

    def __init__(self, logs, clock: VirtualClock):
        self.logs, self.clock = logs, clock
        self.counts = bytearray(logs.expected())
        self.behind = 0.0
        self.newest = 0
        self.cpu = 0.0  # spent here, not in the tailer
        self.final = False
        self.curve: list[tuple[int, float]] = []  # (simulated minute, resident MB)
        self.next_sample = START + SAMPLE_S
        self.pending: list[str] = []
        self.delays = [0] * 1000  # lines by whole seconds from reaching CloudWatch to printing

    def delay(self, share: float) -> int:
        """Seconds from arrival to printing within which `share` of the lines printed."""
        want, seen = share * sum(self.delays), 0
        for seconds, n in enumerate(self.delays):
            seen += n
            if seen >= want:
                return seconds + 1
        return len(self.delays)

    def write(self, text: str) -> int:
        self.pending.append(text)  # the printer writes a line at a time; counting them is batched
        if len(self.pending) >= 2_000:
            self.flush()
        return len(text)

    def flush(self) -> None:
        """Count the lines written since the last flush (the printer flushes after every poll)."""
        cpu = time.process_time()
        text, self.pending = "".join(self.pending), []
        if self.clock() >= self.next_sample:
            self.curve.append((round((self.clock() - START) / 60), resident_mb()))
            self.next_sample += SAMPLE_S
            if PROGRESS:  # a long run leaves its curve behind even if it is stopped before the end
                with open(PROGRESS, "a") as f:
                    f.write(f"{self.curve[-1][0]} min: resident {self.curve[-1][1]:.1f} MB, peak "
                            f"{peak_mb():.1f} MB, "
                            f"behind {self.behind:.1f} s, lines {len(self.counts) - self.counts.count(0)}\n")
        now_ms = self.clock() * 1000
        for m in self.LINE.finditer(text):
            host, step = int(m.group(1)), int(m.group(2))
            i = (host - 1) * self.logs.count + step
            self.counts[i] = min(255, self.counts[i] + 1)
            ts, arrived = self.logs.times(host, step)
            self.newest = max(self.newest, ts)
            delay = int(max(0.0, now_ms - arrived) // 1000)  # printed this long after it reached CloudWatch
            self.delays[min(delay, len(self.delays) - 1)] += 1
        if self.newest and not self.final:  # how far the newest line printed so far trails the clock
            now = min(self.clock(), self.logs.end_ms / 1000)  # once the hosts stop there is nothing newer
            self.behind = max(self.behind, now - self.newest / 1000)
        self.cpu += time.process_time() - cpu


# Lags beyond the default (median 0.4 s, 1% from 2 s to 2 minutes): (share of lines, from, to seconds, log-uniform)
LAGS = {"default": None, "half-late": (0.5, 90.0, 250.0), "past-horizon": (0.01, 300.0, 600.0)}


class SharedClock(VirtualClock):
    """The virtual clock, its time also written where an emulator server in another process reads it."""

    def __init__(self, start: float, path: str):
        import mmap

        super().__init__(start)
        self._file = open(path, "r+b")  # noqa: SIM115 (open for the run)
        self._map = mmap.mmap(self._file.fileno(), 8)
        self._publish()

    def _publish(self) -> None:
        import struct

        self._map[:8] = struct.pack("d", self.t)

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        self._publish()


def synthetic(cfg: dict, clock):
    from emulator import LagModel
    from emulator.logs import SyntheticLogs

    lag = LAGS[cfg.get("lag", "default")]
    model = None if lag is None else LagModel(tail=lag[0], tail_min=lag[1], tail_max=lag[2])
    return SyntheticLogs("vol", cfg["hosts"], cfg["per_host"], START + 5, cfg["minutes"] * 60, clock, lag=model,
                         seed=cfg["hosts"], clamp=cfg.get("clamp", True))


def volume_run(cfg: dict) -> dict:
    """One synthetic job followed to its end; returns the figures (runs in a child process). With an
    `endpoint`, the Logs reads go through botocore to an emulator server in the parent (which serves the
    same synthetic job on the clock this process publishes at `clock`)."""
    import boto3  # (loaded before the baseline RSS, as in the CLI)

    from launcher.cli.logprint import Printer
    from launcher.jobs.logs import Polling, follow
    from launcher.jobs.ratelimit import RateLimiter

    hosts, minutes, rate = cfg["hosts"], cfg["minutes"], cfg["rate"]
    gc.collect()
    base_rss = peak_mb()
    clock = SharedClock(START, cfg["clock"]) if cfg.get("endpoint") else VirtualClock(START)
    duration = minutes * 60
    logs = synthetic(cfg, clock)  # with a server: the ground truth only (times and messages)
    reader_logs = logs
    if cfg.get("endpoint"):
        reader_logs = boto3.client("logs", endpoint_url=cfg["endpoint"], region_name="us-west-2",
                                   aws_access_key_id="testing", aws_secret_access_key="testing")
    clients = types.SimpleNamespace(logs=reader_logs,
                                    sagemaker=FakeSageMaker("vol", hosts, START + 5 + duration, clock))
    sink = CountingSink(logs, clock)
    err = io.StringIO()
    import launcher.jobs.reader as reader

    original_finish = reader.LogReader.finish_pages

    def finish_pages(self, *args):
        sink.flush()
        sink.final = True  # lines the end-of-job check prints are not "behind" real time
        yield from original_finish(self, *args)

    reader.LogReader.finish_pages = finish_pages
    cpu = time.process_time()
    printer = Printer(sink, err, color=False)
    result = follow("vol", clients, polling=Polling(interval=POLL_S, clock=clock, sleep=clock.sleep,
                                                    rng=random.Random(0), horizon=cfg.get("horizon", 300.0),
                                                    limiter=RateLimiter(rate, clock=clock, sleep=clock.sleep)),
                    **printer.hooks())
    printer.finish(result)
    cpu = time.process_time() - cpu - sink.cpu - logs.cpu  # the tailer's own: not the fake service's, not ours
    lines = logs.expected()
    counts = Counter(sink.counts)
    stats = result.stats
    elapsed = clock() - START
    rss = peak_mb()  # before the ground truth below is worked out
    horizon_ms = int(cfg.get("horizon", 300.0) * 1000)
    past = logs.late_lines(horizon_ms)
    end_ms = int(clock() * 1000)
    return {"scenario": cfg.get("label") or cfg.get("lag", "default"), "botocore": bool(cfg.get("endpoint")),
            "clamp": cfg.get("clamp", True), "hosts": hosts, "lines_per_s": hosts * cfg["per_host"],
            "minutes": minutes, "rate": rate, "horizon": horizon_ms / 1000,
            "past_horizon": len(past), "past_horizon_max_s": max((i - t for t, i in past), default=0) / 1000,
            "counted_past": stats.past_horizon, "counted_past_max_s": stats.past_horizon_max_s,
            # lines that reached CloudWatch after the command returned: no follower that has exited prints them
            "arrived_after_exit": logs.arrived_after(end_ms),
            # of the others, those after the end-of-job check's last window: missed while it finished
            "arrived_unchecked": (logs.arrived_after(int(stats.checked_until * 1000)) - logs.arrived_after(end_ms)
                                  if stats.checked_until is not None else 0),
            "late_after_end": stats.late_after_end,
            "unchecked_slices": stats.unchecked_slices,
            "delay_p99_s": sink.delay(0.99), "delay_max_s": sink.delay(1.0), "index_mb": logs.index_mb(),
            "reader_calls": stats.calls + stats.query_calls, "reader_query_calls": stats.query_calls,
            "reader_fetched": stats.fetched,
            "status": result.status, "lines": lines, "polls": stats.polls, "calls": logs.calls,
            "calls_per_poll": logs.calls / stats.polls, "calls_per_s": logs.calls / elapsed,
            "fetched_per_line": logs.served / lines, "lost": counts[0],
            "dup": sum((n - 1) * c for n, c in counts.items() if n > 1), "late": stats.late,
            "behind_s": sink.behind, "ids_held": stats.max_seen, "skipped_s": stats.skipped_s,
            "rss_mb": rss, "base_rss_mb": base_rss,
            "cpu_per_100k": cpu / lines * 100_000, "exit_after_end_s": clock() - (START + 5 + duration + 10),
            "tally_mb": len(sink.counts) / 2**20, "query_calls": logs.query_calls, "rows": logs.rows_served,
            "late_check": stats.late_check, "elapsed_s": elapsed,
            "curve": sink.curve,
            # what the end of the follow said first, then the first few notes of lines printed out of order
            "notes": sorted((line for line in err.getvalue().splitlines()
                             if "once more" in line or "behind" in line or "could not finish" in line
                             or "after the job ended" in line or "were not printed" in line),
                            key=lambda line: "out of order" in line)[:4]}


def run_volume_child(hosts: int, per_host: float, minutes: float, rate: float, **more) -> dict:
    cfg = {"hosts": hosts, "per_host": per_host, "minutes": minutes, "rate": rate, **more}
    if more.get("botocore"):
        return run_through_server(cfg)
    return _child(cfg)


def run_multi_child(jobs: int, hosts: int, minutes: float, rate: float) -> dict:
    cmd = [sys.executable, __file__, "--multi", json.dumps([jobs, hosts, minutes, rate])]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"multi-job run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _child(cfg: dict) -> dict:
    cmd = [sys.executable, __file__, "--volume", json.dumps(cfg)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"volume run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_through_server(cfg: dict) -> dict:
    """The follower in a child process, its Logs reads through botocore to an emulator server here that
    serves the synthetic job; the child publishes its virtual clock in a shared file the server reads."""
    import struct
    import tempfile

    import emulator
    from emulator.logs import serve_synthetic

    with tempfile.NamedTemporaryFile(prefix="bench-clock-") as f:
        f.write(struct.pack("d", START))
        f.flush()
        import mmap

        shared = mmap.mmap(f.fileno(), 8)

        def now() -> float:
            return struct.unpack("d", shared[:8])[0]

        logs = synthetic(cfg, now)
        emulator.set_clock(now)
        serve_synthetic(logs)
        try:
            with emulator.server() as endpoint:
                row = _child({**cfg, "endpoint": endpoint, "clock": f.name})
        finally:
            serve_synthetic(None)
            emulator.set_clock(None)
    elapsed = row["elapsed_s"]
    row.update(calls=logs.calls, query_calls=logs.query_calls, rows=logs.rows_served,
               calls_per_poll=logs.calls / row["polls"], calls_per_s=logs.calls / elapsed,
               fetched_per_line=logs.served / row["lines"])
    return row


def volume_goals(r: dict) -> list[str]:
    """The goals a row misses (none: met). Every row: nothing lost but what is past the horizon or reached
    CloudWatch after the command returned (no follower that has exited can print those), nothing duplicated,
    calls within --rate, each event fetched at most 1.5 times, past-horizon lines counted exactly.
    Default lag: printing within 2 polls, out within 15 s of the end, RSS (less the bench's tally and the fake's
    index) under 100 MB. Late lag: out within 30 s; through botocore: RSS under 150 MB."""
    missed = []
    if r["lost"] != r["past_horizon"] + r["arrived_after_exit"]:
        missed.append("lost")
    if r["dup"]:
        missed.append("dup")
    if r["calls_per_s"] > r["rate"]:
        missed.append("rate")
    if r["fetched_per_line"] > FETCH_GOAL:
        missed.append("fetch")
    if r["counted_past"] != r["past_horizon"]:
        missed.append("count")
    if r["status"] != "Completed":
        missed.append("status")
    own = r["rss_mb"] - r.get("tally_mb", 0) - r.get("index_mb", 0)
    if r["scenario"] == "default" and r["clamp"]:
        if r["behind_s"] > 2 * POLL_S:
            missed.append("behind")
        if r["exit_after_end_s"] > 15:
            missed.append("exit")
        if own >= 100:
            missed.append("RSS")
    elif r["exit_after_end_s"] > 30 and r["clamp"]:
        missed.append("exit")
    if r["botocore"] and r["rss_mb"] >= 150:
        missed.append("RSS")
    return missed


def row_name(r: dict) -> str:
    """A volume row's scenario as its table names it (default,no-flush; half-late,boto; past-horizon,h660)."""
    name = r["scenario"] + ("" if r["clamp"] else ",no-flush") + (",boto" if r["botocore"] else "")
    return name + (f",h{r['horizon']:g}" if r["horizon"] != 300 else "")


def print_volume(rows: list[dict]) -> None:
    print(f"Part 1: the tailer alone, poll {POLL_S:g} s, CloudWatch paging (10,000 events or 1 MB), ingestion lag by "
          "scenario; each run in its own process")
    head = (f"{'scenario':14} {'hosts':>5} {'lines/s':>7} {'min':>3} {'rate':>4} {'calls/poll':>10} {'calls/s':>7} "
            f"{'queries':>7} {'fetch/line':>10} {'lost':>7} {'dup':>4} {'late':>7} {'behind':>6} {'delay p99/max':>13} "
            f"{'RSS MB':>6} {'(+)':>4} {'exit s':>6} {'past horizon':>12} {'after exit':>10}  goals")
    print(head)
    print("-" * len(head))
    for r in rows:
        grew = r["rss_mb"] - r["base_rss_mb"]
        name = row_name(r)
        missed = volume_goals(r)
        past = f"{r['past_horizon']}/{r['counted_past']}"
        print(f"{name:14} {r['hosts']:>5} {r['lines_per_s']:>7,.0f} {r['minutes']:>3g} {r['rate']:>4g} "
              f"{r['calls_per_poll']:>10.2f} {r['calls_per_s']:>7.2f} {r['query_calls'] // 2:>7} "
              f"{r['fetched_per_line']:>10.2f} {r['lost']:>7} {r['dup']:>4} {r['late']:>7} "
              f"{r['behind_s']:>6.1f} {r['delay_p99_s']:>6}/{r['delay_max_s']:<6} {r['rss_mb']:>6.0f} {grew:>+4.0f} "
              f"{r['exit_after_end_s']:>6.1f} {past:>12} {r['arrived_after_exit']:>10}  "
              f"{'met' if not missed else 'MISSED ' + ','.join(missed)}")
    print("columns: calls include Logs Insights'; queries = Insights queries; fetch/line = events fetched by "
          "FilterLogEvents plus Insights rows, per line written; behind = the newest line printed against the "
          "clock; delay = seconds from a line reaching CloudWatch to its printing (99th percentile / max); RSS = "
          "peak, (+) over the interpreter with boto3; exit = seconds from the job's end (TrainingEndTime) to "
          "returning; past horizon = lines later than --late-horizon / counted in the end note; after exit = "
          "lines that reach CloudWatch after the command returned (no flush at the end: a host's late lines go on "
          "arriving up to 2 minutes after it stopped)")
    print("goals: lost = past horizon + after exit (nothing that arrived before the command returned is lost), dup 0, "
          "calls/s <= --rate, "
          f"fetch/line <= {FETCH_GOAL}, every past-horizon line counted; default lag: behind <= 2 polls, exit <= 15 s,"
          " RSS less the bench's tally (1 byte a line) and the fake's arrival index < 100 MB; late lags: exit <= 30 s;"
          " through botocore (the emulator's server in another process): peak RSS < 150 MB")
    for r in rows:
        if r["curve"]:
            curve = ", ".join(f"{m}m {mb:.0f}" for m, mb in r["curve"])
            print(f"resident MB by simulated minute, {row_name(r)} {r['hosts']} hosts x {r['lines_per_s']:,.0f} "
                  f"lines/s: {curve}")
        if r["arrived_unchecked"]:
            print(f"  ({row_name(r)}, {r['hosts']} hosts): {r['arrived_unchecked']} line(s) reached CloudWatch after "
                  "the end-of-job check's last window and before the command returned (lost while it finished)")
        for note in r["notes"]:
            print(f"  note ({row_name(r)}, {r['hosts']} hosts): {note}")


# -- part 1b: several jobs followed together ----------------------------------------------------------

MULTI_JOBS = int(os.environ.get("BENCH_MULTI_JOBS", "10"))
MULTI_HOSTS = int(os.environ.get("BENCH_MULTI_HOSTS", "64"))
MULTI_MINUTES = float(os.environ.get("BENCH_MULTI_MINUTES", "4"))  # simulated minutes of writing (not 8: CPU)
MULTI_RATES = [float(r) for r in os.environ.get("BENCH_MULTI_RATES", "2,5").split(",")]


class RoutedLogs:
    """One account's Logs for several synthetic jobs: each read goes to the job its prefix or query names."""

    def __init__(self, per_job: dict):
        self.per_job = per_job

    def filter_log_events(self, **params):
        return self.per_job[params["logStreamNamePrefix"].rstrip("/")].filter_log_events(**params)

    def start_query(self, **params):
        job = params["queryString"].split("like /^", 1)[1].split("\\/", 1)[0]
        return {"queryId": f"{job}:{self.per_job[job].start_query(**params)['queryId']}"}

    def get_query_results(self, queryId):  # noqa: N803
        job, query_id = queryId.split(":", 1)
        return self.per_job[job].get_query_results(queryId=query_id)


def multi_run(jobs: int, hosts: int, minutes: float, rate: float) -> dict:
    """`jobs` jobs of `hosts` hosts at PER_HOST lines/s followed together (launcher.jobs.logs.follow_many) on a
    virtual clock shared by their threads; the figures (runs in a child process)."""
    import boto3  # noqa: F401  (loaded before the baseline RSS, as in the CLI)

    from emulator.logs import SyntheticLogs
    from launcher.cli.logprint import Printer
    from launcher.jobs.logs import Polling, follow_many
    from launcher.jobs.ratelimit import RateLimiter
    from tests.emulation import ThreadedVirtualClock

    gc.collect()
    base_rss = peak_mb()
    clock = ThreadedVirtualClock(START, threads=jobs)
    names = [f"sweep-{i}" for i in range(jobs)]
    duration = minutes * 60
    per_job = {name: SyntheticLogs(name, hosts, PER_HOST, START + 5, duration, clock, seed=i)
               for i, name in enumerate(names)}

    class SageMaker:
        def describe_training_job(self, TrainingJobName):  # noqa: N803
            return FakeSageMaker(TrainingJobName, hosts, START + 5 + duration, clock).describe_training_job(
                TrainingJobName)

    counts = {name: bytearray(logs.expected()) for name, logs in per_job.items()}
    newest = dict.fromkeys(names, 0)
    behind = [0.0]
    delays = [0] * 1000  # lines by whole seconds from reaching CloudWatch to printing

    class Sink(io.TextIOBase):
        LINE = re.compile(r"^\[(sweep-\d+)/algo-(\d+)\] \S*\[smp-progress\] step=(\d+) ", re.M)

        def write(self, text):
            now = clock()
            for m in self.LINE.finditer(text):
                job, host, step = m.group(1), int(m.group(2)), int(m.group(3))
                logs = per_job[job]
                i = (host - 1) * logs.count + step
                counts[job][i] = min(255, counts[job][i] + 1)
                ts, arrived = logs.times(host, step)
                newest[job] = max(newest[job], ts)
                delays[min(int(max(0.0, now * 1000 - arrived) // 1000), len(delays) - 1)] += 1
                # how far the newest line printed of the job trails the clock (its hosts stop at its end)
                behind[0] = max(behind[0], min(now, logs.end_ms / 1000) - newest[job] / 1000)
            return len(text)

    printer = Printer(Sink(), io.StringIO(), with_job=True)
    hooks = printer.hooks()
    limiter = RateLimiter(rate, clock=clock, sleep=clock.sleep)
    results = follow_many(names, types.SimpleNamespace(logs=RoutedLogs(per_job), sagemaker=SageMaker()),
                          polling=Polling(interval=POLL_S, clock=clock, sleep=clock.sleep, rng=random.Random(0),
                                          limiter=limiter),
                          on_line=hooks["on_line"], on_note=hooks["on_note"], on_idle=hooks["on_idle"])
    elapsed = clock() - START
    rss = peak_mb()
    tallies = Counter()
    for c in counts.values():
        tallies.update(Counter(c))
    calls = sum(logs.calls for logs in per_job.values())
    query_calls = sum(logs.query_calls for logs in per_job.values())
    polls = sum(r.stats.polls for r in results)

    def delay(share: float) -> int:
        want, seen = share * sum(delays), 0
        for seconds, n in enumerate(delays):
            seen += n
            if seen >= want:
                return seconds + 1
        return len(delays)

    return {"jobs": jobs, "hosts": hosts, "minutes": minutes, "rate": rate, "lines": sum(map(len, counts.values())),
            "lost": tallies[0], "dup": sum((n - 1) * c for n, c in tallies.items() if n > 1),
            "calls": calls, "query_calls": query_calls, "calls_per_s": calls / elapsed,
            "within_rate": calls <= rate * elapsed + limiter.burst, "polls_per_job": polls / jobs,
            "poll_s": elapsed / (polls / jobs), "queries": sum(r.stats.queries for r in results),
            "fetched_per_line": sum(logs.served for logs in per_job.values()) / sum(map(len, counts.values())),
            "behind_s": behind[0], "delay_p99_s": delay(0.99), "delay_max_s": delay(1.0),
            "exit_after_end_s": clock() - (START + 5 + duration + 10),
            "status": sorted({r.status or "?" for r in results}), "rss_mb": rss, "base_rss_mb": base_rss}


def print_multi(rows: list[dict]) -> None:
    print(f"\nPart 1b: several jobs followed together (logs JOB1 JOB2 ...), {PER_HOST:g} lines/s per host, default "
          "lag, one --rate bucket for all; each run in its own process")
    head = (f"{'jobs':>4} {'hosts':>5} {'lines/s':>7} {'min':>3} {'rate':>4} {'calls/s':>7} {'of which Insights':>17} "
            f"{'poll s':>6} {'queries':>7} {'fetch/line':>10} {'lost':>5} {'dup':>4} {'behind':>6} "
            f"{'delay p99/max':>13} {'RSS MB':>6} {'(+)':>4} {'exit s':>6}  goals")
    print(head)
    print("-" * len(head))
    for r in rows:
        missed = [name for name, bad in (("lost", r["lost"]), ("dup", r["dup"]), ("rate", not r["within_rate"]),
                                         ("status", r["status"] != ["Completed"])) if bad]
        keeps_up = r["behind_s"] <= 2 * POLL_S and r["exit_after_end_s"] <= 30
        share = r["query_calls"] / r["calls"] * r["calls_per_s"]
        grew = r["rss_mb"] - r["base_rss_mb"]
        print(f"{r['jobs']:>4} {r['hosts']:>5} {r['jobs'] * r['hosts'] * PER_HOST:>7,.0f} {r['minutes']:>3g} "
              f"{r['rate']:>4g} {r['calls_per_s']:>7.2f} {share:>17.2f} {r['poll_s']:>6.1f} {r['queries']:>7} "
              f"{r['fetched_per_line']:>10.2f} {r['lost']:>5} {r['dup']:>4} {r['behind_s']:>6.1f} "
              f"{r['delay_p99_s']:>6}/{r['delay_max_s']:<6} {r['rss_mb']:>6.0f} {grew:>+4.0f} "
              f"{r['exit_after_end_s']:>6.1f}  {'met' if not missed else 'MISSED ' + ','.join(missed)}"
              f"{'' if keeps_up else ' (falls behind: the calls needed exceed --rate)'}")
    print("each job reads its own prefix every poll (one FilterLogEvents, a page more per ~6,000 lines) and asks Logs "
          "Insights for its late lines (a query and its results, every 30 s, every poll while late lines flow): the "
          "calls grow with the number of jobs. Past --rate x interval the shared bucket spaces every job's polls out "
          "(poll s): printing falls behind, nothing is lost. behind = the newest line printed of a job against the "
          "clock; delay = seconds from a line reaching CloudWatch to its printing; exit = seconds from the jobs' end "
          "to returning. goals: lost 0, dup 0, calls within --rate (the bucket's: rate x elapsed + its burst); "
          "keeping up (behind <= 2 polls, exit <= 30 s) needs --rate above the calls the jobs need")


# -- part 2: through a moto server, against the SDK ------------------------------------------------

class VirtualTime(types.ModuleType):
    """`time` as the SDK and botocore's retry loop see it: virtual now and sleep, the rest real."""

    def __init__(self, clock: VirtualClock):
        super().__init__("time")
        self._clock = clock

    def __getattr__(self, name):
        return getattr(time, name)

    def time(self) -> float:
        return self._clock()

    def sleep(self, seconds: float) -> None:
        self._clock.sleep(seconds)


class Aborted(Exception):
    pass


def scenario(hosts: int):
    from emulator import EmulatedJob, LagModel

    return EmulatedJob(f"bench-{hosts}", hosts=hosts, starting=20, downloading=10, training=SERVER_TRAINING_S,
                       uploading=10, line_interval=1 / PER_HOST, late_hosts={h: 7.0 for h in range(8, hosts + 1, 8)},
                       lag=LagModel(), decoy=True, seed=hosts)


def start_job(endpoint: str, hosts: int, clock: VirtualClock):
    import boto3

    import emulator

    emulator.reset_server(endpoint)
    clock.t = START
    sm = boto3.client("sagemaker", endpoint_url=endpoint, region_name="us-west-2")
    return emulator.add_job(scenario(hosts), sm)


def tally(expected: list[str], printed: list[str]) -> tuple[int, int]:
    wanted = set(expected)
    want, got = Counter(expected), Counter(m for m in printed if m in wanted)
    return sum((want - got).values()), sum(n - 1 for n in got.values() if n > 1)


def run_ours(endpoint: str, hosts: int, clock: VirtualClock, budget: float) -> dict:
    import emulator
    from launcher.cli.logprint import Printer
    from launcher.core.aws import Clients
    from launcher.jobs.logs import Polling, follow
    from launcher.jobs.ratelimit import RateLimiter

    job = start_job(endpoint, hosts, clock)
    clients = Clients(region="us-west-2")
    policy = emulator.attach(clients.logs, emulator.Throttle(0.0, seed=hosts))
    clients.sagemaker  # noqa: B018  (clients are made before the clock starts, as for the SDK)
    out = io.StringIO()
    gc.collect()
    cpu = time.thread_time()
    printer = Printer(out, io.StringIO(), color=False)
    result = follow(job.name, clients, polling=Polling(interval=POLL_S, clock=clock, sleep=clock.sleep,
                                                       rng=random.Random(0),
                                                       limiter=RateLimiter(2.0, clock=clock, sleep=clock.sleep)),
                    **printer.hooks())
    printer.finish(result)
    cpu = time.thread_time() - cpu
    printed = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    lost, dup = tally(job.expected_messages(), printed)
    return {"tool": "smp-launch", "finished": result.status == "Completed", "polls": result.stats.polls,
            # the emulator's throttle policy counts FilterLogEvents only; the reader counts Insights calls too
            "requests": max(policy.calls, result.stats.calls) + result.stats.query_calls, "lines": len(printed),
            "lost": lost, "dup": dup, "late": result.stats.late,
            "fetched": result.stats.fetched - result.stats.foreign, "cpu": cpu,
            "expected": len(job.expected_messages()), "decoy": sum("decoy" in m for m in printed),
            "exit_s": clock() - job.end_time()}


def run_sdk(endpoint: str, hosts: int, clock: VirtualClock, budget: float) -> dict:
    import boto3
    import sagemaker.session as sdk_session

    import emulator

    job = start_job(endpoint, hosts, clock)
    boto_session = boto3.Session(region_name="us-west-2")
    policy = emulator.attach(boto_session, emulator.Throttle(0.0, seed=hosts))
    abort = threading.Event()

    def stop_when_asked(**_kw):
        if abort.is_set():
            raise Aborted()

    boto_session.events.register("before-call", stop_when_asked)
    session = sdk_session.Session(boto_session=boto_session, sagemaker_config={})
    boto_session.client("logs")  # loads the Logs model into the session's cache before the clock starts
    flushes = [0]
    original_flush = sdk_session._flush_log_streams

    def counting_flush(*args, **kwargs):
        flushes[0] += 1
        return original_flush(*args, **kwargs)

    sdk_session._flush_log_streams = counting_flush
    out = io.StringIO()
    box: dict = {}

    def target():
        cpu = time.thread_time()
        try:
            with contextlib.redirect_stdout(out):
                session.logs_for_job(job.name, wait=True, poll=POLL_S)
            box["finished"] = True
        except Aborted:
            box["finished"] = False
        finally:
            box["cpu"] = time.thread_time() - cpu

    gc.collect()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(budget)
    if thread.is_alive():
        abort.set()
        thread.join(60)
    sdk_session._flush_log_streams = original_flush
    expected = job.expected_messages()
    printed = [line for line in out.getvalue().splitlines() if line in set(expected) or "decoy" in line]
    lost, dup = tally(expected, printed)
    return {"tool": "SDK logs_for_job", "finished": box.get("finished", False), "polls": flushes[0],
            "requests": policy.calls, "lines": len(printed), "lost": lost, "dup": dup, "late": None, "fetched": None,
            "cpu": box.get("cpu", 0.0), "expected": len(expected), "decoy": sum("decoy" in m for m in printed),
            "exit_s": clock() - job.end_time(), "budget": budget}


def server_rows() -> list[dict]:
    logging.disable(logging.WARNING)  # the SDK logs its config look-ups at import
    import botocore.endpoint
    import sagemaker.session as sdk_session

    import emulator

    clock = VirtualClock(START)
    emulator.set_clock(clock)
    virtual = VirtualTime(clock)
    sdk_session.time = virtual  # the SDK's poll sleeps and its 30 s describe timer
    botocore.endpoint.time = virtual  # botocore's retry backoff sleeps
    rows = []
    with emulator.server() as endpoint:
        os.environ.update(emulator.server_env(endpoint))
        for hosts in SERVER_HOSTS:
            t0 = time.perf_counter()
            ours = run_ours(endpoint, hosts, clock, 0)
            ours.update(hosts=hosts, wall=time.perf_counter() - t0)
            budget = max(10.0, SDK_FACTOR * ours["wall"])
            t0 = time.perf_counter()
            sdk = run_sdk(endpoint, hosts, clock, budget)
            sdk.update(hosts=hosts, wall=time.perf_counter() - t0)
            rows += [ours, sdk]
            print(f"  moto server, {hosts} hosts: ours {ours['wall']:.1f}s wall, SDK "
                  f"{'finished' if sdk['finished'] else 'did not finish'} ({sdk['wall']:.1f}s of {budget:.0f}s)",
                  file=sys.stderr)
    return rows


def print_server(rows: list[dict]) -> None:
    print(f"\nPart 2: through a moto server (HTTP), {PER_HOST:g} lines/s per host for {SERVER_TRAINING_S:g} s of "
          "training, every 8th host 7 s late, long-tailed lag, a decoy job sharing the prefix; --rate 2")
    head = (f"{'tool':17} {'hosts':>5} {'polls':>5} {'calls/poll':>10} {'fetch/line':>10} {'lines':>7} {'lost':>5} "
            f"{'dup':>4} {'late':>5} {'decoy':>5} {'CPU s/100k':>10} {'exit s':>6}")
    print(head)
    print("-" * len(head))
    for r in rows:
        if not r["finished"]:
            print(f"{r['tool']:17} {r['hosts']:>5}  did not finish within {r['budget']:.0f} s wall "
                  f"({SDK_FACTOR:g}x ours, at least 10 s)")
            continue
        per_poll = r["requests"] / r["polls"] if r["polls"] else float("nan")
        fetch = f"{r['fetched'] / r['expected']:.2f}" if r["fetched"] is not None else "-"
        late = "-" if r["late"] is None else r["late"]
        cpu = f"{r['cpu'] / r['lines'] * 100_000:.2f}" if r["lines"] else "-"
        print(f"{r['tool']:17} {r['hosts']:>5} {r['polls']:>5} {per_poll:>10.2f} {fetch:>10} {r['lines']:>7} "
              f"{r['lost']:>5} {r['dup']:>4} {late:>5} {r['decoy']:>5} {cpu:>10} {r['exit_s']:>6.1f}")


def main() -> None:
    if sys.argv[1:2] == ["--volume"]:
        print(json.dumps(volume_run(json.loads(sys.argv[2]))))
        return
    if sys.argv[1:2] == ["--multi"]:
        print(json.dumps(multi_run(*json.loads(sys.argv[2]))))
        return
    rows = []
    plans = [(h, PER_HOST, VOLUME_MINUTES, 2.0, {}) for h in HOSTS]
    plans.append((256, HIGH_RATE / 256, HIGH_MINUTES, HIGH_RATE_BUDGET, {}))
    plans += LATE_PLANS
    only = os.environ.get("BENCH_SCENARIOS")  # e.g. half-late,past-horizon: only those rows
    for hosts, per_host, minutes, rate, more in [] if os.environ.get("BENCH_SKIP_VOLUME") else plans:
        if only and more.get("lag", "default") not in only.split(","):
            continue
        t0 = time.perf_counter()
        rows.append(run_volume_child(hosts, per_host, minutes, rate, **more))
        print(f"  volume: {more or 'default'} {hosts} hosts x {per_host:g} lines/s, {minutes:g} min in "
              f"{time.perf_counter() - t0:.1f}s wall", file=sys.stderr)
    if rows:
        print_volume(rows)
    if not os.environ.get("BENCH_SKIP_MULTI"):
        print_multi([run_multi_child(MULTI_JOBS, MULTI_HOSTS, MULTI_MINUTES, rate) for rate in MULTI_RATES])
    if os.environ.get("BENCH_SKIP_SERVER"):
        return
    print_server(server_rows())


if __name__ == "__main__":
    main()
