"""Errors that carry their exit code and a one-line message, so the CLI never prints a traceback.

Exit codes are a contract for Makefiles and pipelines (README, "Exit codes").
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from launcher.core.sanitize import clean

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_INVALID = 2
EXIT_PREFLIGHT = 3
EXIT_AWS = 4
EXIT_STOPPED = 5
EXIT_TIMEOUT = 124  # `wait --timeout` ran out with a job still running (as timeout(1) exits)
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # SIGTERM while a job was being created (128 + 15, as a shell reports it)


class LauncherError(Exception):
    """A failure a person can act on; `str(err)` is the whole message."""

    exit_code = EXIT_JOB_FAILED

    def lines(self) -> list[str]:
        return [str(self)]


@dataclass(frozen=True)
class Mark:
    """Where a value came from: a spec file position, or the n-th override (file OVERRIDES, line n)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{clean(self.file, limit=200)}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where (file, line, column), which field (a dotted path), and why."""

    mark: Mark
    path: str
    message: str

    @property
    def file(self) -> str:
        return self.mark.file

    @property
    def line(self) -> int:
        return self.mark.line

    @property
    def column(self) -> int:
        return self.mark.col

    col = column  # the name Mark uses

    def to_dict(self) -> dict[str, str | int]:
        """As `validate --output json` gives it (text sanitised like the one-line form)."""
        return {"file": clean(self.file, limit=200), "line": self.line, "column": self.column,
                "path": clean(self.path, limit=200), "message": clean(self.message, limit=1000)}

    def __str__(self) -> str:
        """One line however hostile the input: escapes shown, the path and the message cut short."""
        return f"{self.mark}: {clean(self.path, limit=200) or '(spec)'}: {clean(self.message, limit=1000)}"


class SpecError(LauncherError):
    """One or more problems in a spec: each prints as `FILE:LINE:COL: path: message`."""

    exit_code = EXIT_INVALID
    SHOWN = 20  # problems printed; a spec with more gets one line saying how many more

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        shown = [str(p) for p in self.problems[:self.SHOWN]]
        rest = self.problems[self.SHOWN:]
        if rest:
            shown.append(f"{rest[0].mark}: (spec): {len(rest)} more problems not shown")
        return shown


# The `file` of a Mark on a value given as an override (`load_spec(path, overrides)`) rather than written
# in a file: its `line` is the override's position, its `col` the column in `KEY.PATH=VALUE`. A shell
# words it as the flag the overrides came from.
OVERRIDES = "overrides"


class UsageError(LauncherError):
    exit_code = EXIT_INVALID


# The one hint every command gives when nothing names a region: there is no default, since a region chosen silently
# can send a job, or a price, to the wrong place. `{region}` is the argument that names one (a shell's --region).
NO_REGION = ("no AWS region: pass {region}, set cluster.region in the spec, AWS_REGION or AWS_DEFAULT_REGION, or a "
             "region in the profile (`aws configure set region REGION`); there is no default region")


def no_region() -> ArgumentError:
    """The error of a command that needs a region and finds none (exit 2), worded alike everywhere."""
    return ArgumentError(NO_REGION)


class PreflightError(LauncherError):
    """The account lacks something the job needs (its bucket, the role or a permission, a quota, the instance
    type, data in an input channel): found by a check before anything is created, or by a local run's checks
    (exit 3). AWS refusing a call for any other reason is an AwsError (exit 4)."""

    exit_code = EXIT_PREFLIGHT


class ArgumentError(UsageError):
    """A bad argument, said in its caller's words: the message names arguments as `{name}`, which reads
    as the Python argument's name (`global_batch_tokens`) unless the caller words them its own way
    (`worded`: a shell maps them to its flags, `--global-batch-tokens`)."""

    _NAME = re.compile(r"\{([a-z_]+)\}")

    def __init__(self, template: str):
        self.template = template
        super().__init__(self.worded())

    @property
    def arguments(self) -> tuple[str, ...]:
        """The arguments the message names, in order."""
        return tuple(self._NAME.findall(self.template))

    def worded(self, names: Mapping[str, str] | None = None) -> str:
        """The message with each `{name}` as `names` words it (the argument's own name when absent)."""
        words = names or {}
        return self._NAME.sub(lambda m: words.get(m.group(1), m.group(1)), self.template)


class Interrupted(LauncherError):
    """Ctrl-C during submit (exit 130), or SIGTERM while the job was being created (exit 143), with what is
    known about the job afterwards.

    `started`: True the job exists (and runs), False SageMaker has no such job, None cannot tell."""

    exit_code = EXIT_INTERRUPTED

    def __init__(self, message: str, job_name: str, started: bool | None, exit_code: int = EXIT_INTERRUPTED):
        super().__init__(message)
        self.job_name = job_name
        self.started = started
        self.exit_code = exit_code
