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

Part 2, through a moto server in this process (HTTP, botocore, the emulator's paging and lag): the
same tool against the SDK's `logs_for_job`, on the same scripted jobs. The SDK gets a wall-clock
budget scaled to the work (BENCH_SDK_FACTOR, 2, x our wall time, at least 10 s); where it does not
finish (it loops forever above 50 streams) its row says "did not finish" and nothing else. Hosts
1, 8 and 64 by default (BENCH_SERVER_HOSTS=1,8,64,256 adds the slowest, several minutes).

Goals: nothing lost or duplicated; printing within two polls of real time; under 100 MB for an hour at
10,000 lines/s (BENCH_LOGS_HOUR=1 runs the full hour; the default runs 6 minutes, past the 5-minute
horizon that bounds memory); calls within --rate; exit within 15 s of the job's end; each event fetched
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
                            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MB, "
                            f"behind {self.behind:.1f} s, lines {len(self.counts) - self.counts.count(0)}\n")
        for m in self.LINE.finditer(text):
            host, step = int(m.group(1)), int(m.group(2))
            i = (host - 1) * self.logs.count + step
            self.counts[i] = min(255, self.counts[i] + 1)
            self.newest = max(self.newest, self.logs.times(host, step)[0])
        if self.newest and not self.final:  # how far the newest line printed so far trails the clock
            now = min(self.clock(), self.logs.end_ms / 1000)  # once the hosts stop there is nothing newer
            self.behind = max(self.behind, now - self.newest / 1000)
        self.cpu += time.process_time() - cpu


def volume_run(hosts: int, per_host: float, minutes: float, rate: float) -> dict:
    """One synthetic job followed to its end; returns the figures (runs in a child process)."""
    import boto3  # noqa: F401  (loaded before the baseline RSS, as in the CLI)

    from emulator.logs import SyntheticLogs
    from launcher.cli.logprint import Printer
    from launcher.jobs.logs import Polling, follow
    from launcher.jobs.ratelimit import RateLimiter

    gc.collect()
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    clock = VirtualClock(START)
    duration = minutes * 60
    logs = SyntheticLogs("vol", hosts, per_host, START + 5, duration, clock, seed=hosts)
    clients = types.SimpleNamespace(logs=logs, sagemaker=FakeSageMaker("vol", hosts, START + 5 + duration, clock))
    sink = CountingSink(logs, clock)
    err = io.StringIO()
    import launcher.jobs.reader as reader

    original_finish = reader.LogReader.finish_pages

    def finish_pages(self):
        sink.flush()
        sink.final = True  # lines the end-of-job check prints are not "behind" real time
        yield from original_finish(self)

    reader.LogReader.finish_pages = finish_pages
    cpu = time.process_time()
    printer = Printer(sink, err, color=False)
    result = follow("vol", clients, polling=Polling(interval=POLL_S, clock=clock, sleep=clock.sleep,
                                                    rng=random.Random(0),
                                                    limiter=RateLimiter(rate, clock=clock, sleep=clock.sleep)),
                    **printer.hooks())
    printer.finish(result)
    cpu = time.process_time() - cpu - sink.cpu - logs.cpu  # the tailer's own: not the fake service's, not ours
    lines = logs.expected()
    counts = Counter(sink.counts)
    stats = result.stats
    elapsed = clock() - START
    return {"hosts": hosts, "lines_per_s": hosts * per_host, "minutes": minutes, "rate": rate,
            "status": result.status, "lines": lines, "polls": stats.polls, "calls": logs.calls,
            "calls_per_poll": logs.calls / stats.polls, "calls_per_s": logs.calls / elapsed,
            "fetched_per_line": logs.served / lines, "lost": counts[0],
            "dup": sum((n - 1) * c for n, c in counts.items() if n > 1), "late": stats.late,
            "behind_s": sink.behind, "ids_held": stats.max_seen, "skipped_s": stats.skipped_s,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "base_rss_mb": base_rss,
            "cpu_per_100k": cpu / lines * 100_000, "exit_after_end_s": clock() - (START + 5 + duration + 10),
            "tally_mb": len(sink.counts) / 2**20, "query_calls": logs.query_calls, "rows": logs.rows_served,
            "late_check": stats.late_check,
            "curve": sink.curve,
            "notes": [line for line in err.getvalue().splitlines()
                      if "once more" in line or "behind" in line or "could not finish" in line][:2]}


def run_volume_child(hosts: int, per_host: float, minutes: float, rate: float) -> dict:
    cmd = [sys.executable, __file__, "--volume", str(hosts), str(per_host), str(minutes), str(rate)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"volume run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_volume(rows: list[dict]) -> None:
    print(f"Part 1: the tailer alone, poll {POLL_S:g} s, CloudWatch paging (10,000 events or 1 MB), long-tailed "
          "ingestion lag; each run in its own process")
    head = (f"{'hosts':>5} {'lines/s':>7} {'min':>4} {'--rate':>6} {'calls/poll':>10} {'calls/s':>7} "
            f"{'queries':>7} {'fetch/line':>10} {'lost':>5} {'dup':>4} {'late':>5} {'behind s':>8} {'RSS MB':>7} "
            f"{'(+)':>5} {'tally':>5} {'CPU s/100k':>10} {'exit s':>6}  goals")
    print(head)
    print("-" * len(head))
    for r in rows:
        grew = r["rss_mb"] - r["base_rss_mb"]
        ok = (r["lost"] == 0 and r["dup"] == 0 and r["behind_s"] <= 2 * POLL_S and r["calls_per_s"] <= r["rate"]
              and r["exit_after_end_s"] <= 15 and r["rss_mb"] - r.get("tally_mb", 0) < 100
              and r["status"] == "Completed"
              and r["fetched_per_line"] <= FETCH_GOAL)
        print(f"{r['hosts']:>5} {r['lines_per_s']:>7,.0f} {r['minutes']:>4g} {r['rate']:>6g} "
              f"{r['calls_per_poll']:>10.2f} {r['calls_per_s']:>7.2f} {r['query_calls'] // 2:>7} "
              f"{r['fetched_per_line']:>10.2f} {r['lost']:>5} {r['dup']:>4} {r['late']:>5} "
              f"{r['behind_s']:>8.1f} {r['rss_mb']:>7.0f} {grew:>+5.0f} {r.get('tally_mb', 0):>5.0f} "
              f"{r['cpu_per_100k']:>10.2f} "
              f"{r['exit_after_end_s']:>6.1f}  {'met' if ok else 'MISSED'}")
    print(f"goals: fetch/line <= {FETCH_GOAL} (events fetched by FilterLogEvents plus Logs Insights rows, per line "
          "written), lost 0, dup 0, behind <= 2 polls, calls/s <= --rate (Insights calls included), RSS less the "
          "bench's own tally (1 byte a line, to count lost and duplicated lines) < 100 MB, exit <= 15 s after the end")
    for r in rows:
        if r["curve"]:
            curve = ", ".join(f"{m}m {mb:.0f}" for m, mb in r["curve"])
            print(f"resident MB by simulated minute, {r['hosts']} hosts x {r['lines_per_s']:,.0f} lines/s: {curve}")
        for note in r["notes"]:
            print(f"  note ({r['hosts']} hosts): {note}")


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
        hosts, per_host, minutes, rate = sys.argv[2:6]
        print(json.dumps(volume_run(int(hosts), float(per_host), float(minutes), float(rate))))
        return
    rows = []
    plans = [(h, PER_HOST, VOLUME_MINUTES, 2.0) for h in HOSTS]
    plans.append((256, HIGH_RATE / 256, HIGH_MINUTES, HIGH_RATE_BUDGET))
    for hosts, per_host, minutes, rate in [] if os.environ.get("BENCH_SKIP_VOLUME") else plans:
        t0 = time.perf_counter()
        rows.append(run_volume_child(hosts, per_host, minutes, rate))
        print(f"  volume: {hosts} hosts x {per_host:g} lines/s, {minutes:g} min in "
              f"{time.perf_counter() - t0:.1f}s wall", file=sys.stderr)
    if rows:
        print_volume(rows)
    if os.environ.get("BENCH_SKIP_SERVER"):
        return
    print_server(server_rows())


if __name__ == "__main__":
    main()
