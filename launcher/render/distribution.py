"""The SMP v2 `distribution` argument, rendered from `distribution.json.j2`, parsed as JSON and checked against
SMP v2's parameters before a plan carries it (https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-v2-reference.html).

The shape is what the SageMaker SDK v2 turns into an SMP v2 job: `torch_distributed` enabled (SMP v2 runs under
torchrun), and `smdistributed` holding `modelparallel` alone (the SDK refuses a second key) whose `enabled` is
the boolean true (the SDK forwards `parameters` only on an identity check). The parameters are the nine of the
reference, each of its type and range, the ranges being the spec's own (launcher.spec.models.SmpSpec). The
parallel degrees must be the spec's: the rules, the memory model and the entry script were all decided from
those, so a template that changed one would launch a job that none of them describe.
"""
from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from launcher.catalog.smp import SMP_PARAMETERS
from launcher.render.templates import TemplateError, TemplateSet, render
from launcher.spec.models import SmpSpec

TEMPLATE = "distribution.json.j2"
# The SMP v2 parameters and SMP's default for each (None: SMP has none, the parameter is left out).
PARAMETERS: Mapping[str, Any] = {name: default for name, (default, _) in SMP_PARAMETERS.items()}
DEGREES = ("hybrid_shard_degree", "tensor_parallel_degree", "context_parallel_degree", "expert_parallel_degree")
PARAMETERS_PATH = "smdistributed.modelparallel.parameters"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(f"key {twice[0]!r} is written twice")
    return dict(pairs)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse(text: str) -> Any:
    """The rendered text as JSON: strict (no NaN, no key written twice)."""
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_constant)


def _exactly(value: Any, keys: set[str], where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where} must be an object with {', '.join(sorted(keys))}, not {json.dumps(value)[:60]}"
    extra, missing = sorted(set(value) - keys), sorted(keys - set(value))
    if missing:
        return f"{where} has no {missing[0]}"
    if extra:
        return f"{where} has {extra[0]!r}, which smp-launch's SMP v2 distribution does not take"
    return None


def _parameter_problem(params: dict[str, Any], spec: SmpSpec) -> str | None:
    for key, value in params.items():
        if key not in PARAMETERS:
            close = difflib.get_close_matches(key, list(PARAMETERS), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            return f"{PARAMETERS_PATH}.{key} is not an SMP v2 parameter{hint} (they are: {', '.join(PARAMETERS)})"
        if value is None:
            return f"{PARAMETERS_PATH}.{key} is null: leave it out for SMP's default"
    try:
        SmpSpec.model_validate(params)  # the types and ranges the spec's own smp section has
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        got = json.dumps(err.get("input"))
        return f"{PARAMETERS_PATH}.{where}: {err['msg'][0].lower()}{err['msg'][1:]} (got {got})"
    for key in DEGREES:
        value, wanted = params.get(key, PARAMETERS[key]), getattr(spec, key)
        if value != wanted:
            given = f"{key} {value}" if key in params else f"{key} left out (SMP's default {value})"
            return (f"{PARAMETERS_PATH}: {given} is not the spec's smp.{key} ({wanted}); the plan's checks, "
                    "memory estimate and entry script follow the spec, so set it there")
    return None


def refusal(data: Any, spec: SmpSpec) -> str | None:
    """Why SMP v2 (or the SDK that submits it) would refuse this distribution, or None."""
    problem = _exactly(data, {"torch_distributed", "smdistributed"}, "the distribution")
    if problem:
        return problem
    torch_distributed = data["torch_distributed"]
    if not (isinstance(torch_distributed, dict) and torch_distributed == {"enabled": True}
            and torch_distributed["enabled"] is True):
        return "torch_distributed must be {\"enabled\": true}: SMP v2 runs under torchrun"
    problem = _exactly(data["smdistributed"], {"modelparallel"}, "smdistributed")
    if problem:
        return problem
    modelparallel = data["smdistributed"]["modelparallel"]
    problem = _exactly(modelparallel, {"enabled", "parameters"}, "smdistributed.modelparallel")
    if problem:
        return problem
    if modelparallel["enabled"] is not True:
        return ("smdistributed.modelparallel.enabled must be the boolean true: the SDK passes the parameters "
                f"on only then (got {json.dumps(modelparallel['enabled'])})")
    if not isinstance(modelparallel["parameters"], dict):
        return f"{PARAMETERS_PATH} must be an object of SMP v2 parameters"
    return _parameter_problem(modelparallel["parameters"], spec)


def render_distribution(templates: TemplateSet, context: dict[str, Any], spec: SmpSpec) -> dict[str, Any]:
    """The `distribution` dict as the Estimator gets it, from the template set's distribution.json.j2; a
    template whose output is not JSON, or is a distribution SMP v2 would refuse, is a TemplateError."""
    text = render(templates, TEMPLATE, context)
    template = templates[TEMPLATE]
    try:
        data = parse(text)
    except json.JSONDecodeError as exc:
        raise TemplateError(template.shown, f"renders text that is not JSON: {exc.msg} (rendered line {exc.lineno}, "
                                            f"column {exc.colno})") from None
    except ValueError as exc:
        raise TemplateError(template.shown, f"renders JSON smp-launch refuses: {exc}") from None
    problem = refusal(data, spec)
    if problem:
        raise TemplateError(template.shown, f"renders a distribution SMP v2 would refuse: {problem}")
    return data
