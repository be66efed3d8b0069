"""What each CLI command does with the library, kept apart from click so tests can call it."""
from __future__ import annotations

from collections.abc import Sequence

from launcher.errors import EXIT_INVALID, EXIT_OK, LauncherError, UsageError
from launcher.output import emit_json
from launcher.sanitize import clean, clean_data


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
            f.write(adv.spec_yaml(model, instance_type, seq_length, precision, ranked[0], write_to))
    if output == "json":
        emit_json([c.as_dict() for c in ranked])
    else:
        out.show_advice(model, instance_type, seq_length, ranked, top, write_to)
    return EXIT_OK


def show_plan(spec: str, overrides: Sequence[str], output: str) -> int:
    """Print the plan; exit 2 when an advisory of severity error fires (the plan is still shown)."""
    from launcher import output as out
    from launcher.plan import build_plan
    from launcher.request import stage
    from launcher.spec import load_spec

    loaded = load_spec(spec, overrides)
    built = build_plan(loaded)
    staged = stage(loaded, built)
    plan = built.as_dict()
    plan["source_uri"] = staged.source_uri
    plan["request"] = staged.request
    if output == "json":
        emit_json(plan)
    else:
        out.show_plan(plan)
    return EXIT_INVALID if any(a["severity"] == "error" for a in plan["advisories"]) else EXIT_OK


def check_role_command(spec: str, overrides: Sequence[str], profile: str | None, output: str) -> int:
    """pass: 0; fail: 3 with each missing action; unknown: 0 with a warning (submit would go on)."""
    import click

    from launcher.aws import Clients, explain
    from launcher.errors import EXIT_PREFLIGHT
    from launcher.iam import FAIL, check_role
    from launcher.plan import build_plan, require_region, resolve_region
    from launcher.spec import load_spec

    loaded = load_spec(spec, overrides)
    clients = Clients(profile=profile)
    plan = build_plan(loaded, region=resolve_region(loaded.spec.cluster.region, clients.env, profile=profile))
    clients.region = require_region(plan)
    try:
        result = check_role(plan, clients.iam, clients.sts)
    except LauncherError:
        raise
    except Exception as exc:
        raise explain(exc, "checking the role") from None
    if output == "json":
        emit_json(clean_data(result.as_dict()))
    else:
        for line in result.lines():
            click.echo(clean(line), err=result.verdict != "pass")
    return EXIT_PREFLIGHT if result.verdict == FAIL else EXIT_OK


def submit_cloud(specs: Sequence[str], overrides: Sequence[str], *, dry_run: bool, wait: bool,
                 skip_role_check: bool, output: str, profile: str | None = None, region: str | None = None) -> int:
    """Submit each spec (all are loaded and validated first, so a bad one stops them all)."""
    import click

    from launcher.aws import Clients
    from launcher.spec import load_spec
    from launcher.submit import submit

    if wait and (dry_run or len(specs) != 1):
        raise UsageError("--wait follows one job: give one spec and no --dry-run")
    loaded = [load_spec(path, overrides) for path in specs]
    results = []
    for spec in loaded:
        clients = Clients(profile=profile, region=region)  # submit resolves flag > spec > env > profile
        try:
            result = submit(spec, clients, dry_run=dry_run, skip_role_check=skip_role_check,
                            warn=lambda m: click.echo(f"warning: {m}", err=True))
        except LauncherError:
            if output == "json" and results:  # the jobs already started must still be reported
                emit_json([clean_data(r.as_dict()) for r in results])
            raise
        results.append(result)
        if output == "json":
            continue
        calls = ", ".join(result.aws_calls)
        if dry_run:
            click.echo(f"dry run: would start {result.job_name} in {result.region} "
                       f"(source {result.source_uri}); nothing was written")
        else:
            click.echo(f"started {result.job_name} in {result.region}")
            click.echo(f"  source:  {result.source_uri} ({'uploaded' if result.uploaded else 'already uploaded'})")
            click.echo(f"  console: {result.console_url}")
            click.echo(f"  follow:  smp-launch logs {result.job_name}")
        if result.role:
            click.echo(f"  role:    {result.role['role_arn'] or result.role['role']}: {result.role['verdict']}")
        click.echo(f"  AWS calls ({len(result.aws_calls)}): {calls}")
        for note in result.notes:
            click.echo(f"warning: {note}", err=True)
    if output == "json":
        data = [clean_data(r.as_dict()) for r in results]
        emit_json(data[0] if len(data) == 1 else data)
        for note in (n for r in results for n in r.notes):
            click.echo(f"warning: {note}", err=True)
    if wait:
        from launcher.tail import follow

        clients = Clients(profile=profile, region=results[0].region)
        return follow(results[0].job_name, clients, as_json=output == "json").exit_code
    return EXIT_OK


def render_spec(spec: str, overrides: Sequence[str], out_dir: str, output: str) -> int:
    """Write the source dir submit would upload; exit 2 when an advisory of severity error fires."""
    import click

    from launcher.plan import build_plan
    from launcher.render import render_source, write_source_dir
    from launcher.spec import load_spec

    loaded = load_spec(spec, overrides)
    plan = build_plan(loaded)
    paths = write_source_dir(render_source(loaded, plan), out_dir)
    if output == "json":
        emit_json({"spec_file": spec, "directory": out_dir, "files": [p.name for p in paths]})
    else:
        click.echo(f"rendered {len(paths)} files into {out_dir}: {', '.join(p.name for p in paths)}")
    errors = [a for a in plan.advisories if a["severity"] == "error"]
    for a in errors:
        click.echo(f"error: {a['rule']} {a['message']}", err=True)
    return EXIT_INVALID if errors else EXIT_OK


def submit_local(specs: Sequence[str], overrides: Sequence[str], *, tiny: bool, nproc: int,
                 max_steps: int | None, output: str) -> int:
    """The local CPU run of one spec; in json mode the script's lines go to stderr and the report to stdout."""
    import click

    from launcher.local_run import changes_summary, run_local

    if len(specs) != 1:
        raise UsageError("--local runs one spec at a time")
    as_json = output == "json"
    result = run_local(specs[0], overrides, tiny=tiny, nproc=nproc, max_steps=max_steps,
                       echo=lambda line: click.echo(line, err=as_json))
    if as_json:
        emit_json(result.as_dict())
        return result.exit_code
    click.echo(f"\nLocal run of {result.spec_file}: {result.nproc} processes, CPU, gloo"
               f"{', tiny model' if result.tiny else ''}")
    if result.local_changes:
        click.echo("  changed for this machine: " + changes_summary(result.local_changes))
    for note in result.notes:
        click.echo(f"  note: {note}")
    for check in result.checks:
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[check.ok]
        click.echo(f"  {verdict} {check.name}: {check.detail}")
    for item in result.not_exercised:
        click.echo(f"  NOT EXERCISED {item['feature']}: {item['reason']}")
    click.echo("  wall time: " + ", ".join(f"run {i} {r.wall_s:.1f} s (exit {r.exit_code})"
                                          for i, r in enumerate(result.runs, 1)))
    return result.exit_code
