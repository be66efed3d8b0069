"""Options several commands share, the AWS clients of a command that names no spec, and the API's
errors in a shell's words (its arguments named as the flags that pass them)."""
from __future__ import annotations

import functools
import json
from typing import Any

import click

# The API's argument names as this CLI's flags (an ArgumentError names arguments; the shell shows flags).
FLAGS = {
    "overrides": "--set", "region": "--region", "profile": "--profile", "model": "--model", "preset": "--model",
    "instance_type": "--instance-type", "instances": "--instances", "seq_length": "--seq-length",
    "global_batch_tokens": "--global-batch-tokens", "precision": "--precision", "yes": "--yes",
    "max_attempts": "--max-attempts", "rate": "--rate", "interval": "--interval", "sweeps": "--sweep",
    "max_concurrent": "--max-concurrent", "hosts": "--host", "since": "--since", "grep": "--grep",
    "nproc": "--nproc", "max_steps": "--max-steps", "tiny": "--tiny", "tokens": "--tokens", "by": "--by",
    "instance_types": "INSTANCE_TYPE",
}

OUTPUT = click.option("--output", "output", type=click.Choice(["table", "json"]), default="table",
                      show_default=True, help="table for people, json for pipelines.")
SET = click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE",
                   help="Override a spec value (typed as YAML); repeatable; applied after extends.")
JOB = click.argument("job", metavar="JOB")
SPEC = click.argument("spec", type=click.Path(dir_okay=False))
FORCE = click.option("--force", is_flag=True, help="With --write: replace a file that exists (a link there is "
                                                   "replaced, never written through).")


def templates_option(f):
    """`--templates DIR`: a team's templates folder, each *.j2 there replacing the shipped template of its name.

    It is the spec's `templates:` given on the command line (relative to the current folder), so it reaches
    the spec as the last `--set` and wins over the spec's own; every command that plans takes it alike. Put
    it on a command that takes SET: it hands the command the `overrides` it extends."""

    @functools.wraps(f)
    def with_templates(*args, templates: str | None = None, **kwargs):
        if templates is not None:
            kwargs["overrides"] = (*kwargs.get("overrides", ()), f"templates={json.dumps(templates)}")
        return f(*args, **kwargs)

    return click.option("--templates", "templates", default=None, metavar="DIR",
                        type=click.Path(exists=True, file_okay=False),
                        help="Team templates: each *.j2 in DIR replaces the shipped template of that name "
                             "(overrides the spec's `templates:`).")(with_templates)


def max_cost_option(f):
    """`--max-cost USD`: the spec's `cluster.max_cost` given on the command line (the last `--set`, so it wins):
    the advisor refuses a plan predicted to cost more. Put it on a command that takes SET."""

    @functools.wraps(f)
    def with_max_cost(*args, max_cost: float | None = None, **kwargs):
        if max_cost is not None:
            kwargs["overrides"] = (*kwargs.get("overrides", ()), f"cluster.max_cost={max_cost!r}")
        return f(*args, **kwargs)

    return click.option("--max-cost", "max_cost", type=click.FloatRange(min=0, min_open=True), default=None,
                        metavar="USD", help="Refuse a plan predicted to cost more than this many US dollars "
                                            "(overrides the spec's cluster.max_cost).")(with_max_cost)


def backend_option(f):
    """`--backend NAME`: the spec's `cluster.backend` given on the command line (the last `--set`, so it wins): how
    the job's request is built, by the SageMaker SDK's PyTorch Estimator (SDK 2.x) or ModelTrainer (2.x and 3.x).
    Put it on a command that takes SET."""

    @functools.wraps(f)
    def with_backend(*args, backend: str | None = None, **kwargs):
        if backend is not None:
            kwargs["overrides"] = (*kwargs.get("overrides", ()), f"cluster.backend={backend}")
        return f(*args, **kwargs)

    choices = click.Choice(["auto", "estimator", "model-trainer"])
    return click.option("--backend", "backend", type=choices, default=None,
                        help="How the job's request is built: estimator (the PyTorch Estimator, SageMaker SDK 2.x) or "
                             "model-trainer (ModelTrainer, SDK 2.x and 3.x); auto: the Estimator on 2.x, "
                             "ModelTrainer on 3.x (overrides cluster.backend).")(with_backend)


def aws_options(f):
    """`--profile` and `--region`, for every command that talks to AWS."""
    f = click.option("--region", default=None, metavar="REGION",
                     help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the profile's).")(f)
    return click.option("--profile", default=None, metavar="NAME", help="AWS profile (default: AWS_PROFILE).")(f)


def job_clients(profile: str | None, region: str | None) -> Any:
    """Clients for a command about jobs already launched: the region from --region, AWS_REGION /
    AWS_DEFAULT_REGION or the profile; there is no spec to take it from, so a missing one says so."""
    from launcher.api import connect, resolve_region
    from launcher.core.errors import no_region

    resolved = resolve_region(region, profile=profile)
    if not resolved:
        raise no_region()
    return connect(profile=profile, region=resolved)


# Marks the API gives a value that came from an argument rather than a file: the n-th override or sweep.
ARGUMENT_MARKS = ("overrides", "sweeps")


def shell_problem(problem: Any) -> Any:
    """A spec Problem as a shell reads it: a value given as an override or a sweep is marked by its flag
    (`--set:2:21`, `--sweep:1:23`)."""
    import dataclasses

    if problem.mark.file not in ARGUMENT_MARKS:
        return problem
    return dataclasses.replace(problem, mark=dataclasses.replace(problem.mark, file=FLAGS[problem.mark.file]))


def shell_lines(err: Any) -> list[str]:
    """A LauncherError's lines in a shell's words: arguments named as flags, overrides marked as --set."""
    from launcher.core.errors import ArgumentError, SpecError

    if isinstance(err, ArgumentError):
        return [err.worded(FLAGS)]
    if isinstance(err, SpecError):
        return SpecError([shell_problem(p) for p in err.problems]).lines()
    return err.lines()
