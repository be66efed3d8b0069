"""SageMaker Search over training jobs, as the service answers it: what moto's lacks.

moto's Search stops at the first tag filter, knows only Equals, NotEquals and Contains, ignores
SubExpressions, the expression's Operator, SortBy and paging. Here, for `Resource=TrainingJob`:
filters on any top-level property or `Tags.<key>` with Equals, NotEquals, In (comma-separated
values, text only), Contains, Exists, NotExists and the four comparisons (numbers and times);
`Filters`, `NestedFilters`-free `SubExpressions` and the `And`/`Or` operator; `SortBy`/`SortOrder`;
`MaxResults` (1-100, default 10) with a `NextToken`. Each record is the job as DescribeTrainingJob
returns it, with its `Tags`
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_Search.html,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_Filter.html,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_SearchExpression.html).
`calls` counts the Search requests answered, for tests that bound them.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from emulator import core

calls = {"Search": 0}
_COMPARE = {"GreaterThan": lambda a, b: a > b, "GreaterThanOrEqualTo": lambda a, b: a >= b,
            "LessThan": lambda a, b: a < b, "LessThanOrEqualTo": lambda a, b: a <= b}


class SearchInvalid(ValueError):
    """A search expression the service would refuse (a ValidationException)."""


def _value(record: dict[str, Any], tags: dict[str, str], name: str) -> Any:
    if name.startswith("Tags."):
        return tags.get(name[5:])
    value: Any = record
    for part in name.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _as_number(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value)


def _filter(record: dict[str, Any], tags: dict[str, str], f: dict[str, Any]) -> bool:
    name, op, wanted = f["Name"], f.get("Operator", "Equals"), f.get("Value")
    actual = _value(record, tags, name)
    if op == "Exists":
        return actual is not None
    if op == "NotExists":
        return actual is None
    if op == "In":
        if actual is not None and not isinstance(actual, str):
            raise SearchInvalid(f"In is only supported for text properties: {name}")
        return actual is not None and actual in str(wanted).split(",")
    if actual is None:
        return op == "NotEquals"
    if op == "Equals":
        return str(actual) == wanted
    if op == "NotEquals":
        return str(actual) != wanted
    if op == "Contains":
        return str(wanted) in str(actual)
    if op in _COMPARE:
        try:
            return _COMPARE[op](_as_number(actual), _as_number(wanted))
        except (TypeError, ValueError):
            raise SearchInvalid(f"{op} is not supported for text properties: {name}") from None
    raise SearchInvalid(f"unknown operator {op}")


def matches(record: dict[str, Any], tags: dict[str, str], expression: dict[str, Any] | None) -> bool:
    """Whether a record satisfies a SearchExpression (And unless it says Or)."""
    if not expression:
        return True
    results = [_filter(record, tags, f) for f in expression.get("Filters") or []]
    results += [matches(record, tags, sub) for sub in expression.get("SubExpressions") or []]
    if not results:
        return True
    return any(results) if expression.get("Operator") == "Or" else all(results)


def search_training_jobs(backend: Any, params: dict[str, Any]) -> dict[str, Any]:
    """One page of Search over the backend's training jobs."""
    from emulator.sagemaker import refresh

    expression = params.get("SearchExpression")
    for key in ("Filters", "SubExpressions"):
        if len((expression or {}).get(key) or []) > 20:
            raise SearchInvalid(f"SearchExpression.{key} holds at most 20 items")
    for f in (expression or {}).get("Filters") or []:
        if len(str(f.get("Value", ""))) > 1024:
            raise SearchInvalid("a filter's Value is at most 1024 characters")
    found = []
    with core.lock():
        for job in list(backend.training_jobs.values()):
            refresh(job)
            record = dict(job.response_object)
            tags = {t["Key"]: t["Value"] for t in getattr(job, "tags", None) or []}
            record["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
            if matches(record, tags, expression):
                found.append(record)
    sort_by = params.get("SortBy") or "CreationTime"
    found.sort(key=lambda r: (r.get(sort_by) is None, r.get(sort_by) or 0, r.get("TrainingJobName")),
               reverse=params.get("SortOrder") == "Descending")
    size = int(params.get("MaxResults") or 10)
    if not 1 <= size <= 100:
        raise SearchInvalid("MaxResults is from 1 to 100")
    start = int(params.get("NextToken") or 0)
    page = found[start:start + size]
    reply: dict[str, Any] = {"Results": [{"TrainingJob": r} for r in page]}
    if start + size < len(found):
        reply["NextToken"] = str(start + size)
    return reply


def _apply() -> None:
    from moto.core.responses import ActionResult
    from moto.sagemaker import responses
    from moto.sagemaker.exceptions import ValidationError

    original = responses.SageMakerResponse.search

    def search(self: Any) -> Any:
        if self._get_param("Resource") != "TrainingJob":
            return original(self)
        calls["Search"] += 1
        params = {k: self._get_param(k) for k in ("SearchExpression", "SortBy", "SortOrder", "MaxResults",
                                                  "NextToken")}
        try:
            return ActionResult(search_training_jobs(self.sagemaker_backend, params))
        except SearchInvalid as exc:
            raise ValidationError(message=str(exc)) from None

    responses.SageMakerResponse.search = search


core.register_patch("sagemaker:search", _apply)
