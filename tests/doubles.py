"""What a test double needs so that code paging through boto3's paginators calls the double's own method."""
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any


def one_page_paginator(method: Callable[..., dict[str, Any]]) -> SimpleNamespace:
    """`client.get_paginator(name)` for a double whose `method` answers in one page (called lazily, as boto3 does)."""

    def paginate(PaginationConfig: dict | None = None, **params: Any) -> Iterator[dict[str, Any]]:  # noqa: N803
        yield method(**params)

    return SimpleNamespace(paginate=paginate)
