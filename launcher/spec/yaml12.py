"""A YAML reader for hostile specs: YAML 1.2 core-schema scalars, and bounded size, depth and aliases.

PyYAML follows YAML 1.1, where `010` is 8, `1:30` is 90, `yes` is true and `2024-01-01` a date; a spec
means what YAML 1.2 (https://yaml.org/spec/1.2.2/#1032-tag-resolution) says instead:

- integers are decimal (`010` is 10), `0o17` octal and `0x1f` hexadecimal; `1_000`, `0b101` and
  sexagesimal `1:30` are strings; an integer of more than MAX_DIGITS digits is refused;
- floats include `1e-4`, `.inf` and `.nan` (the spec's fields refuse the last two);
- booleans are only true/false (any case as True, TRUE); `yes`, `on`, `no` and `off` are strings;
- null is `~`, `null` or nothing; there are no implicit timestamps.

An alias bomb (a few hundred bytes whose aliases expand to billions of values) is refused while it
is composed: every value counts, an alias counts as all the values it stands for, and past MAX_NODES
the spec is refused; so are aliases inside their own anchor and nesting deeper than MAX_DEPTH.
"""
from __future__ import annotations

import re
from typing import Any

from yaml import MappingNode, ScalarNode, SequenceNode
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from launcher.core.sanitize import quoted

MAX_NODES = 5000  # values in a spec once aliases are expanded; a real spec has well under 500
MAX_DEPTH = 32  # nesting levels; a spec uses four
MAX_DIGITS = 40  # digits in an integer; Python refuses to convert more than 4300


class Refused(Exception):
    """A YAML document refused for its shape (too big, too deep, recursive); `mark` is a yaml Mark."""

    def __init__(self, message: str, mark: Any):
        super().__init__(message)
        self.message, self.mark = message, mark


class _Resolver(BaseResolver):
    pass


_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_Resolver.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])
_Resolver.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


class _Constructor(SafeConstructor):
    def construct_yaml_int(self, node):  # noqa: D102 - YAML 1.2 integers
        text = self.construct_scalar(node)
        if not _INT.match(text):  # an explicit !!int on something else
            raise ConstructorError(None, None, f"{quoted(text)} is not a YAML 1.2 integer", node.start_mark)
        sign, body = (-1, text[1:]) if text[:1] == "-" else (1, text.lstrip("+"))
        if len(body) > MAX_DIGITS:
            raise ConstructorError(None, None, f"a number of more than {MAX_DIGITS} digits", node.start_mark)
        if body.startswith("0o"):
            return int(body[2:], 8)
        if body.startswith("0x"):
            return int(body[2:], 16)
        return sign * int(body, 10)

    def construct_yaml_float(self, node):  # noqa: D102 - YAML 1.2 floats
        text = self.construct_scalar(node)
        if not _FLOAT.match(text):
            if _INT.match(text):  # !!float 0x10
                return float(self.construct_yaml_int(node))
            raise ConstructorError(None, None, f"{quoted(text)} is not a YAML 1.2 number", node.start_mark)
        lowered = text.lower()
        if lowered.endswith(".inf"):
            return float("-inf") if text.startswith("-") else float("inf")
        if lowered == ".nan":
            return float("nan")
        return float(text)

    def construct_yaml_bool(self, node):  # noqa: D102 - YAML 1.2 booleans
        text = self.construct_scalar(node)
        if not _BOOL.match(text):
            raise ConstructorError(None, None, f"{quoted(text)} is not true or false", node.start_mark)
        return text.lower() == "true"


_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)
_Constructor.add_constructor("tag:yaml.org,2002:float", _Constructor.construct_yaml_float)
_Constructor.add_constructor("tag:yaml.org,2002:bool", _Constructor.construct_yaml_bool)


class Loader(Reader, Scanner, Parser, Composer, _Constructor, _Resolver):
    """PyYAML's safe loader with YAML 1.2 scalars and a budget on expanded values and depth."""

    def __init__(self, stream: str):
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _Constructor.__init__(self)
        _Resolver.__init__(self)
        self._nodes = 0
        self._depth = 0
        self._open: set[str] = set()
        self._sizes: dict[int, int] = {}

    def _size(self, node) -> int:
        known = self._sizes.get(id(node))
        if known is None:
            if isinstance(node, SequenceNode):
                known = 1 + sum(self._size(n) for n in node.value)
            elif isinstance(node, MappingNode):
                known = 1 + sum(self._size(k) + self._size(v) for k, v in node.value)
            else:
                known = 1
            self._sizes[id(node)] = known
        return known

    def _count(self, n: int, mark) -> None:
        self._nodes += n
        if self._nodes > MAX_NODES:
            raise Refused(f"more than {MAX_NODES} values once YAML aliases are expanded; "
                          "a spec needs far fewer (is this an alias bomb?)", mark)

    def fetch_flow_collection_start(self, token_class):
        if self.flow_level >= MAX_DEPTH:  # the scanner looks ahead through every open bracket: stop it early
            raise Refused(f"values are nested more than {MAX_DEPTH} levels deep", self.get_mark())
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            if event.anchor in self._open:
                raise Refused(f"alias *{event.anchor} is inside the value it names (a recursive alias)",
                              event.start_mark)
            node = super().compose_node(parent, index)
            self._count(self._size(node), event.start_mark)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise Refused(f"values are nested more than {MAX_DEPTH} levels deep", event.start_mark)
        if event.anchor is not None:
            self._open.add(event.anchor)
        node = super().compose_node(parent, index)
        self._open.discard(event.anchor)
        self._depth -= 1
        self._count(1, event.start_mark)
        return node


def scalar(text: str) -> Any:
    """`text` typed as a plain YAML 1.2 scalar would be: a number, true/false, null, else the text."""
    loader = Loader("")
    try:
        tag = loader.resolve(ScalarNode, text, (True, False))
        return loader.construct_object(ScalarNode(tag, text))
    finally:
        loader.dispose()
