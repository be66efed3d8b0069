"""The AWS Price List API's GetProducts for SageMaker, which moto does not have at all.

moto's server answers a `pricing` call with a 500 (no backend for the host) and `mock_aws` with a 404, so this
module answers the `AWSPriceListService.GetProducts` target itself, in both modes: the server's dispatcher and
the in-process stubber look at the X-Amz-Target header before moto does. Products are shaped as GetProducts
returns them (https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html):
`PriceList` is a list of JSON strings, each with `product.attributes` and `terms.OnDemand`.

    emulator.pricing.set_price("ml.p4d.24xlarge", "us-west-2", 37.688)            # on-demand training
    emulator.pricing.set_price("ml.p4d.24xlarge", "us-west-2", 12.5, spot=True)   # SpotTraining
    emulator.pricing.plain(True)  # answer as moto does (no pricing service) until plain(False)
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from emulator import core

TARGET = "AWSPriceListService."
_PRICES: dict[tuple[str, str, bool], float] = {}
_STATE = {"plain": False, "calls": 0}
PUBLICATION = "2026-11-01T00:00:00Z"


def set_price(instance_type: str, region: str, usd_per_hour: float | None, *, spot: bool = False) -> None:
    """Publish (or, with None, withdraw) a SageMaker training price."""
    core.install()
    with core.lock():
        if usd_per_hour is None:
            _PRICES.pop((instance_type, region, spot), None)
        else:
            _PRICES[(instance_type, region, spot)] = float(usd_per_hour)


def publish_demo_prices() -> list[tuple[str, str]]:
    """Publish, in every region an SMP v2 image is served from, each figure the shipped snapshot holds for its
    instance type (on demand; the snapshot's own region's figure), so the demo's `prices --refresh` fetches a
    figure for each region. Only types the snapshot prices are published: no figure is made up. Returns the
    (instance type, region) pairs published."""
    from launcher.catalog.prices import snapshot_prices
    from launcher.catalog.smp import SMP_IMAGE_REGIONS

    published = []
    for key, price in sorted(snapshot_prices().items()):
        itype, _, kind = key.split("|")
        if kind != "on-demand":
            continue
        for region in SMP_IMAGE_REGIONS:
            set_price(itype, region, price.usd_per_hour)
            published.append((itype, region))
    return published


def plain(on: bool) -> None:
    """With True, answer pricing calls as a plain moto server does (an error); False restores GetProducts."""
    core.install()
    _STATE["plain"] = bool(on)


def calls() -> int:
    """GetProducts calls answered since the last `reset()`."""
    return int(_STATE["calls"])


def reset() -> None:
    with core.lock():
        _PRICES.clear()
        _STATE.update(plain=False, calls=0)


def _product(instance_type: str, region: str, spot: bool, usd: float) -> dict[str, Any]:
    usage = "SpotTraining" if spot else "Training"
    sku = hashlib.sha256(f"{instance_type}|{region}|{usage}".encode()).hexdigest()[:16].upper()
    attributes = {"servicecode": "AmazonSageMaker", "productFamily": "ML Instance", "regionCode": region,
                  "instanceName": instance_type, "instanceType": instance_type, "platoinstancetype": usage,
                  "component": usage, "usagetype": f"{region}-{'Spot-' if spot else ''}Train:{instance_type}"}
    offer = f"{sku}.JRTCKXETXF"
    return {"product": {"productFamily": "ML Instance", "attributes": attributes, "sku": sku},
            "serviceCode": "AmazonSageMaker", "publicationDate": PUBLICATION, "version": "20261101000000",
            "terms": {"OnDemand": {offer: {
                "sku": sku, "offerTermCode": "JRTCKXETXF", "effectiveDate": "2026-11-01T00:00:00Z",
                "termAttributes": {},
                "priceDimensions": {f"{offer}.6YS6EN2CT7": {
                    "unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": [],
                    "rateCode": f"{offer}.6YS6EN2CT7", "pricePerUnit": {"USD": f"{usd:.10f}"},
                    "description": f"${usd} per hour for {usage} {instance_type} in {region}"}}}}}}


def get_products(params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) for a GetProducts request: TERM_MATCH filters over the products' attributes, paged."""
    _STATE["calls"] = calls() + 1
    if params.get("ServiceCode") != "AmazonSageMaker":
        return 200, {"FormatVersion": "aws_v1", "PriceList": []}
    with core.lock():
        products = [_product(t, r, s, usd) for (t, r, s), usd in sorted(_PRICES.items())]
    for f in params.get("Filters") or []:
        field, value = f.get("Field"), f.get("Value")
        products = [p for p in products if field == "productFamily" and p["product"]["productFamily"] == value
                    or p["product"]["attributes"].get(field) == value]
    start = int(params.get("NextToken") or 0)
    size = int(params.get("MaxResults") or 100)
    page = products[start:start + size]
    body: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(p) for p in page]}
    if start + size < len(products):
        body["NextToken"] = str(start + size)
    return 200, body


def _answer(target: str, body: bytes | str | None) -> tuple[int, dict[str, str], str] | None:
    if not target.startswith(TARGET) or _STATE["plain"]:
        return None
    operation = target[len(TARGET):]
    try:
        params = json.loads(body or b"{}")
    except ValueError:
        params = {}
    headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": "emulated-pricing"}
    if operation != "GetProducts":
        return 400, headers, json.dumps({"__type": "InvalidParameterException",
                                         "Message": f"{operation} is not emulated"})
    status, out = get_products(params)
    return status, headers, json.dumps(out)


def _apply() -> None:
    from moto.core.botocore_stubber import BotocoreStubber
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original_process = BotocoreStubber.process_request

    def process_request(self: Any, request: Any) -> Any:
        target = request.headers.get("X-Amz-Target") or ""
        if isinstance(target, bytes):
            target = target.decode()
        answered = _answer(target, request.body)
        return answered if answered is not None else original_process(self, request)

    original_call = DomainDispatcherApplication.__call__

    def dispatch(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        target = environ.get("HTTP_X_AMZ_TARGET") or ""
        if target.startswith(TARGET) and not _STATE["plain"]:
            size = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(size) if size else b""
            answered = _answer(target, body)
            if answered is not None:
                status, headers, text = answered
                data = text.encode()
                start_response(f"{status} {'OK' if status == 200 else 'Bad Request'}",
                               [*headers.items(), ("Content-Length", str(len(data)))])
                return [data]
        return original_call(self, environ, start_response)

    BotocoreStubber.process_request = process_request
    DomainDispatcherApplication.__call__ = dispatch


core.register_patch("pricing:get-products", _apply)
core.register_reset(reset)
