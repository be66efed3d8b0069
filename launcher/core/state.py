"""What this machine remembers between commands: the last job submitted from it, so `JOB` may be `latest`.

Kept under $XDG_STATE_HOME/smp-launch (default ~/.local/state/smp-launch), one small JSON file,
written atomically so two shells submitting at once never leave half a file.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from launcher.core.errors import UsageError

LATEST = "latest"
_FILE = "last-submitted.json"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return Path(base) / "smp-launch"


def record_submitted(job_name: str, region: str | None, env: Mapping[str, str] | None = None) -> Path:
    """Remember `job_name` (and its region) as the latest job submitted from this machine."""
    folder = state_dir(env)
    folder.mkdir(parents=True, exist_ok=True)
    record = {"job_name": job_name, "region": region, "submitted_at": time.time()}
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".last-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(tmp, folder / _FILE)
    return folder / _FILE


def last_submitted(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The latest record, or None when nothing was submitted from here.

    A file that exists but cannot be read, is not JSON or has the wrong shape is a UsageError that
    says so: "nothing was submitted" would be a lie, and a TypeError later would be a traceback.
    """
    path = state_dir(env) / _FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise _unusable(path, f"cannot be read ({type(exc).__name__})") from None
    try:
        record = json.loads(text)
    except ValueError:
        raise _unusable(path, "is not valid JSON") from None
    if not isinstance(record, dict):
        raise _unusable(path, "does not hold a job record")
    name, region = record.get("job_name"), record.get("region")
    if not isinstance(name, str) or not name.strip():
        raise _unusable(path, "has no job name")
    if region is not None and not isinstance(region, str):
        raise _unusable(path, "has a region that is not text")
    return record


def _unusable(path: Path, why: str) -> UsageError:
    return UsageError(f"the record of the last job submitted from this machine ({path}) {why}; give a job "
                      "name instead of `latest` (the next submit rewrites that file)")


def resolve_job(job: str, region: str | None, env: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """(job name, region): `latest` becomes the last submitted job, in its region unless one is given."""
    if job != LATEST:
        return job, region
    record = last_submitted(env)
    if record is None:
        raise UsageError(f"no job has been submitted from this machine yet (looked in {state_dir(env)}); "
                         "give a job name")
    return record["job_name"], region or record.get("region")
