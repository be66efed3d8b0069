"""`prices`: what an instance-hour of training costs, and where each figure came from."""
from __future__ import annotations

import click

from launcher.cli.options import OUTPUT, aws_options


@click.command("prices")
@click.argument("instance_types", nargs=-1, metavar="[INSTANCE_TYPE]...")
@click.option("--refresh", is_flag=True,
              help="Ask the AWS Price List API first and cache its answer (submit does this too).")
@OUTPUT
@aws_options
def prices_command(instance_types: tuple[str, ...], refresh: bool, output: str, profile: str | None,
                   region: str | None) -> None:
    """SageMaker training prices per instance-hour, on-demand and spot, each with its source and date.

    Without --refresh no AWS call is made: the figures are those `plan` uses, from the cache a submit or
    a refresh wrote, else the snapshot shipped with smp-launch. A figure no source holds is shown as `-`.
    """
    from launcher.api import prices
    from launcher.cli import present

    report = prices(instance_types, region=region, refresh=refresh, profile=profile)
    for note in report.notes:
        click.echo(present.safe(f"warning: {note}"), err=True)
    if output == "json":
        present.emit_json(present.safe_data(report.to_dict()))
        return
    rows = {(r.instance_type, r.spot): r for r in report.rows}
    region_name = report.rows[0].region if report.rows else region
    t = present.new_table("instance type", "on-demand $/h", "spot $/h", "source", "date",
                          title=f"SageMaker training prices in {region_name}", right=("on-demand $/h", "spot $/h"),
                          fold=("source",))
    for itype in dict.fromkeys(r.instance_type for r in report.rows):
        on_demand, spot = rows[(itype, False)].price, rows[(itype, True)].price
        sources = dict.fromkeys(p.source for p in (on_demand, spot) if p)
        dates = dict.fromkeys(p.date for p in (on_demand, spot) if p)
        t.add_row(itype, f"{on_demand.usd_per_hour:,.3f}" if on_demand else "-",
                  f"{spot.usd_per_hour:,.3f}" if spot else "-", present.styled("; ".join(sources) or "no source"),
                  ", ".join(dates) or "-")
    present.show(present.console(), t)


COMMANDS = (prices_command,)
