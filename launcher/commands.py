"""What each CLI command does with the library, kept apart from click so tests can call it."""
from __future__ import annotations

from collections.abc import Sequence

from launcher.errors import EXIT_INVALID, EXIT_OK, LauncherError, SpecError, UsageError
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


def advise_command(model: str, instances: int | None, seq_length: int, instance_type: str,
                   global_batch: str | None, precision: str, top: int, write_to: str | None, output: str) -> int:
    """Rank feasible configurations; optionally write the best as a spec."""
    from launcher import advise as adv
    from launcher import output as out

    target = adv.parse_tokens(global_batch) if global_batch else None
    ranked = adv.advise(model, instance_type, instances, seq_length, target, precision)
    if not ranked:
        raise UsageError(f"no configuration of {model} fits on {instances} x {instance_type} at sequence "
                         f"{seq_length}; add instances or use an 80 GB instance type")
    if write_to:
        with open(write_to, "w", encoding="utf-8") as f:
            f.write(adv.spec_yaml(model, instance_type, seq_length, precision, ranked[0]))
    if output == "json":
        emit_json([c.as_dict() for c in ranked])
    else:
        out.show_advice(model, instance_type, seq_length, ranked, top, write_to)
    return EXIT_OK


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
