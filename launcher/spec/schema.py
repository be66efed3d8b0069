"""The JSON Schema of a job spec file as written, generated from the models (schema/smp-launch.schema.json).

The models describe a merged, expanded spec; an editor validates one file before either happens. So the
schema differs from the models in two ways: the required keys apply only to a job that extends nothing
(a file with `extends` gets the rest from its base; a base file without a `name` is a fragment), and
every value the loader expands accepts a `${VAR}` / `${VAR:-default}` reference in place of the value.
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from launcher.spec.models import JobSpec

SCHEMA_FILE = "schema/smp-launch.schema.json"
SCHEMA_ID = "urn:smp-launch:schema:job-spec:v1"  # an identifier only: editors find the file by the modeline
MODELINE = "# yaml-language-server: $schema="
# What launcher.spec.loader expands in a value (`$$` is a literal `$`); unanchored, so it matches inside
# a longer string such as `s3://${BUCKET}/smp`.
ENV_REFERENCE = r"\$\$|\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}"
_REFERENCE = {"type": "string", "pattern": ENV_REFERENCE}
_META = ("title", "description", "default", "examples")


def _required_skeleton(node: dict, defs: dict) -> dict | None:
    """The `required` lists under node (following $refs), as a schema of nested `properties`; removes them."""
    if "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[1]]
    out: dict[str, Any] = {}
    if node.get("required"):
        out["required"] = node.pop("required")
    nested = {}
    for name, prop in node.get("properties", {}).items():
        inner = _required_skeleton(prop, defs)
        if inner:
            nested[name] = inner
    if nested:
        out["properties"] = nested
    return out or None


def _accept_references(node: dict) -> dict:
    """node, where each scalar it describes may also be written as an environment reference."""
    if "$ref" in node:
        return node
    if "anyOf" in node:
        node["anyOf"] = [_accept_references(branch) for branch in node["anyOf"]]
        return node
    kind = node.get("type")
    if kind == "object":
        for key in ("properties", "patternProperties"):
            for name, value in node.get(key, {}).items():
                node[key][name] = _accept_references(value)
        if isinstance(node.get("additionalProperties"), dict):
            node["additionalProperties"] = _accept_references(node["additionalProperties"])
        return node
    if kind == "array":
        if isinstance(node.get("items"), dict):
            node["items"] = _accept_references(node["items"])
        return node
    if kind == "null" or (kind == "string" and set(node) <= {"type", *_META}):  # any string will do
        return node
    # A reference is accepted as it is; anything else meets the value's own rules, so a validator's message
    # stays the value's ("'many' is not of type 'integer'", "'bf17' is not one of [...]").
    meta = {k: node.pop(k) for k in _META if k in node}
    return {**meta, "if": dict(_REFERENCE), "else": node}


def schema() -> dict:
    body = copy.deepcopy(JobSpec.model_json_schema())
    defs = body.get("$defs", {})
    required = _required_skeleton(body, defs) or {}
    for name, definition in defs.items():
        defs[name] = _accept_references(definition)
    body = _accept_references(body)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **body,
        # A job file that extends nothing must be complete; a file with `extends`, or a base without a
        # `name`, is completed by the loader's merge.
        "if": {"required": ["name"], "not": {"required": ["extends"]}},
        "then": required,
    }


def schema_text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=False) + "\n"


def modeline(spec_file: str | os.PathLike, repo: str | os.PathLike | None = None) -> str:
    """The first line of a spec file written at spec_file: the repository's schema, relative to the file,
    as every jobs/*.yaml has it. The repository is the one holding spec_file, else the working directory,
    else this checkout; failing all, where `smp-launch schema --write` would put it in the working directory."""
    target = Path(spec_file).resolve()
    roots = [Path(repo)] if repo else [*target.parents, Path.cwd(), Path(__file__).resolve().parents[2]]
    found = next((r / SCHEMA_FILE for r in roots if (r / SCHEMA_FILE).is_file()), Path.cwd() / SCHEMA_FILE)
    return MODELINE + Path(os.path.relpath(found.resolve(), target.parent)).as_posix()
