"""The `smp-launch` command line: a thin shell over the Python API (launcher.api), one module per
command group: `spec` (validate, plan, render, rules, schema, advise), `role` (check-role), `submit`,
`jobs` (logs, status, list, stop, metrics); `present` holds every table, colour and the JSON output.

`main` is the console entry point (`smp-launch = launcher.cli:main`). The commands load on first
use, so `launcher.cli.present` can be imported (by the log printer) without click or the commands.
"""
from __future__ import annotations

from typing import Any


def main(argv: list[str] | None = None) -> None:
    """Run `smp-launch ARGV` (sys.argv when None); exits with the documented exit code."""
    from launcher.cli.app import main as run

    run(argv)


def __getattr__(name: str) -> Any:
    if name == "cli":
        from launcher.cli.app import cli

        return cli
    raise AttributeError(f"module 'launcher.cli' has no attribute {name!r}")
