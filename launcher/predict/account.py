"""This account's own speed factors: measured over predicted tokens per second, per instance type.

`smp-launch calibrate JOB...` measures finished jobs' steady speed from their progress lines and stores,
per instance type, each job's measured and predicted tokens per second per GPU in `calibration.json`
under the state folder (launcher.core.state.state_dir). The factor is their geometric mean: later plans
on that instance type multiply the published prediction by it and say so. The file is read up to 1 MiB
and a larger or damaged one is passed over (the published calibration still answers), so it never stops a plan.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.core.state import state_dir

FILE = "calibration.json"
VERSION = 1
MAX_BYTES = 1 << 20
MIN_FACTOR, MAX_FACTOR = 0.05, 20.0  # a ratio outside this is a broken measurement, not a slow account


@dataclass(frozen=True)
class Sample:
    """One finished job's steady speed next to what the published calibration predicted for it."""

    job: str
    instance_type: str
    measured: float  # tokens per second per GPU
    predicted: float
    steps: int  # progress lines the steady state was measured over
    measured_at: str

    @property
    def ratio(self) -> float:
        return self.measured / self.predicted

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "instance_type": self.instance_type, "measured": round(self.measured, 2),
                "predicted": round(self.predicted, 2), "ratio": round(self.ratio, 4), "steps": self.steps,
                "measured_at": self.measured_at}


@dataclass(frozen=True)
class AccountFactor:
    instance_type: str
    factor: float
    jobs: tuple[str, ...]

    def describe(self) -> str:
        n = len(self.jobs)
        return (f"this account's factor {self.factor:.3f} for {self.instance_type} from {n} calibrated "
                f"job{'s' if n != 1 else ''}")


def path(env: Mapping[str, str] | None = None) -> Path:
    return state_dir(env) / FILE


def _read(p: Path) -> list[Sample]:
    try:
        if not p.is_file() or p.stat().st_size > MAX_BYTES:
            return []
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("samples"), list):
        return []
    out = []
    for row in doc["samples"]:
        try:
            s = Sample(str(row["job"]), str(row["instance_type"]), float(row["measured"]), float(row["predicted"]),
                       int(row["steps"]), str(row["measured_at"]))
        except (KeyError, TypeError, ValueError):
            continue
        if s.measured > 0 and s.predicted > 0 and math.isfinite(s.ratio) and MIN_FACTOR <= s.ratio <= MAX_FACTOR:
            out.append(s)
    return out


_CACHE: dict[str, tuple[tuple[int, int], list[Sample]]] = {}


def samples(env: Mapping[str, str] | None = None) -> list[Sample]:
    """Every stored sample (empty without a usable file); re-read only when the file changes."""
    p = path(env)
    try:
        st = p.stat()
    except OSError:
        return []
    key = (st.st_mtime_ns, st.st_size)
    hit = _CACHE.get(str(p))
    if hit is not None and hit[0] == key:
        return list(hit[1])
    found = _read(p)
    _CACHE[str(p)] = (key, found)
    return list(found)


def factors(env: Mapping[str, str] | None = None) -> dict[str, AccountFactor]:
    """Per instance type: the geometric mean of its samples' measured-over-predicted ratios."""
    by_type: dict[str, list[Sample]] = {}
    for s in samples(env):
        by_type.setdefault(s.instance_type, []).append(s)
    out = {}
    for itype, rows in by_type.items():
        mean = math.exp(sum(math.log(s.ratio) for s in rows) / len(rows))
        out[itype] = AccountFactor(itype, mean, tuple(s.job for s in rows))
    return out


def store(new: Sequence[Sample], env: Mapping[str, str] | None = None) -> Path:
    """Add (or replace, by job name) samples in the state folder's file, atomically; returns its path."""
    kept = {s.job: s for s in samples(env)}
    kept.update({s.job: s for s in new})
    folder = state_dir(env)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".calibration-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"version": VERSION, "samples": [s.to_dict() for s in kept.values()]}, f, indent=1)
    os.replace(tmp, folder / FILE)
    return folder / FILE
