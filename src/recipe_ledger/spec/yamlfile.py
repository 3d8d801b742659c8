"""The one YAML reader: js-yaml 4's semantics, line numbers, and limits that hold on hostile input.

The reference command builder (recipes.vllm.ai) reads recipes with js-yaml 4, which follows the
YAML 1.2 core schema plus timestamps and merge keys, and refuses duplicate keys. PyYAML follows
YAML 1.1, where ``on``, ``yes`` and ``no`` are booleans and ``0755`` is an octal number; read that
way, a recipe would resolve to a different command. So the loader below replaces PyYAML's
implicit resolvers with the 1.2 core ones, written after js-yaml's (lib/type/*.js).

Why PyYAML and not ruamel.yaml (YAML 1.2, duplicate keys refused): ruamel 0.19 is pure Python
and read the 183 upstream recipes about 20 times slower (2.8 s against 0.15 s with libyaml),
and it bounds alias expansion no better. libyaml composes the document into a node graph in C;
every limit is checked on that graph before a single Python object is built:

- a file that is not a regular file (FIFO, device, directory) is refused before it is opened,
  and one over ``MAX_FILE_BYTES`` before it is read;
- aliases share nodes, so the graph stays small while its expansion can be astronomical (a
  10-line "billion laughs"): the expanded node count and depth are counted with one visit per
  distinct node and refused over ``MAX_EXPANDED_NODES`` / ``MAX_DEPTH``; an anchor that contains
  its own alias (``x: &l [*l]``) is refused;
- a key given twice in one mapping is refused naming both lines (js-yaml 4 refuses it too; PyYAML
  would silently keep the last, and a second ``repeats:`` would change the experiment);
- a scalar that cannot become its type (``2024-02-30``, a 5,000-digit integer, ``!!int abc``, an
  unknown tag) is reported at its line.

Line numbers for error messages are looked up by walking the node graph along the path asked
for: a lookup never expands an alias.

One other dialect, for files another program reads: ``load_yaml_11`` reads YAML 1.1 as PyYAML's safe
loader resolves it (lm-evaluation-harness reads its task files so: ``yes`` is a boolean there), under
the same limits, with a local tag on a scalar (lm-eval's ``!function utils.f``) kept as a
``LocalTag`` for the caller to judge.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import stat
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

# The largest upstream recipe is under 60 KB; a spec 20 times that is not hand-written.
MAX_FILE_BYTES = 1024 * 1024
# Counted with every alias expanded: the largest upstream recipe has a few thousand nodes.
MAX_EXPANDED_NODES = 200_000
# Real specs nest fewer than 10 levels; 64 keeps every reader (pydantic, json) far from recursion limits.
MAX_DEPTH = 64
# Python refuses to parse longer decimal integers (sys.int_info.default_max_str_digits).
MAX_INT_DIGITS = 4300
_SHOWN_CHARS = 40

# YAML 1.2 core schema, as js-yaml 4 implements it (js-yaml lib/type/{bool,int,float,null}.js):
# an integer has at least one digit and does not end in "_" (so "0x_" and "1_" are strings).
_CORE_RESOLVERS: list[tuple[str, re.Pattern[str], str]] = [
    ("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), "~nN"),
    ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "tTfF"),
    (
        "tag:yaml.org,2002:int",
        re.compile(
            r"^(?:[-+]?0b[0-1_]*[0-1]|[-+]?0o[0-7_]*[0-7]|[-+]?0x[0-9a-fA-F_]*[0-9a-fA-F]"
            r"|[-+]?[0-9](?:[0-9_]*[0-9])?)$"
        ),
        "-+0123456789",
    ),
    (
        "tag:yaml.org,2002:float",
        re.compile(
            r"^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?"
            r"|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$(?<!_)"
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

_MERGE_TAG = "tag:yaml.org,2002:merge"


def _shown(text: object) -> str:
    """A scalar as a message quotes it: one line, short."""
    flat = " ".join(str(text).split())
    return repr(flat if len(flat) <= _SHOWN_CHARS else flat[: _SHOWN_CHARS - 3] + "...")


class _ReportingLoader(_BaseLoader):
    """A safe loader that reports a scalar that cannot become its type as a ConstructorError at the
    scalar's line."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            # PyYAML's own constructors raise these for e.g. "!!bool maybe" or "!!timestamp x".
            tag = node.tag.rsplit(":", 1)[-1]
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {_shown(node.value)} as {tag} ({exc})", node.start_mark
            ) from None


class CoreSchemaLoader(_ReportingLoader):
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
    if len(digits) > MAX_INT_DIGITS:
        raise yaml.constructor.ConstructorError(
            None, None, f"integer of {len(digits)} digits is too long", node.start_mark
        )
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
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except ValueError as exc:  # 2024-02-30: the shape of a date, not a date
        raise yaml.constructor.ConstructorError(
            None, None, f"{_shown(node.value)} is not a valid date ({exc})", node.start_mark
        ) from None


CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
CoreSchemaLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
CoreSchemaLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


PathKey = tuple[str | int, ...]


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _refuse_duplicate_keys(node: yaml.MappingNode, display_path: str) -> None:
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
            continue  # a merged key may be overridden, as in js-yaml
        first = seen.get(key_node.value)
        if first is not None:
            raise SpecError(
                f"duplicate key {_shown(key_node.value)} (lines {first} and {_line(key_node)})",
                where=f"{display_path}:{_line(key_node)}",
                hint="keep one of them: YAML readers disagree on which one wins",
            )
        seen[key_node.value] = _line(key_node)


class _GraphCheck:
    """One post-order walk over the distinct collection nodes of a composed document, with an
    explicit stack (libyaml nests up to 1,000 levels; Python's recursion limit is about as deep).
    Scalars, most of any document, are counted without being visited."""

    def __init__(self, display_path: str):
        self.display_path = display_path
        self.size: dict[int, int] = {}  # id(node) -> nodes in its full expansion (scalars: 1, implied)
        self.depth: dict[int, int] = {}
        self.open: set[int] = set()  # the nodes on the current path: meeting one again is a cycle

    def run(self, root: yaml.Node) -> None:
        stack: list[tuple[yaml.Node, list[yaml.Node] | None]] = [(root, None)]
        while stack:
            node, children = stack.pop()
            if children is not None:
                self._finish(node, children)
            elif id(node) not in self.size and not isinstance(node, yaml.ScalarNode):
                children = _children(node)
                self.open.add(id(node))
                stack.append((node, children))
                stack.extend((child, None) for child in children if self._unseen(child))

    def _unseen(self, child: yaml.Node) -> bool:
        if isinstance(child, yaml.ScalarNode):
            return False
        if id(child) in self.open:
            raise SpecError(
                "an anchored node contains an alias of itself (a recursive structure)",
                where=f"{self.display_path}:{_line(child)}",
            )
        return id(child) not in self.size

    def _finish(self, node: yaml.Node, children: list[yaml.Node]) -> None:
        key = id(node)
        self.open.discard(key)
        if key in self.size:
            return  # reached twice before it was finished: both visits were queued
        size, depth = self.size, self.depth
        self.size[key] = 1 + sum(size.get(id(child), 1) for child in children)
        self.depth[key] = 1 + max((depth.get(id(child), 1) for child in children), default=0)
        if self.size[key] > MAX_EXPANDED_NODES:
            raise SpecError(
                f"aliases expand to more than {MAX_EXPANDED_NODES:,} nodes (an alias bomb?)",
                where=f"{self.display_path}:{_line(node)}",
            )
        if self.depth[key] > MAX_DEPTH:
            raise SpecError(
                f"nested more than {MAX_DEPTH} levels deep", where=f"{self.display_path}:{_line(node)}"
            )
        if isinstance(node, yaml.MappingNode):
            _refuse_duplicate_keys(node, self.display_path)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _yaml_error(exc: yaml.YAMLError, text: str, display_path: str) -> SpecError:
    """A PyYAML error as one line at its file:line."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        problem = _one_line(exc.problem or exc.context or "invalid YAML")
        if not isinstance(exc, yaml.constructor.ConstructorError):
            problem = f"malformed YAML: {problem}"  # a value that cannot convert is not malformed YAML
        return SpecError(problem, where=f"{display_path}{line}")
    if isinstance(exc, yaml.reader.ReaderError):
        at = text.count("\n", 0, max(exc.position, 0)) + 1
        return SpecError(f"malformed YAML: {_one_line(exc.reason)}", where=f"{display_path}:{at}")
    return SpecError(f"malformed YAML: {_one_line(str(exc))}", where=display_path)


def _compose(loader: _ReportingLoader, text: str, display_path: str) -> yaml.Node | None:
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, display_path) from None
    if root is not None:
        _GraphCheck(display_path).run(root)
    return root


def compose_checked(text: str, display_path: str) -> yaml.Node | None:
    """The document's node graph (None when empty), refused unless it passes every limit above."""
    loader = CoreSchemaLoader(text)
    try:
        return _compose(loader, text, display_path)
    finally:
        loader.dispose()


def parse_yaml_text(text: str, display_path: str) -> Any:
    """Parse YAML text with the core schema; bad YAML or a broken limit is a SpecError at its line."""
    return _parse_with(CoreSchemaLoader(text), text, display_path)


def _parse_with(loader: _ReportingLoader, text: str, display_path: str) -> Any:
    try:
        root = _compose(loader, text, display_path)
        return None if root is None else loader.construct_document(root)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, display_path) from None
    finally:
        loader.dispose()


def read_spec_text(path: Path, shown: str) -> str:
    """The text of a spec file, refused without reading it when it is not a regular file of a
    sane size; every OS error (a 10,000-character name, a symlink loop) is one line."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise SpecError("no such file", where=shorten(shown)) from None
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", where=shorten(shown)) from None
    if stat.S_ISDIR(info.st_mode):
        raise SpecError("is a directory, expected a YAML file", where=shorten(shown))
    if not stat.S_ISREG(info.st_mode):
        raise SpecError(
            "not a regular file (a pipe or a device?), expected a YAML file", where=shorten(shown)
        )
    if info.st_size > MAX_FILE_BYTES:
        raise SpecError(
            f"file of {info.st_size:,} bytes is over the {MAX_FILE_BYTES:,}-byte limit for a spec",
            where=shorten(shown),
        )
    try:
        # O_NONBLOCK: should the file have been swapped for a FIFO since stat, open does not wait.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", where=shorten(shown)) from None
    if len(raw) > MAX_FILE_BYTES:
        raise SpecError(f"over the {MAX_FILE_BYTES:,}-byte limit for a spec", where=shorten(shown))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"not UTF-8 text ({exc.reason})", where=shorten(shown)) from None


def shorten(path_text: str, limit: int = 200) -> str:
    """A path for a one-line message: a 10,000-character one is cut in the middle."""
    if len(path_text) <= limit:
        return path_text
    half = limit // 2 - 2
    return f"{path_text[:half]}...{path_text[-half:]}"


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
    def root_node(self) -> yaml.Node | None:
        """Composed again on first use: an error or a lint warning is rare, and keeping every
        recipe's node graph in memory would cost more than composing one in C."""
        return compose_checked(self.text, self.display_path)

    def line_of(self, path: PathKey) -> int | None:
        """The line of the deepest existing prefix of ``path`` (1-based), or None."""
        node = self.root_node
        if node is None:
            return None
        line = _line(node)
        for part in path:
            found = _child(node, part)
            if found is None:
                break
            line, node = found
        return line

    def where(self, path: PathKey = ()) -> str:
        line = self.line_of(path)
        return f"{self.display_path}:{line}" if line else self.display_path


def _child(node: yaml.Node, part: str | int) -> tuple[int, yaml.Node] | None:
    """(line, node) of key or index ``part`` under ``node``: a key's line is the line of the key;
    keys brought in by a merge (``<<: *base``) are found in the merged mappings."""
    if isinstance(node, yaml.SequenceNode):
        if isinstance(part, int) and 0 <= part < len(node.value):
            return _line(node.value[part]), node.value[part]
        return None
    if not isinstance(node, yaml.MappingNode):
        return None
    merged: list[yaml.Node] = []
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE_TAG:
            merged.extend(value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node])
        elif isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
            return _line(key_node), value_node
    for source in merged:
        found = _child(source, part)
        if found is not None:
            return found
    return None


def is_regular_file(path: Path) -> bool:
    """``path.is_file()`` that says no, instead of raising, for a name too long or a symlink loop."""
    try:
        return path.is_file()
    except OSError:
        return False


def load_yaml(path: Path | str, display_path: str | None = None) -> YamlDoc:
    """Read and parse a YAML file; a missing file, a file that is not one, or bad YAML is a
    SpecError naming it."""
    path = Path(path)
    shown = display_path or str(path)
    text = read_spec_text(path, shown)
    return YamlDoc(path=path, text=text, data=parse_yaml_text(text, shown), display_path=shown)


@dataclass(frozen=True)
class LocalTag:
    """A scalar under a local tag (``!function utils.process``): the tag, the text, its line."""

    tag: str
    value: str
    line: int


class Yaml11Loader(_ReportingLoader):
    """PyYAML's safe loader as it is (YAML 1.1 resolvers), keeping local tags on scalars."""


def _construct_local_tag(loader: Yaml11Loader, suffix: str, node: yaml.Node) -> LocalTag:
    if not isinstance(node, yaml.ScalarNode):
        raise yaml.constructor.ConstructorError(
            None, None, f"the tag !{suffix} is only read on a scalar", node.start_mark
        )
    return LocalTag(f"!{suffix}", str(loader.construct_scalar(node)), _line(node))


Yaml11Loader.add_multi_constructor("!", _construct_local_tag)


def load_yaml_11(path: Path | str, display_path: str | None = None) -> YamlDoc:
    """Read and parse a YAML 1.1 file (another program's: see the module docstring) under the same
    limits as ``load_yaml``; a missing file or bad YAML is a SpecError at its file:line. Line
    lookups (``YamlDoc.where``) work as for any document: composing never resolves a tag."""
    path = Path(path)
    shown = display_path or str(path)
    text = read_spec_text(path, shown)
    data = _parse_with(Yaml11Loader(text), text, shown)
    return YamlDoc(path=path, text=text, data=data, display_path=shown)


def format_path(path: PathKey) -> str:
    """``("variants", "default", "vram_minimum_gb")`` -> ``variants.default.vram_minimum_gb``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
