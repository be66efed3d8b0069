"""A pipeline's parameters: what a team changes between executions, typed, with the specs' values as defaults.

Each step gets InstanceType, InstanceCount, MaxSteps and OutputPath, and one Data<Channel> per S3 data channel
(a cached step keeps its data fixed: see launcher.orchestrate.pipeline). A one-step pipeline names them plainly;
with several steps each name starts with its step's name (`pretrain-MaxSteps`). A value given when an execution
starts is checked here the way a spec is: the step is planned again with the value in place, and a value the
advisor refuses, or one that would change the script or the distribution the step uploaded, is refused before
anything starts.
"""
from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from launcher.catalog.smp import INSTANCES
from launcher.core.errors import UsageError
from launcher.core.frozen import thaw
from launcher.core.sanitize import quoted
from launcher.plan.build import Plan, build_plan
from launcher.plan.bundle import source_files
from launcher.spec.loader import LoadedSpec
from launcher.spec.models import JobSpec

# PipelineParameter's Name: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_Parameter.html
PARAMETER_NAME = re.compile(r"^[A-Za-z0-9\-_]{1,256}$")
MAX_STEPS_ENV = "SMP_LAUNCH_MAX_STEPS"  # the rendered script reads MaxSteps from here (templates/train.py.j2)


@dataclass(frozen=True)
class StepParameter:
    """One pipeline parameter: its name, the step it belongs to, the spec field it stands for, its default."""

    name: str
    step: str
    field: str
    default: str | int
    choices: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The parameter's type as the definition names it."""
        return "Integer" if isinstance(self.default, int) else "String"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "step": self.step, "field": self.field, "type": self.kind,
                               "default": self.default}
        if self.choices:
            out["choices"] = list(self.choices)
        return out


def channel_field(channel: str) -> str:
    """The spec field that names a data channel's S3 prefix."""
    return f"data.{channel}" if channel in ("train", "validation") else f"data.channels.{channel}"


def _camel(channel: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", channel) if part)


def step_parameters(plan: Plan, step: str, *, prefixed: bool) -> tuple[StepParameter, ...]:
    """The parameters of one step, defaults from its plan; InstanceType offers the types its plan holds on."""
    prefix = f"{step}-" if prefixed else ""
    spec = plan.spec
    found = [
        StepParameter(f"{prefix}InstanceType", step, "cluster.instance_type", plan.instance_type,
                      instance_choices(plan)),
        StepParameter(f"{prefix}InstanceCount", step, "cluster.instance_count", plan.instance_count),
        StepParameter(f"{prefix}MaxSteps", step, "training.max_steps", spec.training.max_steps),
        StepParameter(f"{prefix}OutputPath", step, "output.path", spec.output.path.rstrip("/")),
    ]
    if not spec.pipeline.cache:
        found += [StepParameter(f"{prefix}Data{_camel(name)}", step, channel_field(name), uri)
                  for name, uri in plan.channels.items()]
    return tuple(found)


def pipeline_parameters(plans: Sequence[Plan], steps: Sequence[str]) -> tuple[StepParameter, ...]:
    """Every parameter of a pipeline whose steps are `steps` (one per plan, in order)."""
    prefixed = len(plans) > 1
    out: list[StepParameter] = []
    for plan, step in zip(plans, steps, strict=True):
        out += step_parameters(plan, step, prefixed=prefixed)
    return tuple(out)


def instance_choices(plan: Plan) -> tuple[str, ...]:
    """The instance types this step may run on: its own first, then every other SMP v2 type on which the same
    spec plans to the same decisions and distribution with no advisor error (the same script holds)."""
    choices = [plan.instance_type]
    for name in sorted(INSTANCES):
        if name != plan.instance_type and not variant_problems(plan, {"cluster.instance_type": name}):
            choices.append(name)
    return tuple(choices)


def variant_problems(plan: Plan, changes: Mapping[str, Any]) -> list[str]:
    """Why `plan` with `changes` (spec field -> value) cannot run the source it uploaded: a value the spec
    refuses, the advisor's errors, or a change to the rendered script or distribution (empty: it holds).

    MaxSteps and the data channels reach the job at run time (an environment variable, the channels), so they
    are left out of the comparison of the rendered files; everything else must render the same bytes."""
    try:
        variant = _replanned(plan, changes)
        rendered = _replanned(plan, {k: v for k, v in changes.items() if k in _RENDERED_AS_IS})
    except ValueError as exc:
        lines = str(exc).splitlines()
        return [lines[2].strip() if len(lines) > 2 else str(exc)]
    problems = [f"{a.rule} {a.message}" for a in variant.errors]
    if _script(rendered) != _script(plan):
        problems.append("it changes the rendered script or SMP distribution the step uploaded: run `pipeline` "
                        "again with the value in the spec")
    return problems


# The fields a parameter sets whose value is not read at run time: a change must render the same files.
_RENDERED_AS_IS = ("cluster.instance_type", "cluster.instance_count", "output.path")


def _replanned(plan: Plan, changes: Mapping[str, Any]) -> Plan:
    data = thaw(plan.spec.model_dump())
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    spec = JobSpec.model_validate(data)
    variant = build_plan(LoadedSpec(spec=spec, file=plan.spec_file, marks={}, files=(plan.spec_file,)),
                         region=plan.region, env={})
    return dataclasses.replace(variant, templates=plan.templates)


def _script(plan: Plan) -> dict[str, str]:
    """The plan's rendered files less its own record of itself (plan.json and spec.json name every value)."""
    return {k: v for k, v in source_files(plan).items() if k not in ("plan.json", "spec.json")}


def check_values(plans: Sequence[Plan], steps: Sequence[str], values: Mapping[str, str]) -> dict[str, str | int]:
    """The execution's parameter values, typed and checked against each step's plan; a bad name or value is a
    UsageError (exit 2) naming the parameter, before anything starts."""
    params = {p.name: p for p in pipeline_parameters(plans, steps)}
    typed: dict[str, str | int] = {}
    for name, raw in values.items():
        param = params.get(name)
        if param is None:
            close = difflib.get_close_matches(name, list(params), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; the parameters are {', '.join(params)}"
            raise UsageError(f"--param {quoted(name)}: no such pipeline parameter{hint}")
        if param.kind == "Integer":
            try:
                typed[name] = int(raw)
            except ValueError:
                raise UsageError(f"--param {name}={quoted(raw)}: give an integer") from None
        else:
            typed[name] = raw
        if param.choices and typed[name] not in param.choices:
            raise UsageError(f"--param {name}={quoted(raw)}: this step may run on {', '.join(param.choices)}")
    by_step: dict[str, dict[str, Any]] = {}
    for name, value in typed.items():
        by_step.setdefault(params[name].step, {})[params[name].field] = value
    for plan, step in zip(plans, steps, strict=True):
        if step in by_step:
            problems = variant_problems(plan, by_step[step])
            if problems:
                given = ", ".join(f"{p.name}={typed[p.name]}" for p in params.values() if p.name in typed
                                  and p.step == step)
                raise UsageError(f"step {step} with {given}: {problems[0]}")
    return typed

