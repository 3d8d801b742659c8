"""The seeds' campaigns: ``ledger/seeds/<name>.yaml`` read into the items that seed_import.py
appends (``ledger import-seed``).

Each file retells one seed document (the users' own write-ups) in our own words with its figures;
nothing in it was measured by this tool. Beside each entry's payload it says where the document
says it: an item's ``source`` is the seed line(s) of its claim, and every number is written
``{value: N, source: "NNN:L"}`` (seed NNN, line L as an editor numbers it; ``L-M`` for a range,
several parts joined by ", "), with ``derived`` saying how a figure the document does not print was
worked out from ones it does. A bare number is refused: a figure without its line cannot be checked.
Another item is named ``{item: KEY}`` (resolved to its entry id at import) and must come earlier in
the file, as the entry it names is appended first.

The file is read only through spec.yamlfile; its shape is the strict models below, and a mistake is
one line at file:line. Sources and markers are taken out here: the items carry plain payloads, and
the sources beside them (``SeedEntry.sources``) for the tests that look each number up in its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StringConstraints,
    ValidationError,
    model_validator,
)

from recipe_ledger.errors import SpecError
from recipe_ledger.ledger.kinds import KINDS
from recipe_ledger.ledger.models import Relation
from recipe_ledger.spec import versioned
from recipe_ledger.spec.bounds import Slug
from recipe_ledger.spec.validate import data_path, describe_error, validate_doc
from recipe_ledger.spec.yamlfile import PathKey, YamlDoc, format_path, load_yaml

SEEDS_DIR = Path(__file__).with_name("seeds")
SCHEMA_VERSION = 1
_LINES = r"\d+(?:-\d+)?"
_SOURCE = re.compile(rf"^(\d{{3}}):{_LINES}(?:, {_LINES})*$")  # "004:98-111", "004:42, 104, 111"
ModelT = TypeVar("ModelT", bound=BaseModel)


def _source_text(text: str) -> str:
    if not _SOURCE.match(text):
        raise ValueError('expected the seed and its line(s), such as "004:98-111" or "004:42, 104"')
    return text


def _a_number(value: object) -> object:
    # Checked before the union: a union's error would name its member ("value.int"), not the field.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a number")
    return value


Source = Annotated[str, AfterValidator(_source_text)]
ItemKey = Annotated[str, StringConstraints(pattern=r"^[a-z]+/[a-z0-9][a-z0-9._-]*$")]  # "failure/offload-40"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Sourced(_Strict):
    """A number of the seed and the line it comes from."""

    value: Annotated[int | float, BeforeValidator(_a_number)]
    source: Source
    derived: Annotated[str, StringConstraints(min_length=1)] | None = None  # how it follows from the
    # figures on its line, when the document does not print it


class _ItemMarker(_Strict):
    item: ItemKey


class _Ref(_Strict):
    rel: Relation
    item: ItemKey


class _ItemSpec(_Strict):
    key: ItemKey
    kind: Literal[KINDS]  # type: ignore[valid-type]  # a tuple of names, spread by Literal at run time
    source: Source
    refs: list[_Ref] = []
    payload: dict[str, Any]


class _CampaignFile(_Strict):
    schema_version: int = SCHEMA_VERSION
    name: Annotated[str, StringConstraints(pattern=r"^\d{3}$")]  # what `ledger import-seed NAME` takes
    title: str
    document: str  # the seed document's file name, written into every entry's origin
    writer: Slug  # the chain the import appends to (one per document)
    as_of: Annotated[str, StringConstraints(pattern=r"^\d{4}-\d\d-\d\d$")] | None = None
    as_of_source: Source | None = None  # the line that gives the date
    items: list[_ItemSpec]

    @model_validator(mode="after")
    def _date_has_its_line(self) -> _CampaignFile:
        if (self.as_of is None) != (self.as_of_source is None):
            raise ValueError(
                "as_of and as_of_source go together: a date is given with the line that gives it"
            )
        return self


@dataclass(frozen=True)
class Item:
    """A reference to another seed item by its key, resolved to an entry id at import."""

    key: str


@dataclass(frozen=True)
class SeedEntry:
    key: str
    kind: str
    payload: dict[str, Any]
    refs: list[tuple[str, Item]] = field(default_factory=list)
    source: str = ""  # the seed line(s) of the item's claim
    sources: dict[PathKey, Sourced] = field(default_factory=dict)  # payload path -> its number's source


@dataclass(frozen=True)
class Seed:
    """One source document and the chain its items are imported into."""

    name: str  # "000", "004": what `ledger import-seed NAME` takes
    source: str  # the document's file name, written into every entry's origin
    writer: str  # the chain the import appends to (one per document)
    as_of: str | None  # the date the document gives; None when it gives none
    items: list[SeedEntry]
    title: str = ""


def seed_names() -> tuple[str, ...]:
    """The names of every seed campaign shipped, in import order (without reading the files)."""
    return tuple(sorted(path.stem for path in SEEDS_DIR.glob("*.yaml")))


def all_seeds() -> dict[str, Seed]:
    """Every seed campaign this tool imports, by name, in import order."""
    return {name: load_seed(name) for name in seed_names()}


def load_seed(name: str, folder: Path = SEEDS_DIR) -> Seed:
    """The campaign of ``folder/<name>.yaml``; a file that does not say what it must is a SpecError."""
    doc = load_yaml(folder / f"{name}.yaml")
    versioned.check_doc(doc, SCHEMA_VERSION)
    campaign = validate_doc(doc, _CampaignFile, what="seed campaign")
    if campaign.name != name:
        message = f"name: {campaign.name!r} is not the file's name ({name}.yaml)"
        raise SpecError(message, where=doc.where(("name",)))
    _check_source(doc, ("as_of_source",), campaign.as_of_source, name)
    items: list[SeedEntry] = []
    for index, spec in enumerate(campaign.items):
        items.append(_entry(doc, ("items", index), spec, name, {item.key for item in items}))
    return Seed(name, campaign.document, campaign.writer, campaign.as_of, items, campaign.title)


def _entry(doc: YamlDoc, at: PathKey, spec: _ItemSpec, seed: str, earlier: set[str]) -> SeedEntry:
    if spec.key in earlier:
        raise SpecError(f"{format_path((*at, 'key'))}: item {spec.key!r} is given twice", where=doc.where(at))
    _check_source(doc, (*at, "source"), spec.source, seed)
    reader = _PayloadReader(doc, (*at, "payload"), seed, earlier)
    payload = reader.read(spec.payload)
    refs: list[tuple[str, Item]] = []
    for index, ref in enumerate(spec.refs):
        _check_earlier(doc, (*at, "refs", index, "item"), ref.item, earlier)
        refs.append((ref.rel, Item(ref.item)))
    return SeedEntry(spec.key, spec.kind, payload, refs, spec.source, reader.sources)


def _check_source(doc: YamlDoc, at: PathKey, source: str | None, seed: str) -> None:
    match = _SOURCE.match(source) if source else None
    if match and match[1] != seed:
        raise SpecError(
            f"{format_path(at)}: {source!r} cites seed {match[1]}, but this is seed {seed}'s campaign",
            where=doc.where(at),
        )


def _check_earlier(doc: YamlDoc, at: PathKey, key: str, earlier: set[str]) -> None:
    # An item is appended after every item before it: only their entry ids exist to refer to.
    if key not in earlier:
        raise SpecError(
            f"{format_path(at)}: {key!r} is not an item before this one (refs name earlier items)",
            where=doc.where(at),
        )


class _PayloadReader:
    """One item's payload (at ``at`` in ``doc``) with its markers taken out: sourced numbers become
    plain numbers, their sources kept by payload path; ``{item: KEY}`` becomes ``Item(KEY)``."""

    def __init__(self, doc: YamlDoc, at: PathKey, seed: str, earlier: set[str]):
        self.doc, self.at, self.seed, self.earlier = doc, at, seed, earlier
        self.sources: dict[PathKey, Sourced] = {}

    def read(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {key: self._value(value, (key,)) for key, value in payload.items()}

    def _value(self, value: Any, path: PathKey) -> Any:
        if isinstance(value, dict) and set(value) in ({"value", "source"}, {"value", "source", "derived"}):
            number = self._validated(Sourced, value, path)
            _check_source(self.doc, (*self.at, *path, "source"), number.source, self.seed)
            self.sources[path] = number
            return number.value
        if isinstance(value, dict) and set(value) == {"item"}:
            marker = self._validated(_ItemMarker, value, path)
            _check_earlier(self.doc, (*self.at, *path, "item"), marker.item, self.earlier)
            return Item(marker.item)
        if isinstance(value, dict):
            return {key: self._value(child, (*path, key)) for key, child in value.items()}
        if isinstance(value, list):
            return [self._value(child, (*path, index)) for index, child in enumerate(value)]
        if isinstance(value, int | float) and not isinstance(value, bool):
            at = (*self.at, *path)
            written = f'{{value: {value!r}, source: "{self.seed}:LINE"}}'
            raise SpecError(
                f"{format_path(at)}: {value!r} has no source: write {written}", where=self.doc.where(at)
            )
        return value

    def _validated(self, model: type[ModelT], data: dict[str, Any], path: PathKey) -> ModelT:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            at = (*self.at, *path, *data_path(data, tuple(first["loc"])))
            raise SpecError(f"{format_path(at)}: {describe_error(first)}", where=self.doc.where(at)) from None
