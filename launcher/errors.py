"""Errors that carry their exit code and a one-line message, so the CLI never prints a traceback.

Exit codes are a contract for Makefiles and pipelines (README, "Exit codes").
"""
from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_INVALID = 2
EXIT_PREFLIGHT = 3
EXIT_AWS = 4
EXIT_STOPPED = 5
EXIT_INTERRUPTED = 130


class LauncherError(Exception):
    """A failure a person can act on; `str(err)` is the whole message."""

    exit_code = EXIT_JOB_FAILED

    def lines(self) -> list[str]:
        return [str(self)]


@dataclass(frozen=True)
class Mark:
    """Where a value came from: a spec file position, or a `--set` flag."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Problem:
    mark: Mark
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.mark}: {self.path or '(spec)'}: {self.message}"


class SpecError(LauncherError):
    """One or more problems in a spec: each prints as `FILE:LINE:COL: path: message`."""

    exit_code = EXIT_INVALID

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


class UsageError(LauncherError):
    exit_code = EXIT_INVALID
