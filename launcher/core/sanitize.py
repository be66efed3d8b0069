"""Text from AWS (log lines, failure reasons, tags) is hostile: make it safe to print.

A CloudWatch line can carry terminal escapes that set the window title, write the clipboard (OSC 52)
or clear the screen, bidi overrides that reorder what a reader sees, and lone surrogates that a
strict UTF-8 stdout refuses. `clean` makes any string printable as one line on a terminal and
encodable as UTF-8; JSON output goes through it too, so a pipeline reads the same text a person does.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, overload

# C0 controls but tab, DEL, C1 controls, bidi embeddings/overrides/isolates, and lone surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def clean(text: object, limit: int | None = None) -> str:
    """`text` as one printable line: unsafe characters shown as escapes, cut to `limit` characters."""
    s = text if isinstance(text, str) else str(text)
    s = _UNSAFE.sub(_escape, s)
    if limit is not None and len(s) > limit:
        s = s[: max(0, limit - 1)] + "…"
    return s


# A line break, as text has it or as `clean` wrote it (a FailureReason is kept cleaned).
_BREAK = re.compile(r"\r\n|\n|\r|\\x0d\\x0a|\\x0a|\\x0d")
RETURN_MARK = " ⏎ "


def clean_lines(text: object, limit: int | None = None) -> list[str]:
    """`text`'s lines, each made safe as `clean` makes it; line breaks `clean` already escaped count too,
    so a FailureReason kept cleaned prints as the lines SageMaker wrote. Blank lines at the ends go."""
    s = text if isinstance(text, str) else str(text)
    lines = [clean(part, limit) for part in _BREAK.split(s)]
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    return lines


def one_line(text: object, limit: int | None = None) -> str:
    """`text` on one line: its lines joined by a visible ⏎, each made safe as `clean` makes it."""
    joined = RETURN_MARK.join(line.strip() for line in clean_lines(text))
    return clean(joined, limit)


@overload
def clean_data(value: Mapping[str, Any]) -> dict[str, Any]: ...
@overload
def clean_data(value: object) -> object: ...
def clean_data(value: object) -> object:
    """`clean` applied to every string inside a JSON-able structure (keys too)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean_data(k): clean_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_data(v) for v in value]
    return value
