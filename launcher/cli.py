"""The `smp-launch` command line: a thin shell over the library.

Only click is imported at start-up; each command imports what it needs, so `--help`, `validate`,
`plan`, `logs` and `status` never load the SageMaker SDK.
"""
from __future__ import annotations

import sys

import click

from launcher import __version__

OUTPUT = click.option("--output", "output", type=click.Choice(["table", "json"]), default="table",
                      show_default=True, help="table for people, json for pipelines.")
SET = click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE",
                   help="Override a spec value (typed as YAML); repeatable; applied after extends.")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="smp-launch")
def cli() -> None:
    """Plan, check and launch SageMaker model parallelism v2 (SMP v2) training jobs.

    Exit codes: 0 ok; 1 the job failed or a command failed; 2 invalid input; 3 a preflight
    refused; 4 AWS refused or is unreachable; 5 the job was stopped; 130 interrupted.
    """


@cli.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@SET
@OUTPUT
def validate(specs: tuple[str, ...], overrides: tuple[str, ...], output: str) -> None:
    """Check job specs without touching AWS; exit 2 if any is invalid."""
    from launcher.commands import validate_specs

    sys.exit(validate_specs(specs, overrides, output))


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@SET
@OUTPUT
def plan(spec: str, overrides: tuple[str, ...], output: str) -> None:
    """Show everything submit would do, with no AWS call."""
    from launcher.commands import show_plan

    sys.exit(show_plan(spec, overrides, output))


@cli.command()
@click.option("--model", "model", required=True, metavar="PRESET", help="A model preset, e.g. llama2-13b.")
@click.option("--instances", type=click.IntRange(1, 1024), default=None,
              help="Instance count; omit to derive it from --global-batch-tokens.")
@click.option("--seq-length", type=click.IntRange(1), default=4096, show_default=True)
@click.option("--instance-type", default="ml.p4d.24xlarge", show_default=True)
@click.option("--global-batch-tokens", "global_batch", default=None, metavar="N",
              help="Required tokens per step, e.g. 4M (binary: 4M = 4,194,304).")
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp8"]), default="bf16", show_default=True)
@click.option("--top", type=click.IntRange(1), default=10, show_default=True, help="Rows shown in the table.")
@click.option("--write", "write_to", type=click.Path(dir_okay=False), default=None,
              help="Write a ready job spec for the best configuration.")
@OUTPUT
def advise(model: str, instances: int | None, seq_length: int, instance_type: str, global_batch: str | None,
           precision: str, top: int, write_to: str | None, output: str) -> None:
    """Recommend SMP v2 configurations for a model, ranked the seed's way."""
    from launcher.commands import advise_command

    sys.exit(advise_command(model, instances, seq_length, instance_type, global_batch, precision, top,
                            write_to, output))


@cli.command()
@click.option("--output", "output", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
def rules(output: str) -> None:
    """List the advisor's rules (ids, severities, sources)."""
    from launcher.output import emit_json
    from launcher.rules.docs import as_json, markdown

    if output == "json":
        emit_json(as_json())
    else:
        sys.stdout.write(markdown())


@cli.command()
@click.option("--write", "write_to", type=click.Path(dir_okay=False), default=None,
              help="Write the schema to this file instead of printing it.")
def schema(write_to: str | None) -> None:
    """Print the job spec's JSON Schema (for editors and CI)."""
    from launcher.spec.schema import schema_text

    text = schema_text()
    if write_to:
        with open(write_to, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; turn LauncherErrors into one line per problem on stderr and their exit code."""
    from launcher.errors import EXIT_INTERRUPTED, LauncherError

    try:
        cli.main(args=argv, prog_name="smp-launch", standalone_mode=False)
    except LauncherError as err:
        for line in err.lines():
            click.echo(line, err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        _quiet_broken_pipe()
    sys.exit(0)


def _quiet_broken_pipe() -> None:
    """`smp-launch ... | head` closed our stdout: exit quietly, as awslogs does."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)
