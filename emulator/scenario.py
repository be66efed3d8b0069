"""What an emulated training job does over time: its phases, its outcome, and its hosts' log lines.

Everything is a pure function of the emulator clock, so a poll sees the same job whether it runs
in-process or through the server, and a test that drives the clock gets the same run every time.
"""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Any

from emulator import core
from launcher.render import progress

PHASES = ("Starting", "Downloading", "Training", "Uploading")
MESSAGES = {
    "Starting": "Preparing the instances for training",
    "Downloading": "Downloading input data",
    "Training": "Training image download completed. Training in progress.",
    "Uploading": "Uploading generated training model",
    "Stopping": "Stopping the training job",
    "Completed": "Training job completed",
    "Failed": "Training job failed",
    "Stopped": "The training job was stopped",
    # The descriptions of these secondary statuses in DescribeTrainingJob's reference
    # (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingJob.html).
    "Interrupted": "The job stopped because the managed spot training instances were interrupted.",
    "MaxWaitTimeExceeded": "The job stopped because it exceeded the maximum allowed wait time.",
}
# Terminal secondary statuses and the TrainingJobStatus each belongs to.
TERMINAL = {"Completed": "Completed", "Failed": "Failed", "Stopped": "Stopped", "MaxWaitTimeExceeded": "Stopped",
            "MaxRuntimeExceeded": "Stopped"}
DEFAULT_FAILURE = ("AlgorithmError: ExecuteUserScriptError: ExitCode 1 ErrorMessage \"RuntimeError: CUDA out "
                   "of memory. Tried to allocate 2.00 GiB\" Command \"torchrun --nnodes 2 train.py\"")


_MASK = (1 << 64) - 1


def unit(*keys: int) -> float:
    """A uniform number in [0, 1) that is a pure function of `keys` (splitmix64): fast and repeatable."""
    x = 0
    for k in keys:
        x = (x ^ (k & _MASK)) + 0x9E3779B97F4A7C15 & _MASK
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
        x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK
        x ^= x >> 31
    return x / 2.0 ** 64


_STANDARD_NORMAL = statistics.NormalDist()


@dataclass(frozen=True)
class LagModel:
    """How long after its own timestamp a line reaches CloudWatch: mostly well under 2 s, a long tail.

    The body is log-normal around `median` seconds; a `tail` fraction of lines is instead late by a
    log-uniform amount between `tail_min` and `tail_max` seconds (an agent that buffered, a retry).
    """

    median: float = 0.4
    sigma: float = 0.8
    tail: float = 0.01
    tail_min: float = 2.0
    tail_max: float = 120.0

    def sample(self, u: float, v: float) -> float:
        if u < self.tail:
            return self.tail_min * (self.tail_max / self.tail_min) ** v
        z = _STANDARD_NORMAL.inv_cdf(min(max(v, 1e-12), 1.0 - 1e-12))
        return self.median * math.exp(self.sigma * z)


@dataclass
class EmulatedJob:
    """A job's script. Durations are emulator-clock seconds; hosts are numbered from 1 like algo-N."""

    name: str
    hosts: int = 2
    instance_type: str = "ml.p4d.24xlarge"
    starting: float = 2.0
    downloading: float = 1.0
    training: float = 8.0
    uploading: float = 1.0
    stopping: float = 1.0
    # Completed | Failed | MaxWaitTimeExceeded (spot); Stopped comes from StopTrainingJob or stop_after
    outcome: str = "Completed"
    failure_reason: str = DEFAULT_FAILURE
    fail_in: str = "Training"  # the phase a Failed job fails in: Starting (no instances: nothing logged) or Training
    last_lines: tuple[str, ...] | None = None  # what algo-1 writes last when it fails (None: a CUDA OOM line)
    messages: dict[str, str] = field(default_factory=dict)  # status messages in place of MESSAGES
    interruptions: int = 0  # managed spot: times the instances are taken back during Training
    interrupt_after: float = 3.0  # seconds of Training before each interruption
    interrupted_for: float = 1.0  # seconds in Interrupted before Starting again
    checkpoint_after: float | None = None  # seconds into Training when the job saves a checkpoint (synced to S3)
    checkpoint_step: int = 10
    # The speed algo-1's progress lines report (tokens per second, all GPUs): None logs 15,000-15,500 at random.
    # Given, the first `warmup_lines` progress lines report a third of it (the first steps compile and
    # allocate) and the line after the checkpoint half of it, as a real job's do.
    tokens_per_s: float | None = None
    warmup_lines: int = 0
    stop_after: float | None = None  # seconds after creation at which a stop request arrives
    line_interval: float = 1.0  # seconds between lines on each host while training
    late_hosts: dict[int, float] = field(default_factory=dict)  # host -> seconds before its first line
    backdate_every: int = 0  # every k-th line of a host is ingested `backdate_seconds` late
    backdate_seconds: float = 3.0
    ingest_lag: float = 0.0  # every line reaches CloudWatch this long after its timestamp, at least
    lag: LagModel | None = None  # plus a long-tailed random lag per line (None: none)
    late_lines: dict[tuple[int, int], float] = field(default_factory=dict)  # (host, i) -> extra seconds late
    decoy: bool = True  # a second job named `<name>-decoy` logs into the same group
    metric_interval: float = 60.0
    region: str = "us-west-2"
    seed: int = 0
    created: float | None = None  # set when CreateTrainingJob runs
    stop_requested: float | None = None
    cursor: dict[str, Any] = field(default_factory=dict, repr=False)  # what is written already
    checkpoint_uri: str | None = None  # CheckpointConfig.S3Uri, set when CreateTrainingJob runs
    restored: tuple[str, ...] = ()  # the checkpoint objects under checkpoint_uri when the job was created
    saved: tuple[str, ...] = ()  # the checkpoint objects this job wrote

    # -- the timeline -------------------------------------------------------------------------
    def phase_starts(self) -> list[tuple[str, float]]:
        """(status, start) for every secondary status the job will pass through, terminal last."""
        assert self.created is not None, "the job has not been created yet"
        t = self.created
        durations = {"Starting": self.starting, "Downloading": self.downloading, "Training": self.training,
                     "Uploading": self.uploading}
        plan: list[tuple[str, float]] = []
        for _ in range(self.interruptions):  # managed spot: a partial run, then back to Starting
            plan += [("Starting", self.starting), ("Downloading", self.downloading),
                     ("Training", self.interrupt_after), ("Interrupted", self.interrupted_for)]
        if self.outcome == "MaxWaitTimeExceeded":
            plan += [("Stopping", self.stopping)]
        else:
            for phase in PHASES:
                if self.outcome == "Failed" and PHASES.index(phase) > PHASES.index(self.fail_in):
                    break
                plan.append((phase, durations[phase]))
        out = []
        stop_at = self.stop_time()
        for phase, length in plan:
            if out and stop_at is not None and t >= stop_at:
                break
            out.append((phase, t))
            t += length
        if stop_at is not None and stop_at < t:
            out += [("Stopping", stop_at), ("Stopped", stop_at + self.stopping)]
        else:
            out.append((self.outcome, t))
        return out

    def stop_time(self) -> float | None:
        auto = None if self.stop_after is None else self.created + self.stop_after
        times = [t for t in (auto, self.stop_requested) if t is not None]
        return min(times) if times else None

    def end_time(self) -> float:
        return self.phase_starts()[-1][1]

    def training_window(self) -> tuple[float, float] | None:
        """When the container runs (and logs): the Training phase, cut short by a stop; after spot
        interruptions, from the first Training to the end of the last one."""
        starts = self.phase_starts()
        names = [s for s, _ in starts]
        if "Training" not in names:
            return None
        first = names.index("Training")
        last = len(names) - 1 - names[::-1].index("Training")
        return starts[first][1], starts[last + 1][1]

    def checkpoint_time(self) -> float | None:
        """When the checkpoint is saved (and synced to S3): `checkpoint_after` into the first Training."""
        window = self.training_window()
        if self.checkpoint_after is None or window is None:
            return None
        at = window[0] + self.checkpoint_after
        return at if at < window[1] else None

    def state(self, at: float) -> dict[str, Any]:
        """DescribeTrainingJob's time-dependent fields at emulator time `at` (a time before the job was created,
        which a test that moves the clock back can ask for, reads as the moment it was created)."""
        phases = self.phase_starts()
        starts = [(s, t) for s, t in phases if t <= at] or phases[:1]
        secondary = starts[-1][0]
        terminal = secondary in TERMINAL
        status = TERMINAL[secondary] if terminal else ("Stopping" if secondary == "Stopping" else "InProgress")
        transitions = []
        for i, (s, t) in enumerate(starts):
            entry = {"Status": s, "StartTime": core.moto_time(t),
                     "StatusMessage": self.messages.get(s, MESSAGES.get(s, ""))}
            if i + 1 < len(starts):
                entry["EndTime"] = core.moto_time(starts[i + 1][1])
            elif terminal:
                entry["EndTime"] = core.moto_time(t)
            transitions.append(entry)
        state: dict[str, Any] = {"training_job_status": status, "secondary_status": secondary,
                                 "secondary_status_transitions": transitions,
                                 "last_modified_time": core.moto_time(starts[-1][1])}
        begun = [t for s, t in starts if s == "Downloading"]
        state["training_start_time"] = core.moto_time(begun[0]) if begun else None
        state["training_end_time"] = core.moto_time(starts[-1][1]) if terminal else None
        if terminal and begun:
            seconds = max(1, round(starts[-1][1] - begun[0]))
            state["training_time_in_seconds"] = seconds
            state["billable_time_in_seconds"] = seconds
        state["failure_reason"] = self.failure_reason if secondary == "Failed" else None
        return state

    # -- the logs -----------------------------------------------------------------------------
    def streams(self) -> dict[int, str]:
        """Host -> log stream name; the epoch suffix is when the host first writes."""
        window = self.training_window()
        if window is None:
            return {}
        return {h: f"{self.name}/algo-{h}-{int(window[0] + self.late_hosts.get(h, 0.0))}"
                for h in range(1, self.hosts + 1)}

    def line(self, host: int, i: int, last: bool) -> str:
        """The i-th line host `host` writes: an SMP progress line, unique per (host, i)."""
        tag = f"[1,mpirank:{(host - 1) * 8},algo-{host}]"
        if i == 0:
            return f"{tag}<stdout>:SMP v2 worker up on algo-{host} with 8 GPUs ({self.instance_type})"
        if self.outcome == "Failed" and host == 1 and self.last_lines:
            from_end = self.line_count(host) - 1 - i
            if from_end < len(self.last_lines):
                return f"{tag}<stderr>:{self.last_lines[len(self.last_lines) - 1 - from_end]}"
        if last and self.outcome == "Failed" and host == 1:
            return f"{tag}<stderr>:RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (step {i})"
        if i == 1 and host == 1 and self.restored:
            return f"{tag}<stdout>:resuming from checkpoint {self.restored[0].split('/')[0]}"
        if host == 1 and self.checkpoint_after is not None and i == max(1, round(self.checkpoint_after /
                                                                                  self.line_interval)):
            return (f"{tag}<stdout>:checkpoint of step {self.checkpoint_step} saved to "
                    f"/opt/ml/checkpoints/step_{self.checkpoint_step:08d}")  # the entry script's words
        rng = random.Random(self.seed * 1_000_003 + host * 10_007 + i)
        speed = 15000 + rng.random() * 500 if self.tokens_per_s is None else self._scripted_speed(i)
        text = progress.LINE_FORMAT.format(step=i, loss=8.0 / (1 + 0.05 * i) + rng.random() * 0.05, lr=3e-4,
                                           tokens_per_s=speed, tflops_per_gpu=150.0, gpu_mem_gb=31.5)
        return f"{tag}<stdout>:{text}"

    def _scripted_speed(self, i: int) -> float:
        assert self.tokens_per_s is not None
        if i <= self.warmup_lines + (1 if self.restored else 0):
            return self.tokens_per_s / 3
        if self.checkpoint_after is not None and i == max(1, round(self.checkpoint_after / self.line_interval)) + 1:
            return self.tokens_per_s / 2
        return self.tokens_per_s

    def line_count(self, host: int, window: tuple[float, float] | None = None) -> int:
        """How many lines host `host` writes over the whole run (a stop cuts the run short)."""
        window = window or self.training_window()
        if window is None:
            return 0
        begin = window[0] + self.late_hosts.get(host, 0.0)
        return max(0, math.ceil((window[1] - begin) / self.line_interval))

    def line_times(self, host: int, i: int, window: tuple[float, float] | None = None) -> tuple[float, float]:
        """(timestamp, visible-at) of host `host`'s i-th line: some lines become visible late.

        Whatever a host still holds when its container exits reaches CloudWatch then (its log agent
        flushes), so nothing arrives later than the end of training plus `ingest_lag`.
        """
        window = window or self.training_window()
        ts = window[0] + self.late_hosts.get(host, 0.0) + i * self.line_interval
        lag = self.ingest_lag
        if self.backdate_every and i % self.backdate_every == self.backdate_every - 1:
            lag += self.backdate_seconds
        if self.lag is not None:
            lag += self.lag.sample(unit(self.seed, host, i, 1), unit(self.seed, host, i, 2))
        lag += self.late_lines.get((host, i), 0.0)
        return ts, max(ts + self.ingest_lag, min(ts + lag, window[1] + self.ingest_lag))

    def expected_messages(self) -> list[str]:
        """Every line the job's own hosts write (the decoy excluded): the benchmark's ground truth."""
        out = []
        for h in range(1, self.hosts + 1):
            n = self.line_count(h)
            out += [self.line(h, i, i == n - 1) for i in range(n)]
        return out


_JOBS: dict[str, EmulatedJob] = {}
_DEFAULT: dict[str, Any] | None = {}
_ATTEMPTS: dict[str, list[dict[str, Any]]] = {}


def expect_attempts(prefix: str, attempts: list[dict[str, Any]]) -> None:
    """Script the next jobs whose names start with `prefix`, in the order they are created: the n-th gets the
    n-th settings (EmulatedJob fields). For names a test cannot know in advance (timestamped, retried)."""
    with core.lock():
        _ATTEMPTS[prefix] = [dict(a) for a in attempts]


def expect(job: EmulatedJob) -> EmulatedJob:
    """Script the job that a later CreateTrainingJob of `job.name` starts (by any client)."""
    with core.lock():
        _JOBS[job.name] = job
    return job


def set_default(settings: dict[str, Any] | None) -> None:
    """How jobs created without a script behave (EmulatedJob fields); None keeps moto's instant Completed."""
    global _DEFAULT
    _DEFAULT = None if settings is None else dict(settings)


def on_create(name: str, instance_type: str, instance_count: int, region: str) -> EmulatedJob | None:
    """Called by the patched CreateTrainingJob: start the scripted (or default) job's clock."""
    with core.lock():
        job = _JOBS.get(name)
        queue = next((q for prefix, q in _ATTEMPTS.items() if name.startswith(prefix) and q), None)
        if job is None and queue:
            job = _JOBS[name] = EmulatedJob(name=name, hosts=instance_count, instance_type=instance_type,
                                            **queue.pop(0))
        if job is None:
            if _DEFAULT is None:
                return None
            job = _JOBS[name] = EmulatedJob(name=name, hosts=instance_count, instance_type=instance_type,
                                            **_DEFAULT)
        job.region = region
        job.created = core.now()
        job.stop_requested = None
        job.cursor.clear()
        return job


def get(name: str) -> EmulatedJob | None:
    return _JOBS.get(name)


def created_jobs(region: str) -> list[EmulatedJob]:
    return [j for j in list(_JOBS.values()) if j.created is not None and j.region == region]


def forget_all() -> None:
    """Drop every scripted job (moto's own state is reset separately)."""
    with core.lock():
        _JOBS.clear()
        _ATTEMPTS.clear()
        core.forget_registered()
