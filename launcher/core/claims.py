"""Job names this machine's processes hold: one process's sweep never submits a name another's just took.

A job's name is made from the time (`<name>-<UTC time>-<ms>`), so two sweeps of one spec started in the same
instant make the same names. Before a submit sends CreateTrainingJob it claims the name here: a file named after
it under the state folder ($XDG_STATE_HOME/smp-launch/names, launcher.core.state), created only if none is there
(O_CREAT | O_EXCL: the first process wins, atomically) and holding the claiming process's token. A name another
process claimed is given up for a new one before anything is sent; a name this process claimed before is still its
own when it was claimed for the same job (the same plan submitted twice is refused by SageMaker, as before), and
another's when it was for another job (two plans planned in the same millisecond). Processes on other machines
cannot be seen here: SageMaker's refusal of a name in use tells the submit that one (launcher.submission.create).

A state folder that cannot be written only loses this coordination: the claim is then this process's own (in
memory) and the submit goes on. Claims older than CLAIM_DAYS are removed, at most once per process.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from launcher.core.enums import StrEnum
from launcher.core.names import JOB_NAME
from launcher.core.state import state_dir

PROCESS = uuid.uuid4().hex  # this process's token in the claims it makes
CLAIM_DAYS = 7.0  # a job name is made from the time it was planned: an older claim can never be asked again
_FOLDER = "names"
_lock = threading.Lock()
_mine: dict[tuple[str, str], str] = {}  # (claims folder, name) -> the token it holds
_pruned = False


class Claim(StrEnum):
    NEW = "new"  # claimed now by this process: no process on this machine used the name before
    OURS = "ours"  # this process claimed it before for the same job (the same plan submitted again)
    OTHERS = "others"  # another process on this machine claimed it first, or this one for another job


def folder(env: Mapping[str, str] | None = None) -> Path:
    return state_dir(env) / _FOLDER


def claim(name: str, job: str, env: Mapping[str, str] | None = None) -> Claim:
    """Claim job name `name` for this process and the job `job` stands for (a plan's spec hash): see the module's
    docstring."""
    if not JOB_NAME.fullmatch(name):  # a job name is a safe file name; anything else is never a path here
        raise ValueError(f"not a training job name: {name!r}")
    where = folder(env)
    token = f"{PROCESS} {job}"
    with _lock:
        mine = _mine.get((str(where), name))
        if mine is not None:
            return Claim.OURS if mine == token else Claim.OTHERS
        try:
            where.mkdir(parents=True, exist_ok=True)
            _prune(where)
            fd = os.open(where / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except FileExistsError:
            return Claim.OURS if _holder(where / name) == token else Claim.OTHERS
        except OSError:  # no state folder to coordinate through: the name is this process's as far as it can tell
            _mine[(str(where), name)] = token
            return Claim.NEW
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(token)
        _mine[(str(where), name)] = token
        return Claim.NEW


def _holder(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(256)
    except OSError:
        return None


def _prune(where: Path) -> None:
    """Remove claims older than CLAIM_DAYS, once per process."""
    global _pruned
    if _pruned:
        return
    _pruned = True
    cutoff = time.time() - CLAIM_DAYS * 86400
    with contextlib.suppress(OSError):
        for entry in os.scandir(where):
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
