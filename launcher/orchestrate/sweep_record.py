"""What a sweep started, kept on this machine until every plan of it has started, so that running the same sweep
again after it was cut short (Ctrl-C, a closed terminal, a killed CI job, a submit that failed) starts only the
plans it had not started yet.

A sweep is known by its plans: each one's position in the expansion, spec hash (the resolved spec and the team
templates' contents) and region. Its records lie under the state folder
($XDG_STATE_HOME/smp-launch/sweeps/<sweep id>/, launcher.core.state), one per run: `<run>.json`, rewritten (whole,
atomically) each time a job starts, and `<run>.lock`, which the running process holds locked (flock) from start to
end. A record whose lock nobody holds is a run that ended without starting every plan; the next run of the same
sweep takes its jobs as started (unless told not to) and removes it. A record whose lock is held is a run still
going (two terminals started the same sweep): it is left alone, and each run starts its own plans. A run that
started every plan removes its record.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from launcher.core.names import JOB_NAME
from launcher.core.state import state_dir

if TYPE_CHECKING:
    from launcher.plan.build import Plan

MAX_RECORD_BYTES = 1 << 20  # 256 plans of 63-character names are about 20 KB
_FOLDER = "sweeps"

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no liveness check, every record is an ended run's
    fcntl = None  # type: ignore[assignment]


def sweep_id(plans: Sequence[tuple[int, Plan]]) -> str:
    """The sweep's identity: its plans' positions, spec hashes and regions."""
    key = json.dumps(sorted((i, p.spec_hash, p.region or "") for i, p in plans))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class SweepRecord:
    """This run's record of a sweep: `earlier` (position -> job name) are the plans an earlier run of the same
    sweep started and did not see through; `started` is called for each job this run starts; `close` ends it."""

    def __init__(self, folder: Path | None, earlier: Mapping[int, str], total: int, when: float | None) -> None:
        self.folder = folder
        self.earlier = dict(earlier)
        self.earlier_at = when  # when the earliest run taken over last wrote its record (epoch seconds)
        self.total = total
        self._started: dict[int, str] = dict(earlier)
        self._run = uuid.uuid4().hex
        self._lock: IO[str] | None = None
        self.problem: str | None = None  # why nothing can be kept (a state folder that cannot be written)

    @property
    def path(self) -> Path | None:
        return self.folder / f"{self._run}.json" if self.folder else None

    def _open(self) -> None:
        assert self.folder is not None
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.folder / f"{self._run}.lock", "w", encoding="ascii")  # noqa: SIM115 - held till close
        if fcntl is not None:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX)
        self._write()

    def started(self, index: int, job_name: str) -> None:
        """Keep `job_name` as the job started for plan `index` (a state folder that cannot be written is noted in
        `problem`, never raised: the job is running either way)."""
        self._started.setdefault(index, job_name)
        self._write()

    def _write(self) -> None:
        if self.folder is None or self.problem:
            return
        data = json.dumps({"plans": self.total, "started": {str(i): n for i, n in sorted(self._started.items())},
                           "updated": time.time()})
        try:
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".rec-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data)
            os.replace(tmp, self.folder / f"{self._run}.json")
        except OSError as exc:
            self.problem = f"{self.folder}: {exc.strerror or type(exc).__name__}"

    def close(self, finished: bool) -> None:
        """End the run: its record is removed when every plan started (`finished`), kept otherwise for the next run;
        its lock is released either way."""
        if self.folder is not None and finished:
            for name in (f"{self._run}.json", f"{self._run}.lock"):
                with contextlib.suppress(OSError):
                    os.unlink(self.folder / name)
        if self._lock is not None:
            with contextlib.suppress(OSError):
                self._lock.close()  # closing releases the flock
            self._lock = None
        if self.folder is not None and not finished:
            with contextlib.suppress(OSError):
                os.unlink(self.folder / f"{self._run}.lock")


def open_record(plans: Sequence[tuple[int, Plan]], *, resume: bool = True,
                env: Mapping[str, str] | None = None) -> SweepRecord:
    """This run's record of the sweep of `plans` (position, plan), having taken over (with `resume`) or dropped
    (without) the records of earlier runs of it that ended before every plan started."""
    folder = state_dir(env) / _FOLDER / sweep_id(plans)
    positions = {i for i, _ in plans}
    earlier: dict[int, str] = {}
    when: float | None = None
    try:
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            taken = _take_over(path)
            if taken is None:
                continue
            found, updated = taken
            if resume:
                for i, name in found.items():
                    if i in positions:
                        earlier.setdefault(i, name)
                when = updated if when is None else min(when, updated)
    except OSError:
        pass
    record = SweepRecord(folder, earlier, len(plans), when)
    try:
        record._open()
    except OSError as exc:
        record.problem = f"{folder}: {exc.strerror or type(exc).__name__}"
    return record


def _take_over(path: Path) -> tuple[dict[int, str], float] | None:
    """An ended run's record (its jobs by position, when it was written), removed from the folder; None when the
    run is still going (its lock is held) or the record cannot be read (it is removed then too)."""
    lock_path = path.with_suffix(".lock")
    lock = None
    try:
        if fcntl is not None and lock_path.exists():
            lock = open(lock_path, "a", encoding="ascii")  # noqa: SIM115 - closed below
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return None  # a run still going
        found = _read(path)
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.unlink(lock_path)
        return found
    finally:
        if lock is not None:
            lock.close()


def _read(path: Path) -> tuple[dict[int, str], float] | None:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
        data: Any = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_RECORD_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("started"), dict):
        return None
    jobs = {int(i): n for i, n in data["started"].items()
            if isinstance(i, str) and i.isdigit() and isinstance(n, str) and JOB_NAME.fullmatch(n)}
    updated = data.get("updated")
    return jobs, float(updated) if isinstance(updated, (int, float)) else 0.0
