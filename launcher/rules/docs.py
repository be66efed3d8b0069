"""docs/rules.md, generated from the rule registry so the documentation cannot drift from the code."""
from __future__ import annotations

from launcher.rules import RULES

DOC_FILE = "docs/rules.md"


def markdown() -> str:
    lines = [
        "# smp-launch advisor rules",
        "",
        "Generated from the rules in `launcher/rules/` by `make docs`; do not edit by hand.",
        "`error` blocks submit (and makes `validate` and `plan` exit 2), `warning` and `info` advise.",
        "",
        "| id | severity | rule | source |",
        "|---|---|---|---|",
    ]
    for r in sorted(RULES, key=lambda r: r.id):
        lines.append(f"| {r.id} | {r.severity} | {r.title} | {r.source} |")
    return "\n".join(lines) + "\n"


def as_json() -> list[dict]:
    return [{"id": r.id, "severity": r.severity, "title": r.title, "source": r.source}
            for r in sorted(RULES, key=lambda r: r.id)]
