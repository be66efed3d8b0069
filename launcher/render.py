"""Render the job's source dir from the Jinja templates shipped in the wheel.

Templates are code: StrictUndefined turns a missing value into an error, and spec values reach a
Python template only through the `py` filter, which writes a Python literal, never raw text.
"""
from __future__ import annotations

import importlib.util
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2


def py_literal(value: Any) -> str:
    """A Python literal for value; only plain data is accepted, so no spec string can become code."""
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"float({str(value)!r})"
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(py_literal(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} into a rendered script")


def templates_dir() -> Path:
    """The installed `launcher.templates` package; in a source checkout, the top-level templates/."""
    try:
        spec = importlib.util.find_spec("launcher.templates")
    except ModuleNotFoundError:
        spec = None
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["py"] = py_literal
    return env


def template_names() -> list[str]:
    return sorted(environment().list_templates())


def render_template(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)
