"""How the user ran this CLI, so that the commands a hint suggests run as written: `smp-launch` when that is on PATH
(and is this program), else the path they typed (`.venv/bin/smp-launch`), else `python -m launcher`."""
from __future__ import annotations

import os
import shutil
import sys

PROG = "smp-launch"
_state = {"name": PROG}


def from_argv(argv0: str, interpreter: list[str] | None = None) -> str:
    """The command a person types to run this program again, from the argv[0] it was started with (and, for
    `python -m launcher`, the interpreter's own arguments as typed: sys.orig_argv)."""
    if os.path.basename(argv0) in ("__main__.py", "-m", "-c", ""):
        typed = interpreter or []
        if len(typed) >= 3 and typed[1:3] == ["-m", "launcher"]:
            return f"{typed[0]} -m launcher"
        return "python -m launcher"
    on_path = shutil.which(PROG)
    if on_path and os.path.basename(argv0) == PROG:
        try:
            if os.path.samefile(on_path, argv0):
                return PROG
        except OSError:
            pass
    if os.path.basename(argv0) != PROG:
        return PROG  # an entry point under another name: the documented one
    return argv0


def remember(argv0: str | None) -> str:
    """Take the name from argv[0] (None: a caller passed its own arguments, as tests do: the plain name)."""
    _state["name"] = PROG if argv0 is None else from_argv(argv0, list(getattr(sys, "orig_argv", [])))
    return _state["name"]


def name() -> str:
    return _state["name"]


def as_run(text: str) -> str:
    """`text` with each command it quotes (`smp-launch ...` in backquotes) named as the user ran it."""
    current = name()
    return text if current == PROG else text.replace(f"`{PROG} ", f"`{current} ")


def program_name(argv: list[str] | None) -> str:
    """What click calls this program in usage lines and errors: as the user ran it."""
    return remember(sys.argv[0] if argv is None else None)
