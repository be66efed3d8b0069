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

# C0 controls but tab, DEL, C1 controls, the Arabic letter mark, zero-width spaces and joiners, LRM and RLM,
# bidi embeddings/overrides/isolates, the line and paragraph separators, invisible word joiners and
# operators, the zero-width no-break space (BOM), the tag characters (invisible, they spell hidden text), and
# lone surrogates.
_UNSAFE_CLASS = ("\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064"
                 "\u2066-\u2069\ufeff\ud800-\udfff\U000e0000-\U000e007f")
_UNSAFE = re.compile(f"[{_UNSAFE_CLASS}]")
# For text read as lines (a job's log): a backslash is also doubled where it could pass for the start of an
# escape (before x, u, U, another backslash, or an unsafe character), so the text `\x1b` shows as `\\x1b`
# and only a real ESC shows as `\x1b`. Not the default: text cleaned twice (a message quoting a cleaned
# value) would double its backslashes twice.
_UNSAFE_OR_AMBIGUOUS = re.compile(f"\\\\(?=[\\\\xuU{_UNSAFE_CLASS}])|[{_UNSAFE_CLASS}]")


# How much of a value the user gave an error message quotes: enough to recognise it, never a screenful.
QUOTED = 80
# How much of each kind of text from elsewhere a message shows (`clean(text, LIMIT)`): the same kind is cut at
# the same length in every message.
NAME_LIMIT = 100  # a job's, a queue's or an error code's name (SageMaker's names are at most 63)
PLACE_LIMIT = 200  # a path, a URI, an endpoint, a validator's sentence
DETAIL_LIMIT = 300  # what was being done, or a short explanation
MESSAGE_LIMIT = 500  # what AWS or the SDK said


def quoted(value: object) -> str:
    """A value the user gave, as an error quotes it: its repr (escapes shown, never obeyed), cut at QUOTED
    characters, the same length in every message."""
    return repr(str(value)[:QUOTED])


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    if ch == "\\":
        return "\\\\"
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def clean(text: object, limit: int | None = None, *, unambiguous: bool = False) -> str:
    """`text` as one printable line: unsafe characters shown as escapes, cut to `limit` characters. With
    `unambiguous`, a backslash that could be read as an escape's is doubled, so an escape cannot be forged."""
    s = text if isinstance(text, str) else str(text)
    s = (_UNSAFE_OR_AMBIGUOUS if unambiguous else _UNSAFE).sub(_escape, s)
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
