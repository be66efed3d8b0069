"""What this machine remembers between commands: the last job submitted from it, so `JOB` may be `latest`.

Kept under $XDG_STATE_HOME/smp-launch (default ~/.local/state/smp-launch), one small JSON file,
written atomically so two shells submitting at once never leave half a file. A relative XDG_STATE_HOME
is ignored, as the XDG Base Directory Specification says ("If an implementation encounters a relative
path in any of these variables it should consider the path invalid and ignore it":
https://specifications.freedesktop.org/basedir-spec/latest/). The file is read only when it is a
regular file, and at most MAX_BYTES of it: a planted link to /dev/zero or a FIFO is said, not read.
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from launcher.core.errors import UsageError
from launcher.core.names import JOB_NAME, check_job_name

LATEST = "latest"
_FILE = "last-submitted.json"
MAX_BYTES = 64 * 1024  # the record is about a hundred bytes


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    xdg = env.get("XDG_STATE_HOME") or ""
    base = xdg if os.path.isabs(xdg) else os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return Path(base) / "smp-launch"


def _read_bounded(path: Path) -> str:
    """The text of a regular file of at most MAX_BYTES (FileNotFoundError when absent; OSError or ValueError
    for anything else: a link to a device, a FIFO, a folder, a file too large, bytes that are not UTF-8)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO opens without waiting for a writer
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:  # one byte past the limit tells a larger file, however large
            data = f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ValueError(f"is larger than {MAX_BYTES // 1024} KiB")
    return data.decode("utf-8")


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
        text = _read_bounded(path)
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise _unusable(path, "cannot be read (it is not UTF-8 text)") from None
    except ValueError as exc:
        raise _unusable(path, f"cannot be read: it {exc}") from None
    except OSError as exc:
        raise _unusable(path, f"cannot be read ({type(exc).__name__})") from None
    try:
        record = json.loads(text)
    except ValueError:
        raise _unusable(path, "is not valid JSON") from None
    if not isinstance(record, dict):
        raise _unusable(path, "does not hold a job record")
    name, region = record.get("job_name"), record.get("region")
    if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
        raise _unusable(path, "has no job name" if not isinstance(name, str) or not name.strip()
                        else "holds a name that is not a training job name")
    if region is not None and not isinstance(region, str):
        raise _unusable(path, "has a region that is not text")
    return record


def _unusable(path: Path, why: str) -> UsageError:
    return UsageError(f"the record of the last job submitted from this machine ({path}) {why}; give a job "
                      "name instead of `latest` (the next submit rewrites that file)")


def resolve_job(job: str, region: str | None, env: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """(job name, region): `latest` becomes the last submitted job, in its region unless one is given. A name
    SageMaker would refuse is a UsageError (exit 2), with no AWS call."""
    if job != LATEST:
        return check_job_name(job), region
    record = last_submitted(env)
    if record is None:
        raise UsageError(f"no job has been submitted from this machine yet (looked in {state_dir(env)}); "
                         "give a job name")
    return record["job_name"], region or record.get("region")
