"""Writing a file the user named (`advise --write`, `schema --write`): a new file, or with `force` a replaced
one, never a write through a link.

Without `force` the file is created only if nothing has the name (O_CREAT | O_EXCL, which refuses a link too,
dangling or not: https://man7.org/linux/man-pages/man2/open.2.html), so a hand-written spec is never lost.
With `force` the text goes to a new file beside the name, renamed over it: a link at the name is replaced,
its target untouched.
"""
from __future__ import annotations

import contextlib
import os
import tempfile

from launcher.core.errors import UsageError
from launcher.core.sanitize import clean


def write_new(path: str, text: str, *, force: bool = False, flag: str = "--write") -> None:
    """Write `text` to `path` (UTF-8); a UsageError (exit 2) naming `flag` when it cannot or must not."""
    shown = clean(path, limit=200)
    data = text.encode("utf-8")
    try:
        if force:
            _replace(path, data)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
    except FileExistsError:
        raise UsageError(f"{flag} {shown}: the file exists; --force replaces it") from None
    except IsADirectoryError:
        raise UsageError(f"{flag} {shown}: is a folder; name a file") from None
    except OSError as exc:
        raise UsageError(f"{flag} {shown}: cannot write it ({exc.strerror or exc})") from None


def _replace(path: str, data: bytes) -> None:
    """`data` in a new file beside `path`, renamed over it (a link there is replaced, never followed)."""
    if os.path.isdir(path) and not os.path.islink(path):
        raise IsADirectoryError(21, "Is a directory")
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
