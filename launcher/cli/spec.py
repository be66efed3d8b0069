"""Commands about specs, none of which talks to AWS: validate, plan, render, schema, rules, advise.

The advisor's errors print as `validate` prints every problem: `FILE:LINE:COL: field.path: message`
on stderr, exit 2.
"""
from __future__ import annotations

import sys
from typing import Any

import click

from launcher.cli.options import (
    FORCE,
    OUTPUT,
    SET,
    SPEC,
    backend_option,
    max_cost_option,
    shell_lines,
    shell_problem,
    templates_option,
)


def advisor_errors(plan: Any) -> list[Any]:
    """The advisor's errors as spec problems (launcher.core.errors.Problem), each at the field that caused it,
    a value given by --set marked as the flag."""
    from launcher.api import advisor_errors as errors

    return [shell_problem(p) for p in errors(plan)]


def problem_record(problem: Any) -> dict[str, Any]:
    """A launcher.core.errors.Problem as `validate --output json` gives it (text made safe to print)."""
    from launcher.cli.present import safe

    mark = problem.mark
    return {"file": safe(mark.file), "line": mark.line, "column": mark.col, "path": safe(problem.path),
            "message": safe(problem.message)}


def print_problems(problems: list[Any]) -> None:
    """One line each on stderr, as a SpecError prints them (long lists end with a count)."""
    from launcher.core.errors import SpecError

    for line in SpecError(problems).lines():
        click.echo(line, err=True)


def check_spec(path: str, overrides: tuple[str, ...]) -> dict[str, Any]:
    """Load and plan one spec: its validity, its problems (structured and as lines) and, when it loads, its job."""
    from launcher.api import build_plan, load_spec
    from launcher.core.errors import LauncherError, Problem, SpecError

    try:
        loaded = load_spec(path, overrides)
        plan = build_plan(loaded)
    except SpecError as err:
        problems = [shell_problem(p) for p in err.problems]
        return {"file": path, "valid": False, "errors": SpecError(problems).lines(),
                "problems": [problem_record(p) for p in problems]}
    except LauncherError as err:
        from launcher.core.errors import Mark

        lines = shell_lines(err)
        problems = [Problem(Mark(path, 1, 1), "", "; ".join(lines))]
        return {"file": path, "valid": False, "errors": lines, "problems": [problem_record(p) for p in problems]}
    problems = advisor_errors(plan)
    return {"file": path, "valid": not problems, "errors": [str(p) for p in problems],
            "problems": [problem_record(p) for p in problems], "job_name": plan.job_name,
            "world_size": plan.world_size}


@click.command("validate")
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@SET
@templates_option
@backend_option
@max_cost_option
@OUTPUT
def validate_specs(specs: tuple[str, ...], overrides: tuple[str, ...], output: str) -> None:
    """Check job specs without touching AWS; exit 2 if any is invalid."""
    from launcher.cli.present import emit_json
    from launcher.core.errors import EXIT_INVALID, EXIT_OK

    results = [check_spec(path, overrides) for path in specs]
    if output == "json":
        emit_json(results)
    else:
        for r in results:
            if r["valid"]:
                click.echo(f"{r['file']}: ok ({r['world_size']} GPUs)")
            for line in r["errors"]:
                click.echo(line, err=True)
    sys.exit(EXIT_OK if all(r["valid"] for r in results) else EXIT_INVALID)


@click.command("plan")
@SPEC
@SET
@templates_option
@backend_option
@max_cost_option
@OUTPUT
def show_plan(spec: str, overrides: tuple[str, ...], output: str) -> None:
    """Show everything submit would do, with no AWS call; exit 2 when the advisor finds an error."""
    from launcher.api import build_plan, load_spec
    from launcher.cli import present
    from launcher.core.errors import EXIT_INVALID, EXIT_OK

    plan = build_plan(load_spec(spec, overrides))
    data = plan.to_dict()
    if output == "json":
        present.emit_json(data)
    else:
        present.show_plan(data)
    problems = advisor_errors(plan)
    print_problems(problems)
    sys.exit(EXIT_INVALID if problems else EXIT_OK)


@click.command("render")
@SPEC
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Write the source dir here (created if needed).")
@SET
@templates_option
@backend_option
@OUTPUT
def render_source_dir(spec: str, out_dir: str, overrides: tuple[str, ...], output: str) -> None:
    """Write the job's source dir: entry script, helper modules, requirements.txt, distribution.json, plan.json."""
    from launcher.api import build_plan, load_spec, write_source_dir
    from launcher.cli.present import describe_templates, emit_json
    from launcher.core.errors import EXIT_INVALID, EXIT_OK

    plan = build_plan(load_spec(spec, overrides))
    paths = write_source_dir(plan, out_dir)
    templates = plan.templates.used()
    if output == "json":
        emit_json({"spec_file": spec, "directory": out_dir, "files": [p.name for p in paths], "templates": templates})
    else:
        click.echo(f"rendered {len(paths)} files into {out_dir}: {', '.join(p.name for p in paths)}")
        click.echo(f"templates: {describe_templates(templates)}")
    problems = advisor_errors(plan)
    print_problems(problems)
    sys.exit(EXIT_INVALID if problems else EXIT_OK)


@click.command("rules")
@click.option("--output", "output", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
def print_rules(output: str) -> None:
    """List the advisor's rules (ids, severities, sources)."""
    from launcher.api import advisor_rules, advisor_rules_markdown
    from launcher.cli.present import emit_json

    if output == "json":
        emit_json(advisor_rules())
    else:
        sys.stdout.write(advisor_rules_markdown())


@click.command("schema")
@click.option("--write", "write_to", type=click.Path(dir_okay=False), default=None,
              help="Write the schema to this file instead of printing it (a new file unless --force).")
@FORCE
@click.option("--output", "output", type=click.Choice(["json"]), default="json", show_default=True,
              help="The schema is JSON either way; accepted so every command takes --output json.")
def print_schema(write_to: str | None, force: bool, output: str) -> None:
    """Print the job spec's JSON Schema (for editors and CI)."""
    from launcher.api import schema_text
    from launcher.cli.userfile import write_new

    text = schema_text()
    if not write_to:
        sys.stdout.write(text)
        return
    write_new(write_to, text, force=force)


@click.command("advise")
@click.option("--model", "model", required=True, metavar="PRESET", help="A model preset, e.g. llama2-13b.")
@click.option("--instances", type=click.IntRange(1, 1024), default=None,
              help="Instance count; omit to derive it from --global-batch-tokens.")
@click.option("--seq-length", type=click.IntRange(1), default=4096, show_default=True)
@click.option("--instance-type", default="ml.p4d.24xlarge", show_default=True)
@click.option("--global-batch-tokens", "global_batch", default=None, metavar="N",
              help="Required tokens per step, e.g. 4M (binary: 4M = 4,194,304).")
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp8"]), default="bf16", show_default=True)
@click.option("--top", type=click.IntRange(1), default=10, show_default=True, help="Rows shown in the table.")
@click.option("--tokens", default=None, metavar="N",
              help="The token budget times and costs are predicted for, e.g. 300B or 1T (decimal). [default: 1T]")
@click.option("--by", type=click.Choice(["time", "cost", "practices"]), default="time", show_default=True,
              help="Rank by predicted time to train, by predicted cost, or in the order of AWS's best practices.")
@click.option("--price-region", "region", default=None, metavar="REGION",
              help="The region whose prices the costs use (default: AWS_REGION, AWS_DEFAULT_REGION or the "
                   "profile's; there is no default region). No AWS call: the price cache or the shipped snapshot.")
@click.option("--write", "write_to", type=click.Path(dir_okay=False), default=None,
              help="Write a ready job spec for the best configuration (a new file unless --force).")
@FORCE
@OUTPUT
def advise_layouts(model: str, instances: int | None, seq_length: int, instance_type: str, global_batch: str | None,
                   precision: str, top: int, tokens: str | None, by: str, region: str | None, write_to: str | None,
                   force: bool, output: str) -> None:
    """Recommend SMP v2 configurations for a model, ranked by predicted time to train (or cost)."""
    from launcher.api import advise, advised_spec, resolve_region
    from launcher.cli import present
    from launcher.cli.options import FLAGS
    from launcher.core.errors import ArgumentError, UsageError

    try:
        ranked = advise(model, instance_type=instance_type, instances=instances, seq_length=seq_length,
                        global_batch_tokens=global_batch, precision=precision, tokens=tokens, by=by,
                        region=resolve_region(region))
    except ArgumentError as err:  # the region advise prices in is --price-region here
        raise UsageError(err.worded({**FLAGS, "region": "--price-region"})) from None
    if not ranked:
        raise UsageError(f"no configuration of {model} fits on {instances} x {instance_type} at sequence "
                         f"{seq_length}; add instances or use an 80 GB instance type")
    if write_to:
        from launcher.cli.userfile import write_new

        write_new(write_to, advised_spec(model, ranked[0], instance_type=instance_type, seq_length=seq_length,
                                         precision=precision, path=write_to), force=force)
    if output == "json":
        present.emit_json([c.as_dict() for c in ranked])
    else:
        present.show_advice(model, instance_type, seq_length, ranked, top, write_to, by, tokens or "1T")


COMMANDS = (validate_specs, show_plan, render_source_dir, print_rules, print_schema, advise_layouts)
