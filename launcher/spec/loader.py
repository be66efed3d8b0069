"""Load a job spec: YAML with line marks, `extends`, overrides (`KEY.PATH=VALUE`), `${VAR}` expansion, validation.

Every problem becomes one `FILE:LINE:COL: path: message` line (a SpecError, exit code 2); nothing
here touches the network.
"""
from __future__ import annotations

import os
import re
import stat
import typing
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from launcher.core.errors import OVERRIDES, Mark, Problem, SpecError
from launcher.core.sanitize import clean
from launcher.spec.models import PATTERN_WORDS, JobSpec, did_you_mean
from launcher.spec.secrets import credential_kind, looks_secret, may_hold_secret
from launcher.spec.yaml12 import MAX_DEPTH, Loader, Refused, scalar

Path_ = tuple[str, ...]


@dataclass(frozen=True)
class LoadedSpec:
    spec: JobSpec
    file: str
    marks: Mapping[Path_, Mark]
    files: tuple[str, ...]  # the spec and every file it extends, child first
    templates_dir: str | None = None  # the team templates' folder (`templates:`), resolved; None: shipped only

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
    """A parsed YAML mapping plus the position of every value and key in it.

    `plain` holds the paths of unquoted scalars: a `${VAR}` that is the whole of one takes a YAML type.
    """

    def __init__(self, data: dict, marks: dict[Path_, Mark], key_marks: dict[Path_, Mark],
                 plain: set[Path_] | None = None):
        self.data, self.marks, self.key_marks = data, marks, key_marks
        self.plain = plain if plain is not None else set()


MAX_BYTES = 256 * 1024  # a spec is a few KB; more is a mistake or an attack
MAX_EXTENDS = 32  # files in one extends chain
SHOWN = 80  # the most characters of any value an error echoes
_NON_PRINTABLE = re.compile("[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]")


def shown(value: Any, limit: int = SHOWN) -> str:
    """A value as an error echoes it: repr, escaped for a terminal, cut to `limit` characters."""
    return clean(repr(value), limit=limit)


_shown = shown  # for `_problems`, whose own `shown` leaves secrets out


def _position(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def _decode(data: bytes, file: str) -> str:
    """The text of a spec file: UTF-8 (a BOM is fine) with no control characters, else one clear line."""
    utf16 = data.startswith((b"\xff\xfe", b"\xfe\xff"))
    if utf16 or b"\x00" in data:
        line, col = _position(data, 0 if utf16 else data.find(b"\x00"))
        raise SpecError([Problem(Mark(file, line, col), "", "the file is not UTF-8 text (UTF-16, or NUL "
                                                            "bytes); save it as UTF-8")])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _position(data, exc.start)
        raise SpecError([Problem(Mark(file, line, col), "",
                                 f"byte 0x{data[exc.start]:02x} is not UTF-8; save the file as UTF-8")]) from None
    bad = _NON_PRINTABLE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        col = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        raise SpecError([Problem(Mark(file, line, col), "",
                                 f"control character {clean(bad.group())} is not allowed in a spec "
                                 "(write it as an escape inside double quotes)")])
    return text


def _tree(value: Any) -> Any:
    """A copy in which no two places share one object (YAML aliases do), so setting one changes one."""
    if isinstance(value, dict):
        return {k: _tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tree(v) for v in value]
    return value


def _in_file(file: str) -> Callable[[Any], Mark]:
    return lambda m: Mark(file, m.line + 1, m.column + 1) if m else Mark(file, 1, 1)


def _compose(text: str, at: Callable[[Any], Mark], path: str = "yaml") -> tuple[Any, Any]:
    """The root node and the constructed value of one YAML document (None, None when it is empty).

    `at` turns a YAML position into a Mark; `path` names the field in a message about the YAML itself.
    """
    bad = _NON_PRINTABLE.search(text)  # an override's value; a file's text was checked as it was decoded
    if bad:
        at_char = yaml.Mark("", bad.start(), text.count("\n", 0, bad.start()),
                            bad.start() - text.rfind("\n", 0, bad.start()) - 1, None, None)
        raise SpecError([Problem(at(at_char), path, f"control character {clean(bad.group())} is not allowed "
                                                    "(write it as an escape inside double quotes)")])
    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        problems = _duplicates(node, at)
        if problems:
            raise SpecError(problems)
        return node, _tree(loader.construct_document(node))
    except Refused as exc:
        raise SpecError([Problem(at(exc.mark), path, exc.message)]) from None
    except yaml.YAMLError as exc:
        m = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        message = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
        raise SpecError([Problem(at(m), path, clean(message, limit=200))]) from None
    finally:
        loader.dispose()


def _duplicates(root, at: Callable[[Any], Mark]) -> list[Problem]:
    """Keys written twice in one mapping; a key a merge (`<<: *base`) brought in may be overridden."""
    problems, seen_nodes = [], set()

    def walk(n, path: Path_) -> None:
        if id(n) in seen_nodes:
            return
        seen_nodes.add(id(n))
        if isinstance(n, yaml.MappingNode):
            seen = set()
            for k, v in n.value:
                if k.tag == "tag:yaml.org,2002:merge" or not isinstance(k, yaml.ScalarNode):
                    walk(v, path)
                    continue
                if k.value in seen:
                    dotted = clean(".".join(path + (k.value,)), limit=200)
                    problems.append(Problem(at(k.start_mark), dotted, "duplicate key"))
                seen.add(k.value)
                walk(v, path + (k.value,))
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, path + (str(i),))

    walk(root, ())
    return problems


def _parse(text: str, file: str) -> _Doc:
    node, data = _compose(text, _in_file(file))
    if node is None:
        raise SpecError([Problem(Mark(file, 1, 1), "", "the spec is empty")])
    if not isinstance(data, dict):
        raise SpecError([Problem(Mark(file, node.start_mark.line + 1, node.start_mark.column + 1), "",
                                 "a spec must be a mapping of keys such as name, model, cluster")])
    marks: dict[Path_, Mark] = {}
    key_marks: dict[Path_, Mark] = {}
    plain: set[Path_] = set()

    def at(n) -> Mark:
        return Mark(file, n.start_mark.line + 1, n.start_mark.column + 1)

    def walk(n, path: Path_) -> None:
        marks[path] = at(n)
        if isinstance(n, yaml.MappingNode):  # merged keys come first, so the mapping's own keys win
            for k, v in n.value:
                key = str(k.value) if isinstance(k, yaml.ScalarNode) else "?"
                key_marks[path + (key,)] = at(k)
                walk(v, path + (key,))
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, path + (str(i),))
        elif n.style is None:
            plain.add(path)
        else:
            plain.discard(path)

    walk(node, ())
    return _Doc(data, marks, key_marks, plain)


def _merge(base: Any, child: Any) -> Any:
    if isinstance(base, dict) and isinstance(child, dict):
        out = dict(base)
        for k, v in child.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    return child


def _read(path: Path, file: str, via: Mark | None) -> str:
    """The text of one spec file: a regular file of at most MAX_BYTES; an extended one is .yaml or .yml.

    Nothing of a file that is refused here reaches an error message: `extends: /etc/shadow` gets
    "not a .yaml file", not the file's first line.
    """
    where = via or Mark(file, 1, 1)
    field = "extends" if via else ""

    def refuse(message: str) -> SpecError:
        return SpecError([Problem(where, field, message)])

    if via is not None:
        try:
            real = path.resolve()
        except (OSError, RuntimeError, ValueError):
            real = path
        if path.suffix.lower() not in (".yaml", ".yml") or real.suffix.lower() not in (".yaml", ".yml"):
            raise refuse(f"extends must name a .yaml or .yml spec file, not {clean(file, limit=200)}")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise refuse(f"cannot read {clean(file, limit=200)}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise refuse(f"{clean(file, limit=200)} is not a regular file")
        if info.st_size > MAX_BYTES:
            raise refuse(f"{clean(file, limit=200)} is {info.st_size} bytes; a spec may have at most {MAX_BYTES}")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise refuse(f"cannot read {clean(file, limit=200)}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise refuse(f"{clean(file, limit=200)} is more than {MAX_BYTES} bytes; a spec may have at most {MAX_BYTES}")
    return _decode(data, file)


def _load_file(path: Path) -> tuple[_Doc, list[str]]:
    """The spec at `path` merged over every file it extends (child first in the list of files)."""
    docs: list[_Doc] = []
    files: list[str] = []
    chain: list[Path] = []
    via: Mark | None = None
    while True:
        file = _display(path)
        try:
            real = path.resolve()
        except (OSError, RuntimeError, ValueError):
            real = path.absolute()
        if real in chain:
            assert via is not None, "only a file named by extends can close a cycle"
            names = " -> ".join(clean(f, limit=200) for f in files + [file])
            raise SpecError([Problem(via, "extends", f"extends forms a cycle: {names}")])
        if len(chain) >= MAX_EXTENDS:
            assert via is not None, "only a file named by extends can make the chain too long"
            raise SpecError([Problem(via, "extends", f"an extends chain may have at most {MAX_EXTENDS} files")])
        doc = _parse(_read(path, file, via), file)
        docs.append(doc)
        files.append(file)
        chain.append(real)
        parent = doc.data.pop("extends", None)
        if parent is None:
            break
        via = doc.marks[("extends",)]
        if not isinstance(parent, str) or not parent.strip() or "\x00" in parent:
            raise SpecError([Problem(via, "extends", "extends must be the path of a .yaml or .yml spec file")])
        path = path.parent / parent
    merged = docs.pop()
    while docs:
        doc = docs.pop()
        merged = _Doc(_merge(merged.data, doc.data), {**merged.marks, **doc.marks},
                      {**merged.key_marks, **doc.key_marks},
                      {p for p in merged.plain if p not in doc.marks} | doc.plain)
    for key in [k for k in merged.marks if k[:1] == ("extends",)]:
        merged.marks.pop(key)
    return merged, files


def _apply_set(doc: _Doc, overrides: Sequence[str]) -> None:
    for i, expr in enumerate(overrides, start=1):
        key, eq, raw = expr.partition("=")
        parts = tuple(key.strip().split("."))
        where = Mark(OVERRIDES, i, len(key) + 2)
        if not eq or not all(parts):
            raise SpecError([Problem(Mark(OVERRIDES, i, 1), clean(key, limit=SHOWN) or OVERRIDES,
                                     f"expected KEY.PATH=VALUE, got {shown(expr)}")])
        dotted = clean(key.strip(), limit=200)
        if len(parts) > MAX_DEPTH:  # deeper than any spec nests; unbounded, it is a RecursionError or gigabytes
            raise SpecError([Problem(Mark(OVERRIDES, i, 1), dotted,
                                     f"a key path may have at most {MAX_DEPTH} parts; this one has {len(parts)}")])
        if parts[0] == "extends":
            raise SpecError([Problem(Mark(OVERRIDES, i, 1), dotted,
                                     "extends cannot be overridden: write `extends:` in the spec file")])
        value, is_plain = None, True
        if raw.strip():
            def at(m: Any, i: int = i, col: int = where.col) -> Mark:
                return Mark(OVERRIDES, i, col + (m.column if m else 0))
            node, value = _compose(raw, at, dotted)
            if node is None:
                value = None
            is_plain = isinstance(node, yaml.ScalarNode) and node.style is None
        node = doc.data
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise SpecError([Problem(where, dotted, f"cannot set a key inside {'.'.join(parts[:depth + 1])}, "
                                                        f"which is a {type(child).__name__}")])
            node = child
        node[parts[-1]] = value
        for p in [p for p in doc.marks if p[:len(parts)] == parts]:
            del doc.marks[p]
        doc.plain = {p for p in doc.plain if p[:len(parts)] != parts}
        if is_plain:
            doc.plain.add(parts)
        for n in range(1, len(parts)):
            doc.marks.setdefault(parts[:n], where)
        doc.marks[parts] = doc.key_marks[parts] = where


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_WHOLE_VAR = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}")


def _expand(value: Any, path: Path_, env: Mapping[str, str], doc: _Doc, problems: list[Problem],
            secret_from: dict[Path_, str]) -> Any:
    """`${VAR}` expanded in every value; the paths whose value took a secret-looking variable's value are
    noted in `secret_from` (path -> `${NAME}`), and such a value stays text (a secret is never typed)."""
    if isinstance(value, dict):
        return {k: _expand(v, path + (str(k),), env, doc, problems, secret_from) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, path + (str(i),), env, doc, problems, secret_from) for i, v in enumerate(value)]
    if not isinstance(value, str) or "$" not in value:
        return value
    secret_names: list[str] = []

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(2)
        if name in env:
            if looks_secret(name) or credential_kind(env[name]):
                secret_names.append(name)
            return env[name]
        if default is not None:
            return default
        problems.append(Problem(nearest_mark(doc.marks, path, ""), ".".join(path),
                                f"environment variable {name} is not set (write ${{{name}:-default}} for a default)"))
        return ""

    text = _VAR.sub(sub, value)
    if secret_names:
        secret_from[path] = f"${{{secret_names[0]}}}"
        return text
    if path in doc.plain and _WHOLE_VAR.fullmatch(value):
        try:  # `count: ${COUNT:-1}` is the number 1, as `count: 1` would be; `"${COUNT}"` stays text
            return scalar(text)
        except (yaml.YAMLError, ValueError) as exc:
            problems.append(Problem(nearest_mark(doc.marks, path, ""), ".".join(path),
                                    f"{shown(text)} from {value}: {clean(getattr(exc, 'problem', exc), limit=200)}"))
    return text


def _misplaced_secrets(data: Any, secret_from: Mapping[Path_, str], doc: _Doc) -> tuple[list[Problem], set[Path_]]:
    """Every secret value where it would be stored in clear, and every path that holds one (no error may echo
    what is there). A secret is a value from a secret-looking variable or one shaped like a credential
    (launcher.spec.secrets); it may stand only where it is redacted."""
    problems: list[Problem] = []
    holding: set[Path_] = set(secret_from)
    stack: list[tuple[Path_, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                key_kind = credential_kind(k)
                if key_kind:
                    holding.add(path + (str(k),))
                    problems.append(Problem(nearest_mark(doc.key_marks, path + (str(k),), ""), ".".join(path),
                                            f"a key here holds {key_kind}; a secret is never a key"))
                    continue
                stack.append((path + (str(k),), v))
            continue
        if isinstance(value, list):
            stack.extend((path + (str(i),), v) for i, v in enumerate(value))
            continue
        origin = secret_from.get(path)
        kind = credential_kind(value)
        if origin is None and kind is None:
            continue
        holding.add(path)
        if may_hold_secret(path):
            continue
        what = f"the value of {origin}, a secret" if origin else kind
        dotted = clean(".".join(path), limit=200)
        if path[:1] == ("environment",) and len(path) == 2:
            advice = (f"its name is not one that is redacted, so it would be in clear in the plan and the job's "
                      f"files: move it to `secrets:` as a Secrets Manager ARN (or give it a secret-looking name, "
                      f"e.g. {clean(path[1], limit=60)}_TOKEN)")
        else:
            where = {"hyperparameters": "a hyperparameter", "tags": "a tag"}.get(path[0], "this field")
            advice = (f"{where} is stored in clear (the job's description, its tags, plan.json): pass secrets to "
                      "the job through `secrets:` (a Secrets Manager ARN) or a secret-named `environment` entry")
        problems.append(Problem(nearest_mark(doc.marks, path, ""), dotted, f"holds {what}; {advice}"))
    return problems, holding


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


def _problems(exc: ValidationError, doc: _Doc, file: str, hidden: Set[Path_] = frozenset()) -> list[Problem]:
    """One Problem per path; at a path that holds a secret (`hidden`, or one inside it) no value is echoed."""
    grouped: dict[Path_, list[dict]] = {}
    for detail in exc.errors(include_url=False):
        loc = tuple(str(x) for x in detail["loc"] if x != "[key]")
        path = loc if detail["type"] in ("missing", "extra_forbidden") else _data_path(doc.data, loc)
        grouped.setdefault(path, []).append({**detail, "loc": loc})
    problems = []
    for path, errs in grouped.items():
        err = errs[0]
        # Several errors at one path are a union's members (loc continues with each member's name); a
        # mapping's key and value failing together are not, and fall through to the first error's message.
        kinds = [e["loc"][len(path)] for e in errs if len(e["loc"]) > len(path)]
        union = len(errs) > 1 and len(set(kinds)) == len(errs)
        dotted = clean(".".join(path), limit=200)
        mark = nearest_mark(doc.marks, path, file)
        secret = any(h[:len(path)] == path or path[:len(h)] == h for h in hidden)

        def shown(value: Any, secret: bool = secret) -> str:
            return "<redacted>" if secret else _shown(value)

        if err["type"] == "extra_forbidden":
            allowed = _fields_at(path[:-1])
            msg = f"unknown key {_shown(path[-1])}{did_you_mean(path[-1][:200], allowed)}"
            mark = doc.key_marks.get(path, mark)
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif union:
            msg = f"expected {' or '.join(kinds)}, got {shown(err.get('input'))}"
        elif err["type"] == "literal_error":
            expected = err["ctx"]["expected"]
            options = re.findall(r"'([^']*)'", expected)
            close = "" if secret else did_you_mean(str(err["input"])[:200], options)
            msg = f"{shown(err['input'])} is not one of {expected}{close}"
        elif err["type"] == "value_error":
            msg = clean(err["ctx"]["error"], limit=400)
            if secret:  # a validator's message may quote the value
                msg = re.sub(r"'[^']*'|\"[^\"]*\"", "<redacted>", msg)
        elif err["type"] == "string_pattern_mismatch":
            pattern = err["ctx"]["pattern"]
            words = PATTERN_WORDS.get(pattern)
            msg = (f"{shown(err['input'])} is not {words}" if words
                   else f"{shown(err['input'])} does not match the pattern {pattern}")
        else:
            got = err.get("input")
            echo = "" if isinstance(got, (dict, list)) else f" (got {shown(got)})"
            msg = f"{err['msg'][0].lower()}{err['msg'][1:]}{echo}"
        problems.append(Problem(mark, dotted, msg))
    return sorted(problems, key=lambda p: (p.mark.file != file, p.mark.line, p.mark.col))


def load_spec(path: str | os.PathLike, overrides: Sequence[str] = (),
              env: Mapping[str, str] | None = None) -> LoadedSpec:
    """Read, merge, override, expand and validate one spec file, or raise SpecError."""
    env = os.environ if env is None else env
    doc, files = _load_file(Path(path))
    file = files[0]
    _apply_set(doc, overrides)
    problems: list[Problem] = []
    secret_from: dict[Path_, str] = {}
    doc.data = _expand(doc.data, (), env, doc, problems, secret_from)
    misplaced, hidden = _misplaced_secrets(doc.data, secret_from, doc)
    problems += misplaced
    if problems:
        raise SpecError(sorted(problems, key=lambda p: (p.mark.file != file, p.mark.line, p.mark.col)))
    try:
        spec = JobSpec.model_validate(doc.data)
    except ValidationError as exc:
        raise SpecError(_problems(exc, doc, file, hidden)) from None
    return LoadedSpec(spec=spec, file=file, marks=dict(doc.marks), files=tuple(files),
                      templates_dir=_templates_dir(spec.templates, nearest_mark(doc.marks, ("templates",), file)))


def _templates_dir(value: str | None, mark: Mark) -> str | None:
    """The team templates' folder: relative to the spec file that names it (a file it extends, too), or to
    the current folder when it comes from --set (or --templates)."""
    if value is None:
        return None
    base = Path.cwd() if mark.file == OVERRIDES else Path(mark.file).parent
    try:
        folder = (base / value).resolve()
        found = folder.is_dir()
    except (OSError, RuntimeError, ValueError):
        folder, found = base / value, False
    if not found:
        where = "the current folder" if mark.file == OVERRIDES else clean(mark.file, limit=200)
        raise SpecError([Problem(mark, "templates", f"{shown(value)} is not a folder of templates (looked for "
                                                    f"{clean(str(folder), limit=200)}, relative to {where})")])
    return str(folder)
