"""Fetching SageMaker training prices from the AWS Price List API into the cache plans read.

GetProducts (https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html)
answers with `PriceList`: a list of JSON strings, one per product, each with `product.attributes` and
`terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD`. SageMaker's products are filtered by
`productFamily` "ML Instance", `regionCode`, `instanceName` and `platoinstancetype` ("Training", or
"SpotTraining" for managed spot). Only `submit`, its dry run and `prices --refresh` call this: a plan reads
the cache (launcher.catalog.prices) and never AWS.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from launcher.catalog.prices import CACHE_SOURCE, Price, price_key, read_cache, write_cache
from launcher.core.aws import Clients, explain
from launcher.core.errors import LauncherError
from launcher.core.frozen import freeze
from launcher.core.sanitize import clean

SERVICE_CODE = "AmazonSageMaker"
USAGE = {False: "Training", True: "SpotTraining"}
MAX_PAGES = 5  # one instance type in one region is one or two products; more pages means the filter did not hold


@dataclass(frozen=True)
class Fetched:
    """What one refresh learned: the figures found (by `price_key`), what it could not tell, where it wrote."""

    prices: Mapping[str, Price]
    missing: tuple[str, ...] = ()  # keys the Price List has no product for
    notes: tuple[str, ...] = ()  # one line each for what could not be fetched
    cache: str | None = None  # the cache file written (None: nothing new to write)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prices", freeze(dict(self.prices)))
        for name in ("missing", "notes"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def to_dict(self) -> dict[str, Any]:
        return {"prices": {k: {"usd_per_hour": p.usd_per_hour, "source": p.source, "date": p.date}
                           for k, p in sorted(self.prices.items())},
                "missing": list(self.missing), "notes": list(self.notes), "cache": self.cache}


def brief(text: str, limit: int = 200) -> str:
    """An AWS error in a few words: an HTML error page (a proxy's, an emulator's) is named, not quoted."""
    lower = text.lower()
    cut = min((i for i in (lower.find("<!doctype"), lower.find("<html")) if i >= 0), default=-1)
    if cut >= 0:
        text = text[:cut].rstrip(" :") + " (an HTML error page)"
    return clean(text, limit)


def filters(instance_type: str, region: str, *, spot: bool) -> list[dict[str, str]]:
    """GetProducts' filters for one instance type's training price in one region."""
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in (
        ("productFamily", "ML Instance"), ("regionCode", region), ("instanceName", instance_type),
        ("platoinstancetype", USAGE[spot]))]


def price_of(products: Iterable[Any], instance_type: str, *, today: str) -> Price | None:
    """The hourly USD price among `products` (PriceList items: JSON strings, or dicts), or None.

    A product for another instance (a filter the service ignored) or without an hourly USD figure is passed
    over; of several that qualify, the highest is kept, so a cost is never understated."""
    best: Price | None = None
    for item in products:
        try:
            product = json.loads(item) if isinstance(item, (str, bytes)) else item
            attributes = product["product"]["attributes"]
            terms = product["terms"]["OnDemand"]
        except (ValueError, KeyError, TypeError):
            continue
        name = attributes.get("instanceName") or str(attributes.get("instanceType", "")).split("-")[0]
        if name != instance_type:
            continue
        usage = clean(attributes.get("usagetype", ""), 80)
        for offer in terms.values() if isinstance(terms, dict) else ():
            for dim in (offer.get("priceDimensions") or {}).values():
                try:
                    usd = float(dim["pricePerUnit"]["USD"])
                except (KeyError, TypeError, ValueError):
                    continue
                if str(dim.get("unit", "")).lower() not in ("hrs", "hour", "hours") or not usd > 0:
                    continue
                effective = clean(str(offer.get("effectiveDate", ""))[:10], 10)
                source = f"{CACHE_SOURCE} ({usage or 'SageMaker training'}" + (
                    f", effective {effective})" if effective else ")")
                if best is None or usd > best.usd_per_hour:
                    best = Price(usd, source, today)
    return best


def fetch_prices(clients: Clients, instance_types: Iterable[str], region: str, *, spots: Iterable[bool] = (False, True),
                 env: Mapping[str, str] | None = None, write: bool = True, now: datetime | None = None,
                 force: bool = False) -> Fetched:
    """Ask the Price List API for each type's on-demand and spot training price in `region`; cache what it says.

    A figure the cache already holds from the Price List today is not asked again unless `force` (a sweep's
    submits ask once a day). Never raises for AWS: what could not be fetched is a note (the plan keeps the
    figure it had)."""
    today = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d")
    fresh = {} if force else {k: p for k, p in read_cache(env).items()
                              if p.date == today and p.source.startswith(CACHE_SOURCE)}
    found: dict[str, Price] = {}
    missing: list[str] = []
    notes: list[str] = []
    for itype in dict.fromkeys(instance_types):
        for spot in dict.fromkeys(spots):
            key = price_key(itype, region, spot=spot)
            if key in fresh:
                found[key] = fresh[key]
                continue
            try:
                products = _products(clients, filters(itype, region, spot=spot))
            except LauncherError as err:
                notes.append(f"prices: cannot tell ({brief(str(err))}); plans keep the figures they had")
                return _done(found, missing, notes, env, write)
            price = price_of(products, itype, today=today)
            if price is None:
                missing.append(key)
            else:
                found[key] = price
    return _done(found, missing, notes, env, write)


def _done(found: dict[str, Price], missing: list[str], notes: list[str], env: Mapping[str, str] | None,
          write: bool) -> Fetched:
    cache = None
    if write and found:
        try:
            cache = str(write_cache(found, env if env is not None else None))
        except OSError as exc:
            notes.append(f"prices: fetched, but the cache could not be written ({exc.strerror or type(exc).__name__})")
    return Fetched(found, tuple(missing), tuple(notes), cache)


def _products(clients: Clients, query: list[dict[str, str]]) -> list[Any]:
    """Every PriceList item GetProducts returns for `query` (NextToken paging, at most MAX_PAGES pages)."""
    client = clients.pricing
    out: list[Any] = []
    token = None
    for _ in range(MAX_PAGES):
        params: dict[str, Any] = {"ServiceCode": SERVICE_CODE, "Filters": query, "FormatVersion": "aws_v1",
                                  "MaxResults": 100}
        if token:
            params["NextToken"] = token
        try:
            page = client.get_products(**params)
        except Exception as exc:
            raise explain(exc, "reading prices (pricing GetProducts)") from None
        out += list(page.get("PriceList") or [])
        token = page.get("NextToken")
        if not token:
            break
    return out
