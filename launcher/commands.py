"""What each CLI command does with the library, kept apart from click so tests can call it."""
from __future__ import annotations

from collections.abc import Sequence

from launcher.errors import EXIT_INVALID, EXIT_OK, LauncherError, SpecError
from launcher.output import emit_json


def validate_specs(specs: Sequence[str], overrides: Sequence[str], output: str) -> int:
    """Check every spec (the rules too); each problem is one line; exit 2 if any spec is invalid."""
    import click

    from launcher.plan import build_plan
    from launcher.spec import load_spec

    results = []
    for path in specs:
        try:
            loaded = load_spec(path, overrides)
            plan = build_plan(loaded)
        except SpecError as err:
            results.append({"file": path, "valid": False, "errors": err.lines()})
            continue
        except LauncherError as err:
            results.append({"file": path, "valid": False, "errors": err.lines()})
            continue
        errors = [f"{loaded.mark(a.get('field', ''))}: {a.get('field') or '(spec)'}: {a['rule']} {a['message']}"
                  for a in plan.advisories if a["severity"] == "error"]
        results.append({"file": path, "valid": not errors, "errors": errors, "job_name": plan.job_name,
                        "world_size": plan.world_size})
    if output == "json":
        emit_json(results)
    else:
        for r in results:
            if r["valid"]:
                click.echo(f"{r['file']}: ok ({r['world_size']} GPUs)")
            for line in r["errors"]:
                click.echo(line, err=True)
    return EXIT_OK if all(r["valid"] for r in results) else EXIT_INVALID


def show_plan(spec: str, overrides: Sequence[str], output: str) -> int:
    """Print the plan; exit 2 when an advisory of severity error fires (the plan is still shown)."""
    from launcher import output as out
    from launcher.plan import build_plan
    from launcher.spec import load_spec

    plan = build_plan(load_spec(spec, overrides)).as_dict()
    if output == "json":
        emit_json(plan)
    else:
        out.show_plan(plan)
    return EXIT_INVALID if any(a["severity"] == "error" for a in plan["advisories"]) else EXIT_OK
