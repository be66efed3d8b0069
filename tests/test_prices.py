"""Where a plan's prices come from: the fetched cache, else the shipped snapshot, else nothing."""
import datetime as dt
import json
import os
import re

import pytest

from launcher.catalog import prices
from launcher.catalog.prices import Price, hourly_price, price_key, write_cache
from launcher.catalog.smp import INSTANCES
from launcher.spec.loader import load_spec

# The shipped figure for ml.p4d.24xlarge on demand in us-east-1 (launcher/catalog/prices_snapshot.json).
P4D_EAST = 25.251


def _env(tmp_path):
    return {"XDG_STATE_HOME": str(tmp_path)}


def _write(tmp_path, document):
    path = prices.cache_path(_env(tmp_path))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_the_snapshot_answers_with_its_page_and_date(tmp_path):
    price = hourly_price("ml.p4d.24xlarge", "us-east-1", spot=False, env=_env(tmp_path))
    assert price == Price(P4D_EAST, price.source, "2026-07-27")
    assert price.source.startswith("shipped snapshot: AWS Price List API (Training, US East (N. Virginia))")
    assert "https://github.com/spore-host/truffle/blob/" in price.source
    assert price.date <= prices.snapshot_date()


def test_every_snapshot_row_names_a_public_page_and_a_date():
    rows = json.loads((prices.Path(prices.__file__).parent / prices.SNAPSHOT_FILE).read_text())["prices"]
    assert rows and len(prices.snapshot_prices()) == len(rows), "a malformed snapshot row was dropped"
    for price in prices.snapshot_prices().values():
        assert "https://" in price.source and price.date


@pytest.mark.parametrize("itype,region,spot", [
    ("ml.p4d.24xlarge", "us-east-1", True),      # no spot figure was published in the snapshot
    ("ml.p4d.24xlarge", "mars-north-1", False),
    ("ml.p9.48xlarge", "us-east-1", False),
])
def test_a_figure_no_source_holds_is_none_never_a_guess(tmp_path, itype, region, spot):
    assert hourly_price(itype, region, spot=spot, env=_env(tmp_path)) is None


def test_a_fetched_figure_wins_over_the_snapshot_and_is_merged(tmp_path):
    env = _env(tmp_path)
    fetched = Price(31.5, "AWS Price List API", "2026-11-30")
    write_cache({price_key("ml.p4d.24xlarge", "us-east-1", spot=False): fetched}, env)
    spot = Price(12.25, "AWS Price List API", "2026-12-01")
    write_cache({price_key("ml.p5.48xlarge", "us-west-2", spot=True): spot}, env)
    assert hourly_price("ml.p4d.24xlarge", "us-east-1", spot=False, env=env) == fetched
    assert hourly_price("ml.p5.48xlarge", "us-west-2", spot=True, env=env) == spot
    assert hourly_price("ml.p5.48xlarge", "us-west-2", spot=False, env=env) is None
    assert [p.name for p in prices.cache_path(env).parent.iterdir()] == ["prices.json"], "a temporary file is left"


@pytest.mark.parametrize("document", [
    "{not json",
    '["a list"]',
    {"version": 99, "prices": []},
    {"version": 1, "prices": "many"},
    {"version": 1, "prices": [{"instance_type": "ml.p4d.24xlarge", "region": "us-east-1", "spot": False,
                               "usd_per_hour": "cheap", "date": "2026-11-30"}]},
    {"version": 1, "prices": [{"instance_type": "ml.p4d.24xlarge", "region": "us-east-1", "spot": False,
                               "usd_per_hour": -3, "date": "2026-11-30"}]},
    {"version": 1, "prices": [{"instance_type": "ml.p4d.24xlarge", "region": "us-east-1", "spot": "no",
                               "usd_per_hour": 3, "date": "2026-11-30"}]},
])
def test_a_damaged_cache_falls_back_to_the_snapshot(tmp_path, document):
    _write(tmp_path, document)
    price = hourly_price("ml.p4d.24xlarge", "us-east-1", spot=False, env=_env(tmp_path))
    assert price is not None and price.source.startswith("shipped snapshot")
    write_cache({}, _env(tmp_path))  # a damaged cache is replaced by a good one
    assert json.loads(prices.cache_path(_env(tmp_path)).read_text()) == {"version": 1, "prices": []}


def test_an_oversized_cache_is_not_read(tmp_path):
    row = {"instance_type": "ml.p4d.24xlarge", "region": "us-east-1", "spot": False, "usd_per_hour": 1.0,
           "date": "2026-11-30", "source": "x" * (prices.MAX_CACHE_BYTES + 10)}
    _write(tmp_path, {"version": 1, "prices": [row]})
    assert hourly_price("ml.p4d.24xlarge", "us-east-1", spot=False, env=_env(tmp_path)).usd_per_hour == P4D_EAST


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_cache_that_is_not_a_regular_file_is_not_opened_for_reading(tmp_path):
    path = prices.cache_path(_env(tmp_path))
    path.parent.mkdir(parents=True)
    os.mkfifo(path)  # reading a FIFO with no writer would block forever
    assert hourly_price("ml.p4d.24xlarge", "us-east-1", spot=False, env=_env(tmp_path)).usd_per_hour == P4D_EAST


def test_a_symlinked_cache_is_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"version": 1, "prices": [
        {"instance_type": "ml.p4d.24xlarge", "region": "us-east-1", "spot": False, "usd_per_hour": 1.0,
         "date": "2026-11-30"}]}))
    path = prices.cache_path(_env(tmp_path))
    path.parent.mkdir(parents=True)
    path.symlink_to(elsewhere)
    assert hourly_price("ml.p4d.24xlarge", "us-east-1", spot=False, env=_env(tmp_path)).usd_per_hour == P4D_EAST


def test_a_cached_row_without_a_source_says_it_came_from_the_price_list(tmp_path):
    _write(tmp_path, {"version": 1, "prices": [
        {"instance_type": "ml.p5.48xlarge", "region": "us-east-1", "spot": False, "usd_per_hour": 50,
         "date": "2026-11-30"}]})
    assert hourly_price("ml.p5.48xlarge", "us-east-1", spot=False, env=_env(tmp_path)) == Price(
        50.0, prices.CACHE_SOURCE, "2026-11-30")


# -- the shipped snapshot: every figure traceable, every gap named ----------------------------------------------

REPO = prices.Path(__file__).resolve().parent.parent
SNAPSHOT_PATH = prices.Path(prices.__file__).parent / prices.SNAPSHOT_FILE

# The example jobs' instance types and regions (and kinds) that no public source was found to state a
# SageMaker training figure for in that region. A plan of such a job is priced with another region's figure for
# the type, named as such, until `prices --refresh` or a submit fetches the region's own; docs/commands.md#prices
# lists the same gaps.
UNSOURCED = {
    ("ml.p4d.24xlarge", "us-west-2", "on-demand"),
    ("ml.p4d.24xlarge", "us-west-2", "spot"),
}


def _https_urls(text):
    return re.findall(r"https://[A-Za-z0-9.-]+\.[a-z]{2,}(?:/[^\s)]*)?", text)


def test_every_snapshot_figure_cites_a_url_and_a_real_date():
    document = json.loads(SNAPSHOT_PATH.read_text(encoding="utf-8"))
    shipped = dt.date.fromisoformat(document["date"])
    keys = set()
    for row in document["prices"]:
        where = f"{row.get('instance_type')} {row.get('region')} spot={row.get('spot')}"
        assert row["instance_type"] in INSTANCES, f"{where}: not an instance type SMP v2 runs on"
        assert isinstance(row["spot"], bool) and row["usd_per_hour"] > 0, where
        assert _https_urls(row["source"]), f"{where}: the source names no https page"
        read = dt.date.fromisoformat(row["date"])  # raises on anything but YYYY-MM-DD
        assert read <= shipped, f"{where}: dated after the snapshot itself"
        if "quoted_in" in row:
            assert _https_urls(row["quoted_in"]) == [row["quoted_in"]], f"{where}: quoted_in is one https URL"
        key = price_key(row["instance_type"], row["region"], spot=row["spot"])
        assert key not in keys, f"{where}: two figures for one type, region and kind"
        keys.add(key)
    assert keys == set(prices.snapshot_prices()), "the reader dropped or invented a row"


def _example_jobs():
    found = set()
    for path in sorted((REPO / "jobs").glob("*.yaml")):
        cluster = load_spec(path, env={"SMP_LAUNCH_ROLE": "Example"}).spec.cluster
        for itype in (cluster.instance_types or [cluster.instance_type]):
            found.add((itype, cluster.region))
    return found


def test_the_example_jobs_get_a_shipped_price_or_their_gap_is_named(tmp_path):
    jobs = _example_jobs()
    assert jobs and all(region for _, region in jobs), "every example job names its region"
    for itype, region in sorted(jobs):
        for spot in (False, True):
            kind = "spot" if spot else "on-demand"
            price = hourly_price(itype, region, spot=spot, env=_env(tmp_path))
            if (itype, region, kind) in UNSOURCED:
                assert price is None, f"{itype} {region} {kind} has a figure now: take it off UNSOURCED and the docs"
            else:
                assert price is not None, f"{itype} {region} {kind}: no shipped figure and no named gap"
                assert "https://" in price.source and price.date


def test_every_example_job_plans_with_a_cost_and_its_source(tmp_path):
    from launcher.plan.build import build_plan

    env = {**_env(tmp_path), "SMP_LAUNCH_BUCKET": "example-bucket"}
    for path in sorted((REPO / "jobs").glob("*.yaml")):
        plan = build_plan(load_spec(path, env=env), env=env)
        cost = plan.cost
        assert cost is not None and cost.usd and cost.usd > 0, f"{path.name}: no cost"
        assert "https://" in cost.price_source and cost.price_date and cost.price_region, path.name
        if cost.price_region != plan.region:
            assert cost.price_source.startswith(f"{cost.price_region}'s figure ({plan.region} has none"), path.name


def test_the_docs_list_the_shipped_figures_and_the_named_gaps():
    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    section = text.split("## prices", 1)[1].split("\n## ", 1)[0]
    rows = [tuple(cell.strip() for cell in line.strip("|").split("|"))
            for line in section.splitlines() if line.startswith("| ml.")]
    assert {r for r in rows if len(r) == 3} == UNSOURCED, "docs/commands.md#prices and UNSOURCED name different gaps"
    held = {(*key.split("|"), price.usd_per_hour) for key, price in prices.snapshot_prices().items()}
    listed = {(r[0], r[1], r[2], float(r[3])) for r in rows if len(r) == 4}
    assert listed == held, "docs/commands.md#prices lists other figures than the snapshot holds"


def test_the_prices_command_shows_each_figure_in_its_column_with_its_source_and_date(moto_world, run_cli, tmp_path):
    import emulator

    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    emulator.pricing.set_price("ml.p4d.24xlarge", "us-west-2", 30.0)
    emulator.pricing.set_price("ml.p4d.24xlarge", "us-west-2", 12.5, spot=True)
    try:
        r = run_cli("prices", "ml.p4d.24xlarge", "ml.trn1.32xlarge", "--refresh", "--region", "us-west-2",
                    env={**env, "COLUMNS": "250"})  # wide enough that no source folds onto a second line
    finally:
        emulator.pricing.reset()
    assert (r.code, r.err) == (0, "")
    lines = r.out.splitlines()
    assert lines[0] == "SageMaker training prices in us-west-2"
    assert lines[1].split() == ["instance", "type", "on-demand", "$/h", "spot", "$/h", "source", "date"]
    on_demand, spot = json.loads(run_cli("prices", "ml.p4d.24xlarge", "--region", "us-west-2", "--output", "json",
                                         env=env).out)["prices"]  # from the cache the refresh wrote
    assert lines[2].split()[:3] == ["ml.p4d.24xlarge", "30.000", "12.500"]  # on-demand, then spot
    assert "Spot" not in on_demand["source"] and "Spot" in spot["source"] and on_demand["date"] == spot["date"]
    assert lines[2].endswith(f" {on_demand['source']}; {spot['source']} {on_demand['date']}")
    assert lines[3].split() == ["ml.trn1.32xlarge", "-", "-", "no", "source", "-"]


def test_a_refresh_that_cannot_reach_the_price_list_warns_on_stderr_only(moto_world, run_cli, tmp_path):
    import emulator

    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    emulator.pricing.plain(True)
    try:
        r = run_cli("prices", "ml.p4d.24xlarge", "--refresh", "--region", "eu-west-1", "--output", "json", env=env)
    finally:
        emulator.pricing.reset()
    data = json.loads(r.out)  # stdout stays one JSON document
    assert r.code == 0 and data["refreshed"] is True and len(data["notes"]) == 1
    assert r.err == f"warning: {data['notes'][0]}\n" and "plans keep the figures they had" in r.err


def test_prices_without_any_region_says_where_to_give_one(run_cli, monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    r = run_cli("prices", "ml.p4d.24xlarge")
    assert (r.code, r.out) == (2, "")
    assert r.err.startswith("no AWS region: pass --region, set cluster.region in the spec, AWS_REGION")


@pytest.mark.parametrize("pad,read", [(0, True), (1, False)])
def test_a_cache_of_exactly_the_limit_is_read_and_one_byte_more_is_not(tmp_path, pad, read):
    row = {"instance_type": "ml.p4d.24xlarge", "region": "us-east-1", "spot": False, "usd_per_hour": 1.0,
           "date": "2026-11-30", "source": "a figure from the account's own fetch"}
    text = json.dumps({"version": 1, "prices": [row]})
    path = prices.cache_path(_env(tmp_path))
    path.parent.mkdir(parents=True)
    path.write_text(text + " " * (prices.MAX_CACHE_BYTES - len(text) + pad))
    assert path.stat().st_size == prices.MAX_CACHE_BYTES + pad
    price = hourly_price("ml.p4d.24xlarge", "us-east-1", spot=False, env=_env(tmp_path))
    assert (price.usd_per_hour == 1.0) is read


def test_a_type_without_the_ml_prefix_is_named_in_one_line_cut_at_80_characters(tmp_path):
    from launcher import api
    from launcher.core.errors import ArgumentError

    long = "p4d.24xlarge" + "x" * 100
    with pytest.raises(ArgumentError) as err:
        api.prices(["ml.p4d.24xlarge", long], region="us-east-1", env=_env(tmp_path))
    assert f"{long[:80]!r} is not a SageMaker instance type" in str(err.value)
    assert long[:81] not in str(err.value) and "\n" not in str(err.value)


def test_the_demo_emulator_publishes_a_figure_in_every_region_it_serves(tmp_path):
    """`python -m emulator` publishes the snapshot's figures in each region an SMP image is served from, so the
    demo's `prices --refresh` caches the region's own figure, which then wins over another region's."""
    import emulator
    from emulator import pricing as emulated
    from launcher import api
    from launcher.catalog.smp import SMP_IMAGE_REGIONS
    from launcher.core.aws import Clients

    env = _env(tmp_path)
    with emulator.mocked():
        published = emulated.publish_demo_prices()
        assert {r for _, r in published} == set(SMP_IMAGE_REGIONS)
        report = api.prices(["ml.p4d.24xlarge"], region="eu-west-1", refresh=True, env=env,
                            clients=Clients(region="eu-west-1"))
    row = next(r for r in report.rows if not r.spot)
    assert row.price_region == "eu-west-1" and row.price.usd_per_hour == P4D_EAST
    assert row.price.source.startswith("AWS Price List API") and row.to_dict()["price_region"] == "eu-west-1"
    spot = next(r for r in report.rows if r.spot)
    assert spot.price is None and spot.price_region is None  # no spot figure is published, none is made up
