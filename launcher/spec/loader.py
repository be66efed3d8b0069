"""Load a job spec: YAML with line marks, `extends`, `--set` overrides, `${VAR}` expansion, validation.

Every problem becomes one `FILE:LINE:COL: path: message` line (a SpecError, exit code 2); nothing
here touches the network.
"""
from __future__ import annotations

import os
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from launcher.errors import Mark, Problem, SpecError
from launcher.spec.models import JobSpec, did_you_mean

Path_ = tuple[str, ...]


@dataclass(frozen=True)
class LoadedSpec:
    spec: JobSpec
    file: str
    marks: Mapping[Path_, Mark]
    files: tuple[str, ...]  # the spec and every file it extends, child first

    def mark(self, dotted: str) -> Mark:
        return nearest_mark(self.marks, tuple(dotted.split(".")) if dotted else (), self.file)


def nearest_mark(marks: Mapping[Path_, Mark], path: Path_, file: str) -> Mark:
    for n in range(len(path), -1, -1):
        if path[:n] in marks:
            return marks[path[:n]]
    return Mark(file, 1, 1)


def _display(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("../../") else rel


class _Doc:
    """A parsed YAML mapping plus the position of every value and key in it."""

    def __init__(self, data: dict, marks: dict[Path_, Mark], key_marks: dict[Path_, Mark]):
        self.data, self.marks, self.key_marks = data, marks, key_marks


def _parse(text: str, file: str) -> _Doc:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError([Problem(Mark(file, 1, 1), "", "the spec is empty")])
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        m = exc.problem_mark or exc.context_mark
        where = Mark(file, m.line + 1, m.column + 1) if m else Mark(file, 1, 1)
        raise SpecError([Problem(where, "yaml", f"{exc.problem or exc.context}")]) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise SpecError([Problem(Mark(file, node.start_mark.line + 1, node.start_mark.column + 1), "",
                                 "a spec must be a mapping of keys such as name, model, cluster")])
    marks: dict[Path_, Mark] = {}
    key_marks: dict[Path_, Mark] = {}
    problems: list[Problem] = []

    def at(n) -> Mark:
        return Mark(file, n.start_mark.line + 1, n.start_mark.column + 1)

    def walk(n, path: Path_) -> None:
        marks[path] = at(n)
        if isinstance(n, yaml.MappingNode):
            seen = set()
            for k, v in n.value:
                key = str(k.value)
                if key in seen:
                    problems.append(Problem(at(k), ".".join(path + (key,)), "duplicate key"))
                seen.add(key)
                key_marks[path + (key,)] = at(k)
                walk(v, path + (key,))
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, path + (str(i),))

    walk(node, ())
    if problems:
        raise SpecError(problems)
    return _Doc(data, marks, key_marks)


def _merge(base: Any, child: Any) -> Any:
    if isinstance(base, dict) and isinstance(child, dict):
        out = dict(base)
        for k, v in child.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    return child


def _load_file(path: Path, stack: tuple[Path, ...], via: Mark | None) -> tuple[_Doc, list[str]]:
    file = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        where = via or Mark(file, 1, 1)
        raise SpecError([Problem(where, "extends" if via else "",
                                 f"cannot read {file}: {exc.strerror or exc}")]) from None
    doc = _parse(text, file)
    files = [file]
    parent = doc.data.pop("extends", None)
    if parent is None:
        return doc, files
    here = doc.marks[("extends",)]
    if not isinstance(parent, str):
        raise SpecError([Problem(here, "extends", "extends must be a file path")])
    base_path = (path.parent / parent).resolve()
    if base_path in stack or base_path == path.resolve():
        chain = " -> ".join(_display(p) for p in stack + (base_path,))
        raise SpecError([Problem(here, "extends", f"extends forms a cycle: {chain}")])
    base, base_files = _load_file(base_path, stack + (path.resolve(),), here)
    merged = _Doc(_merge(base.data, doc.data), {**base.marks, **doc.marks},
                  {**base.key_marks, **doc.key_marks})
    for key in [k for k in merged.marks if k[:1] == ("extends",)]:
        merged.marks.pop(key)
    return merged, files + base_files


def _apply_set(doc: _Doc, overrides: Sequence[str]) -> None:
    for i, expr in enumerate(overrides, start=1):
        key, eq, raw = expr.partition("=")
        parts = tuple(key.strip().split("."))
        where = Mark("--set", i, len(key) + 2)
        if not eq or not all(parts):
            raise SpecError([Problem(Mark("--set", i, 1), key or "--set",
                                     f"expected KEY.PATH=VALUE, got {expr!r}")])
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise SpecError([Problem(where, key, f"value is not valid YAML: {exc}")]) from None
        node = doc.data
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise SpecError([Problem(where, key, f"cannot set a key inside {'.'.join(parts[:depth + 1])}, "
                                                     f"which is a {type(child).__name__}")])
            node = child
        node[parts[-1]] = value
        for p in [p for p in doc.marks if p[:len(parts)] == parts]:
            del doc.marks[p]
        for n in range(1, len(parts)):
            doc.marks.setdefault(parts[:n], where)
        doc.marks[parts] = doc.key_marks[parts] = where


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(value: Any, path: Path_, env: Mapping[str, str], doc: _Doc, problems: list[Problem]) -> Any:
    if isinstance(value, dict):
        return {k: _expand(v, path + (str(k),), env, doc, problems) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, path + (str(i),), env, doc, problems) for i, v in enumerate(value)]
    if not isinstance(value, str) or "$" not in value:
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        problems.append(Problem(nearest_mark(doc.marks, path, ""), ".".join(path),
                                f"environment variable {name} is not set (write ${{{name}:-default}} for a default)"))
        return ""

    return _VAR.sub(sub, value)


def _fields_at(loc: Path_) -> list[str]:
    cls: Any = JobSpec
    for part in loc:
        field = cls.model_fields.get(part) if isinstance(cls, type) and issubclass(cls, BaseModel) else None
        if field is None:
            return []
        cls = _model_in(field.annotation)
    return list(cls.model_fields) if isinstance(cls, type) and issubclass(cls, BaseModel) else []


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _data_path(data: Any, loc: Path_) -> Path_:
    """The longest prefix of a pydantic location that names a value present in the data."""
    node, out = data, []
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            break
        out.append(part)
    return tuple(out)


def _problems(exc: ValidationError, doc: _Doc, file: str) -> list[Problem]:
    grouped: dict[Path_, list[dict]] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(str(x) for x in err["loc"] if x != "[key]")
        path = loc if err["type"] in ("missing", "extra_forbidden") else _data_path(doc.data, loc)
        grouped.setdefault(path, []).append({**err, "loc": loc})
    problems = []
    for path, errs in grouped.items():
        err = errs[0]
        dotted = ".".join(path)
        mark = nearest_mark(doc.marks, path, file)
        if err["type"] == "extra_forbidden":
            allowed = _fields_at(path[:-1])
            msg = f"unknown key '{path[-1]}'{did_you_mean(path[-1], allowed)}"
            mark = doc.key_marks.get(path, mark)
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif len(errs) > 1:
            kinds = [e["loc"][len(path)] for e in errs if len(e["loc"]) > len(path)]
            msg = f"expected {' or '.join(kinds) or 'another type'}, got {err.get('input')!r}"
        elif err["type"] == "literal_error":
            expected = err["ctx"]["expected"]
            options = re.findall(r"'([^']*)'", expected)
            msg = f"{err['input']!r} is not one of {expected}{did_you_mean(err['input'], options)}"
        elif err["type"] == "value_error":
            msg = str(err["ctx"]["error"])
        elif err["type"] == "string_pattern_mismatch":
            msg = f"{err['input']!r} does not match the pattern {err['ctx']['pattern']}"
        else:
            got = err.get("input")
            shown = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
            msg = f"{err['msg'][0].lower()}{err['msg'][1:]}{shown}"
        problems.append(Problem(mark, dotted, msg))
    return sorted(problems, key=lambda p: (p.mark.file != file, p.mark.line, p.mark.col))


def load_spec(path: str | os.PathLike, overrides: Sequence[str] = (),
              env: Mapping[str, str] | None = None) -> LoadedSpec:
    """Read, merge, override, expand and validate one spec file, or raise SpecError."""
    env = os.environ if env is None else env
    p = Path(path)
    doc, files = _load_file(p, (), None)
    file = files[0]
    _apply_set(doc, overrides)
    problems: list[Problem] = []
    doc.data = _expand(doc.data, (), env, doc, problems)
    if problems:
        raise SpecError(problems)
    try:
        spec = JobSpec.model_validate(doc.data)
    except ValidationError as exc:
        raise SpecError(_problems(exc, doc, file)) from None
    return LoadedSpec(spec=spec, file=file, marks=dict(doc.marks), files=tuple(files))
