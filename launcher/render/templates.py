"""The templates a plan renders with: the shipped ones, each replaceable by a team's file of the same name.

A team points the spec's `templates:` at a folder (or passes `--templates DIR`); a `*.j2` file there replaces
the shipped template of that name, the others stay shipped. The text of every template is read once into a
TemplateSet, so the spec hash and the rendered files always come from the same bytes.

Templates are code: StrictUndefined turns a missing value into an error, and spec values reach a template
only through the `py` filter (a Python literal) or the `json` filter (a JSON value), never as raw text. A
template that fails to render is a TemplateError naming its file and line: one line, exit 2.

They are code for the job, not for the machine that validates or plans it: they render in Jinja's immutable
sandbox (https://jinja.palletsprojects.com/en/3.1.x/sandbox/), where reaching Python's internals
(`__class__`, `__globals__`, ...) or changing a value is a SecurityError, and a team template that is a link
to a file outside its folder is refused (its content would ride into the uploaded source).
"""
from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any

import jinja2
import jinja2.sandbox

from launcher.core.errors import EXIT_INVALID, LauncherError
from launcher.core.sanitize import clean

SHIPPED = "shipped"  # what `templates` in the plan says of a template the team did not replace
TEAM = "team"  # and what plan.json in the tarball says of one it did (no local path in the tarball)
MAX_TEMPLATE_BYTES = 1 << 20  # a template is a few KB; more is a mistake


class TemplateError(LauncherError):
    """A template that cannot be used: it does not render, its output does not compile or parse, or the
    distribution it renders is one SMP v2 would refuse. `FILE[:LINE]: message`, exit 2."""

    exit_code = EXIT_INVALID

    def __init__(self, file: str, message: str, line: int | None = None):
        self.file, self.line, self.message = file, line, message
        where = f"{clean(file, limit=200)}:{line}" if line else clean(file, limit=200)
        super().__init__(f"{where}: {clean(message, limit=600)}")


def _defined(value: Any) -> None:
    """A filter given an undefined name says so (StrictUndefined), not that it cannot write the value."""
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()


def py_literal(value: Any) -> str:
    """A Python literal for value; only plain data is accepted, so no spec string can become code."""
    _defined(value)
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


def json_literal(value: Any) -> str:
    """A JSON value for value (strict: no NaN or infinity, which JSON does not have)."""
    _defined(value)
    return json.dumps(value, allow_nan=False)


def templates_dir() -> Path:
    """The shipped templates: `templates/` at the top of a checkout (an editable install too), or
    `launcher/templates/` inside a wheel, where setup.py's build step copies them."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "templates"
    return installed if installed.is_dir() else package.parent / "templates"


def shown_path(path: str | Path) -> str:
    """A path as messages and `plan` show it: relative to the current folder when it lies near it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith(os.pardir + os.sep + os.pardir) else rel


@dataclass(frozen=True)
class TemplateFile:
    """One template: its name (`train.py.j2`), its text, where it was read and whether it is the shipped one."""

    name: str
    text: str = field(repr=False)
    path: str
    shipped: bool

    @property
    def shown(self) -> str:
        return shown_path(self.path)


@dataclass(frozen=True)
class TemplateSet:
    """Every template a plan renders, by name; hashable, so its Jinja environment is built once."""

    files: tuple[TemplateFile, ...]

    def get(self, name: str) -> TemplateFile | None:
        return next((f for f in self.files if f.name == name), None)

    def __getitem__(self, name: str) -> TemplateFile:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    @property
    def names(self) -> list[str]:
        return sorted(f.name for f in self.files)

    @property
    def team(self) -> tuple[TemplateFile, ...]:
        """The templates a team's folder replaced."""
        return tuple(f for f in self.files if not f.shipped)

    def used(self) -> dict[str, str]:
        """`templates` in the plan: each template's name -> "shipped", or the team file's path."""
        return {f.name: SHIPPED if f.shipped else f.shown for f in sorted(self.files, key=lambda f: f.name)}

    def team_digests(self) -> dict[str, str]:
        """sha256 of each team template's text, by name (what the spec hash covers); empty when all are shipped."""
        return {f.name: hashlib.sha256(f.text.encode()).hexdigest() for f in self.team}


def _read(path: Path, shown: str) -> str:
    """A template's text: a regular UTF-8 file of at most MAX_TEMPLATE_BYTES."""
    try:
        if not path.is_file():
            raise TemplateError(shown, "is not a regular file")
        size = path.stat().st_size
        if size > MAX_TEMPLATE_BYTES:
            raise TemplateError(shown, f"is {size} bytes; a template may have at most {MAX_TEMPLATE_BYTES}")
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(shown, f"is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise TemplateError(shown, f"cannot be read: {exc.strerror or exc}") from None


@lru_cache(maxsize=1)
def shipped() -> TemplateSet:
    """The templates smp-launch ships."""
    folder = templates_dir()
    return TemplateSet(tuple(TemplateFile(p.name, _read(p, str(p)), str(p), True)
                             for p in sorted(folder.glob("*.j2"))))


def load_templates(folder: str | os.PathLike[str] | None) -> TemplateSet:
    """The shipped templates with a team's folder laid over them (None: the shipped ones only).

    Every `*.j2` file in the folder must be named after a shipped template: a misspelt name would
    otherwise be ignored in silence. Other files (a README) are left alone."""
    base = shipped()
    if folder is None:
        return base
    where = Path(folder)
    shown = shown_path(where)
    if not where.is_dir():
        raise TemplateError(shown, "is not a folder of templates")
    team = sorted(p for p in where.glob("*.j2"))
    if not team:
        raise TemplateError(shown, "holds no template (*.j2); a team template replaces one of: "
                                   f"{', '.join(base.names)}")
    replaced: dict[str, TemplateFile] = {}
    inside = where.resolve()
    for path in team:
        _within(path, inside)
        if base.get(path.name) is None:
            close = difflib.get_close_matches(path.name, base.names, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise TemplateError(shown_path(path), f"no shipped template is named {path.name}{hint} (a team template "
                                                  f"replaces one of: {', '.join(base.names)})")
        replaced[path.name] = TemplateFile(path.name, _read(path, shown_path(path)), str(path.resolve()), False)
    return TemplateSet(tuple(replaced.get(f.name, f) for f in base.files))


def _within(path: Path, folder: Path) -> None:
    """A team template must lie in its folder: a link to a file elsewhere (a credentials file, another
    repository's script) is refused before it is read."""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):  # a dangling link, a loop: _read says what it is
        return
    if not target.is_relative_to(folder):
        raise TemplateError(shown_path(path), "is a link to a file outside its templates folder; a team template "
                                              "must lie in the folder (copy the file in, or link within it)")


class _SetLoader(jinja2.BaseLoader):
    """Serves a TemplateSet's texts under their names; the file name Jinja records is the real path, so an
    error's traceback and message point at the file that holds the line."""

    def __init__(self, templates: TemplateSet):
        self.templates = templates

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        found = self.templates.get(template)
        if found is None:
            raise jinja2.TemplateNotFound(template)
        return found.text, found.path, lambda: True

    def list_templates(self) -> list[str]:
        return self.templates.names


@lru_cache(maxsize=16)
def environment(templates: TemplateSet) -> jinja2.Environment:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        loader=_SetLoader(templates),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["py"] = py_literal
    env.filters["json"] = json_literal
    return env


def _failing_line(tb: TracebackType | None, paths: dict[str, TemplateFile]) -> tuple[TemplateFile | None, int | None]:
    """The innermost template frame of a traceback (Jinja maps its line to the template's)."""
    found: tuple[TemplateFile | None, int | None] = (None, None)
    while tb is not None:
        template = paths.get(tb.tb_frame.f_code.co_filename)
        if template is not None:
            found = (template, tb.tb_lineno)
        tb = tb.tb_next
    return found


def render(templates: TemplateSet, name: str, context: dict[str, Any]) -> str:
    """One template rendered with context; a template that fails is a TemplateError at its file and line."""
    paths = {f.path: f for f in templates.files}
    try:
        return environment(templates).get_template(name).render(**context)
    except jinja2.TemplateSyntaxError as exc:
        failing = paths.get(exc.filename or "") or templates[name]
        raise TemplateError(failing.shown, f"does not render: {exc.message}", exc.lineno) from None
    except Exception as exc:
        found, line = _failing_line(exc.__traceback__, paths)
        if found is None and not isinstance(exc, jinja2.TemplateError):
            raise  # not a template's fault
        blamed = found or templates[name]
        message = exc.message if isinstance(exc, jinja2.TemplateError) and exc.message else str(exc)
        kind = "" if isinstance(exc, jinja2.TemplateError) else f"{type(exc).__name__}: "
        raise TemplateError(blamed.shown, f"does not render: {kind}{message}", line) from None
