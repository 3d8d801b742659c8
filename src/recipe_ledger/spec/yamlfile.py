"""YAML loading with js-yaml 4's semantics and line numbers for error messages.

The reference command builder (recipes.vllm.ai) reads recipes with js-yaml 4, which follows the
YAML 1.2 core schema plus timestamps and merge keys. PyYAML follows YAML 1.1, where ``on``,
``yes`` and ``no`` are booleans and ``0755`` is an octal number; read that way, a recipe would
resolve to a different command. So the loader below replaces PyYAML's implicit resolvers with
the 1.2 core ones.

Line numbers come from composing the document into nodes, which costs about as much again as
loading it; it is only done when an error or a lint warning needs a location.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from recipe_ledger.errors import SpecError

if TYPE_CHECKING:
    # Checked against the libyaml loader; the pure-Python fallback has the same interface.
    from yaml import CSafeLoader as _BaseLoader
else:
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # PyYAML may be built without libyaml

# YAML 1.2 core schema, as js-yaml 4 implements it (js-yaml lib/type/{bool,int,float,null}.js).
_CORE_RESOLVERS: list[tuple[str, re.Pattern[str], str]] = [
    ("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), "~nN"),
    ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "tTfF"),
    (
        "tag:yaml.org,2002:int",
        re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0o[0-7_]+|[-+]?0x[0-9a-fA-F_]+|[-+]?[0-9][0-9_]*)$"),
        "-+0123456789",
    ),
    (
        "tag:yaml.org,2002:float",
        re.compile(
            r"^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?"
            r"|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        "-+0123456789.",
    ),
    (
        "tag:yaml.org,2002:timestamp",
        re.compile(
            r"^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}"
            r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}"
            r"(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)$"
        ),
        "0123456789",
    ),
    ("tag:yaml.org,2002:merge", re.compile(r"^<<$"), "<"),
]


class CoreSchemaLoader(_BaseLoader):
    """A safe loader that resolves plain scalars the way js-yaml 4 does."""

    # PyYAML's per-class resolver table, replaced, not shared. A class attribute at run time, but
    # types-PyYAML declares it on BaseResolver without ClassVar, and an override must match that.
    yaml_implicit_resolvers: dict[Any, Any] = {}


for _tag, _regexp, _first in _CORE_RESOLVERS:
    CoreSchemaLoader.add_implicit_resolver(_tag, _regexp, list(_first))


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node)).replace("_", "")
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    for prefix, base in (("0b", 2), ("0o", 8), ("0x", 16)):
        if digits.startswith(prefix):
            return sign * int(digits[2:], base)
    return sign * int(digits)


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).replace("_", "").lower()
    if text.endswith(".inf"):
        return float("-inf") if text.startswith("-") else float("inf")
    if text == ".nan":
        return float("nan")
    return float(text)


def _construct_timestamp(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> _dt.date | _dt.datetime:
    value = yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    return value


CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
CoreSchemaLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
CoreSchemaLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


class _LineLoader(yaml.SafeLoader):
    """Pure-Python loader used only to compose nodes for locations (marks carry line numbers)."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # replaced, not shared (as on CoreSchemaLoader)


for _tag, _regexp, _first in _CORE_RESOLVERS:
    _LineLoader.add_implicit_resolver(_tag, _regexp, list(_first))


PathKey = tuple[str | int, ...]


def _index_lines(node: yaml.Node, prefix: PathKey, out: dict[PathKey, int]) -> None:
    out.setdefault(prefix, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            child = (*prefix, key)
            out[child] = key_node.start_mark.line + 1
            _index_lines(value_node, child, out)
            out[child] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index_lines(item, (*prefix, index), out)


@dataclass
class YamlDoc:
    """A loaded YAML document: its data, where it came from, and the line of any path in it."""

    path: Path
    text: str
    data: Any
    display_path: str = ""

    def __post_init__(self) -> None:
        if not self.display_path:
            self.display_path = str(self.path)

    @cached_property
    def lines(self) -> dict[PathKey, int]:
        index: dict[PathKey, int] = {}
        node = yaml.compose(self.text, Loader=_LineLoader)
        if node is not None:
            _index_lines(node, (), index)
        return index

    def line_of(self, path: PathKey) -> int | None:
        """The line of the deepest existing prefix of ``path`` (1-based), or None."""
        lines = self.lines
        for end in range(len(path), -1, -1):
            line = lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None

    def where(self, path: PathKey = ()) -> str:
        line = self.line_of(path)
        return f"{self.display_path}:{line}" if line else self.display_path


def parse_yaml_text(text: str, display_path: str) -> Any:
    """Parse YAML text with the core schema; a syntax error becomes a SpecError at its line."""
    try:
        return yaml.load(text, Loader=CoreSchemaLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise SpecError(f"malformed YAML: {problem}", where=f"{display_path}{line}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"malformed YAML: {exc}", where=display_path) from None


def load_yaml(path: Path | str, display_path: str | None = None) -> YamlDoc:
    """Read and parse a YAML file; a missing file or bad YAML is a SpecError naming it."""
    path = Path(path)
    shown = display_path or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("no such file", where=shown) from None
    except IsADirectoryError:
        raise SpecError("is a directory, expected a YAML file", where=shown) from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"not UTF-8 text ({exc.reason})", where=shown) from None
    return YamlDoc(path=path, text=text, data=parse_yaml_text(text, shown), display_path=shown)


def format_path(path: PathKey) -> str:
    """``("variants", "default", "vram_minimum_gb")`` -> ``variants.default.vram_minimum_gb``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
