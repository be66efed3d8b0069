"""The JSON Schema of the job spec, generated from the models (committed as schema/smp-launch.schema.json)."""
from __future__ import annotations

import json

from launcher.spec.models import JobSpec

SCHEMA_FILE = "schema/smp-launch.schema.json"


def schema() -> dict:
    body = JobSpec.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://smp-launch.dev/schema/v1/job-spec.json", **body}


def schema_text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=False) + "\n"
