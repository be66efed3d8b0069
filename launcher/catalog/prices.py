"""What an instance-hour of SageMaker training costs, and where that figure came from.

Planning makes no AWS call, so prices come from files: the cache that `submit` (or `prices --refresh`)
writes from the AWS Price List API under the state folder, else the snapshot shipped inside the package.
Each figure carries its source and date; a figure neither holds is None, never a guess. Where the job's region
has no figure, `regional_price` gives the same type's figure from another region, labelled with that region.

The Price List API: https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html
(service code AmazonSageMaker, product family "ML Instance", `platoinstancetype` Training or SpotTraining).
"""
from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from launcher.core.state import state_dir

CACHE_FILE = "prices.json"
SNAPSHOT_FILE = "prices_snapshot.json"
CACHE_VERSION = 1
MAX_CACHE_BYTES = 1 << 20  # a cache for every instance type in every region is far below this
CACHE_SOURCE = "AWS Price List API"


@dataclass(frozen=True)
class Price:
    usd_per_hour: float
    source: str  # where the figure came from, in words a person can check
    date: str    # ISO date the figure was read


def hourly_price(instance_type: str, region: str, *, spot: bool,
                 env: Mapping[str, str] | None = None) -> Price | None:
    """The hourly price of one `instance_type` training instance in `region` (spot or on-demand), or None.

    The fetched cache wins over the shipped snapshot; a cache that is missing, unreadable, too big or not
    a regular file is passed over (the snapshot still answers), so a damaged file never stops a plan.
    """
    key = price_key(instance_type, region, spot=spot)
    cached = _cache_entries(cache_path(env)).get(key)
    if cached is not None:
        return cached
    return _snapshot_entries().get(key)


# Where a region has no figure of its own, another region's figure for the same type and kind is used, labelled
# with that region: the Price List's home region first (its figures are the ones most often quoted), then the
# other US regions, then the rest in name order.
BORROW_ORDER = ("us-east-1", "us-east-2", "us-west-2", "us-west-1")


@dataclass(frozen=True)
class RegionalPrice:
    """A figure and the region it is for: `region` differs from the job's where the job's region has none."""

    price: Price
    region: str
    wanted: str  # the region the job runs in

    @property
    def borrowed(self) -> bool:
        return self.region != self.wanted

    @property
    def source(self) -> str:
        """The figure's source, saying so when it is another region's."""
        if not self.borrowed:
            return self.price.source
        return (f"{self.region}'s figure ({self.wanted} has none in the price cache or the shipped snapshot): "
                f"{self.price.source}")


def regional_price(instance_type: str, region: str, *, spot: bool,
                   env: Mapping[str, str] | None = None) -> RegionalPrice | None:
    """The region's own figure, else the same type's figure (same kind) from another region, labelled; None
    only where no region has one. The cache wins over the snapshot in each region; the region's own fetched or
    shipped figure always wins over another region's."""
    own = hourly_price(instance_type, region, spot=spot, env=env)
    if own is not None:
        return RegionalPrice(own, region, region)
    kind = "spot" if spot else "on-demand"
    found: dict[str, Price] = {}
    for entries in (_snapshot_entries(), _cache_entries(cache_path(env))):  # the cache last: it wins
        for key, price in entries.items():
            itype, where, k = key.split("|")
            if itype == instance_type and k == kind:
                found[where] = price
    if not found:
        return None
    order = sorted(found, key=lambda r: (BORROW_ORDER.index(r) if r in BORROW_ORDER else len(BORROW_ORDER), r))
    return RegionalPrice(found[order[0]], order[0], region)


def price_key(instance_type: str, region: str, *, spot: bool) -> str:
    return f"{instance_type}|{region}|{'spot' if spot else 'on-demand'}"


def cache_path(env: Mapping[str, str] | None = None) -> Path:
    return state_dir(env) / CACHE_FILE


def read_cache(env: Mapping[str, str] | None = None) -> dict[str, Price]:
    """Every cached figure, by `price_key` (empty when there is no usable cache)."""
    return dict(_cache_entries(cache_path(env)))


def snapshot_prices() -> dict[str, Price]:
    """Every figure of the shipped snapshot, by `price_key`."""
    return dict(_snapshot_entries())


def snapshot_date() -> str:
    return str(_snapshot_document().get("date", ""))


def _cache_entries(path: Path) -> dict[str, Price]:
    text = _bounded_read(path)
    if text is None:
        return {}
    try:
        document = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(document, dict) or document.get("version") != CACHE_VERSION:
        return {}
    return _entries(document.get("prices"), default_source=CACHE_SOURCE)


def _bounded_read(path: Path) -> str | None:
    """The file's text, or None unless it is a regular file of at most MAX_CACHE_BYTES in UTF-8."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CACHE_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_CACHE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_CACHE_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _entries(rows: Any, *, default_source: str) -> dict[str, Price]:
    """Well-formed rows only: a row with a missing field or a price that is not a positive number is skipped."""
    found: dict[str, Price] = {}
    if not isinstance(rows, list):
        return found
    for row in rows:
        if not isinstance(row, dict):
            continue
        itype, region, spot = row.get("instance_type"), row.get("region"), row.get("spot")
        usd, date = row.get("usd_per_hour"), row.get("date")
        source = row.get("source", default_source)
        if not (isinstance(itype, str) and isinstance(region, str) and isinstance(spot, bool)):
            continue
        if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not math.isfinite(usd) or usd <= 0:
            continue
        if not isinstance(date, str) or not isinstance(source, str):
            continue
        found[price_key(itype, region, spot=spot)] = Price(float(usd), source, date)
    return found


@lru_cache(maxsize=1)
def _snapshot_document() -> dict[str, Any]:
    text = resources.files("launcher.catalog").joinpath(SNAPSHOT_FILE).read_text(encoding="utf-8")
    document = json.loads(text)
    return document if isinstance(document, dict) else {}


@lru_cache(maxsize=1)
def _snapshot_entries() -> dict[str, Price]:
    return _entries(_snapshot_document().get("prices"), default_source="shipped snapshot")


def write_cache(prices: Mapping[str, Price], env: Mapping[str, str] | None = None) -> Path:
    """Merge fetched figures (by `price_key`) into the cache, atomically, and return its path.

    Figures already cached for other types or regions stay; a damaged cache is replaced.
    """
    import tempfile

    merged = {**_cache_entries(cache_path(env)), **prices}
    rows = []
    for key, price in sorted(merged.items()):
        itype, region, kind = key.split("|")
        rows.append({"instance_type": itype, "region": region, "spot": kind == "spot",
                     "usd_per_hour": price.usd_per_hour, "source": price.source, "date": price.date})
    folder = state_dir(env)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".prices-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"version": CACHE_VERSION, "prices": rows}, f, indent=1)
    os.replace(tmp, folder / CACHE_FILE)
    return folder / CACHE_FILE


@dataclass(frozen=True)
class PriceRow:
    """One instance type's training price in one region, on-demand or spot; `price` None: no source has one."""

    instance_type: str
    region: str
    spot: bool
    price: Price | None
    price_region: str | None = None  # the region the figure is for: another one's where `region` has none

    def to_dict(self) -> dict[str, Any]:
        p = self.price
        return {"instance_type": self.instance_type, "region": self.region, "spot": self.spot,
                "usd_per_hour": p.usd_per_hour if p else None, "source": p.source if p else None,
                "date": p.date if p else None, "price_region": self.price_region}


@dataclass(frozen=True)
class PriceReport:
    """What `prices` shows: each figure with its source, and (after a refresh) what could not be fetched."""

    rows: tuple[PriceRow, ...]
    refreshed: bool = False
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"prices": [r.to_dict() for r in self.rows], "refreshed": self.refreshed, "notes": list(self.notes)}


def price_table(instance_types: Iterable[str], region: str,
                env: Mapping[str, str] | None = None) -> tuple[PriceRow, ...]:
    """On-demand and spot figures for each type, from the cache else the snapshot (no AWS call); where the region
    has none, another region's figure, its source saying whose (as plans price)."""
    rows = []
    for t in dict.fromkeys(instance_types):
        for spot in (False, True):
            found = regional_price(t, region, spot=spot, env=env)
            price = None if found is None else Price(found.price.usd_per_hour, found.source, found.price.date)
            rows.append(PriceRow(t, region, spot, price, found.region if found else None))
    return tuple(rows)
