"""The plan's source bundle: the files render writes for a plan (its templates, plus the plan's own JSON
documents: distribution.json, plan.json, spec.json) and their deterministic tarball.

plan.json and spec.json hold nothing that changes from run to run or from machine to machine (the job
name's timestamp, the spec's folder, the team templates' folder, the git commit), so the same spec gives
the same tarball and the content-addressed upload is reused.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.core.frozen import freeze
from launcher.core.names import GIT_COMMIT_TAG, RERUN_TAG
from launcher.render.files import render_source, template_context
from launcher.render.source import code_uri, tarball
from launcher.render.templates import SHIPPED, TEAM

if TYPE_CHECKING:
    from launcher.plan.build import Plan

JOB_NAME_PLACEHOLDER = "<job-name>"


def deterministic_plan(plan: Plan) -> dict[str, Any]:
    """The plan without what changes from run to run: the timestamped job name, the spec's path, where the
    team templates lie, the git commit and the job a rerun repeats (provenance tags on the job; in the
    tarball they would defeat the content-addressed upload)."""

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(plan.job_name, JOB_NAME_PLACEHOLDER)
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        return value

    data = scrub(plan.body_dict())
    data["spec_file"] = Path(plan.spec_file).name
    data["templates"] = {name: SHIPPED if used == SHIPPED else TEAM for name, used in data["templates"].items()}
    data["estimator"]["tags"] = [t for t in data["estimator"]["tags"] if t["Key"] not in (GIT_COMMIT_TAG, RERUN_TAG)]
    return data


def stored_spec(plan: Plan) -> dict[str, Any]:
    """The validated spec as the tarball keeps it (spec.json), so `rerun` can plan the job again.

    Resolved (extends merged, --set applied, ${VAR} expanded) but only the values the spec set, not the
    defaults: some rules read what a spec set explicitly, so it must validate back to the same spec.
    It holds no secret: secrets are Secrets Manager ARNs, and secret-looking environment values are
    redacted as in plan.json.
    """
    from launcher.spec.secrets import redact_env

    data = plan.spec.model_dump(mode="json", exclude={"extends"}, exclude_unset=True)
    if "environment" in data:
        data["environment"] = redact_env(data["environment"])
    return data


def source_files(plan: Plan) -> dict[str, str]:
    """The job's source dir as {file name: content}; the same plan always gives the same bytes."""
    return render_source(plan.templates, template_context(plan.spec, plan.decisions), {
        "distribution.json": plan.distribution,
        "plan.json": deterministic_plan(plan),
        "spec.json": stored_spec(plan),
    })


@dataclass(frozen=True)
class SourceBundle:
    """The rendered source dir, its deterministic tarball and where that lands in S3 (under the tarball's
    sha256)."""

    files: Mapping[str, str]  # file name -> content (read-only)
    tarball: bytes = field(repr=False)
    tarball_sha256: str  # hex
    uri: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", freeze(self.files))

    @classmethod
    def of(cls, files: Mapping[str, str], tarball: bytes, uri: str) -> SourceBundle:
        return cls(files=files, tarball=tarball, tarball_sha256=hashlib.sha256(tarball).hexdigest(), uri=uri)


def source_bundle(plan: Plan) -> SourceBundle:
    """The rendered files, their tarball and where it lands in S3 (under its own digest)."""
    files = source_files(plan)
    data = tarball(files)
    return SourceBundle.of(files, data, code_uri(plan.estimator.code_location, data))
