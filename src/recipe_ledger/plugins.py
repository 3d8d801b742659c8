"""Registries of named things that a plugin can extend: the built-ins plus Python entry points.

Adding an instrument (or an engine) is one file plus its registration: a built-in is listed by its
package, anything else declares an entry point in the package's group (``importlib.metadata``),
naming an instance of the registry's base class, or a subclass to instantiate. This module reads
the entry points and refuses, with the entry point named, a plugin that does not load, is not of
the base class, does not carry its entry point's name, or takes a name already registered: a broken
plugin is one line at planning time, not a traceback halfway through a run.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable
from typing import TypeVar

from recipe_ledger.errors import InputError, StateError

T = TypeVar("T")


def load_registry(
    group: str, built_in: Iterable[T], base: type[T], name_of: Callable[[T], str], what: str
) -> dict[str, T]:
    """Name -> object: ``built_in`` in their order, then the entry points of ``group`` by name.
    ``what`` names the thing in messages ("instrument"); ``name_of`` reads an object's name."""
    found = {name_of(item): item for item in built_in}
    for point in sorted(importlib.metadata.entry_points(group=group), key=lambda p: p.name):
        where = f"entry point {group}:{point.name}"
        item = _load(point, base, what, where)
        name = name_of(item)
        if name != point.name:
            raise StateError(
                f"{what} plugin {point.value} is named {name!r}, its entry point {point.name!r}",
                where=where,
                hint=f"make the entry point's name the {what}'s name",
            )
        if name in found:
            raise StateError(
                f"{what} plugin {point.value} names itself {name!r}, which is already registered",
                where=where,
                hint=f"give the plugin's {what} another name",
            )
        found[name] = item
    return found


def pick(registered: dict[str, T], name: str, what: str, listed_as: str) -> T:
    """``registered[name]``, else an InputError naming every registered one ("unknown engine 'x';
    engines: vllm, sglang, transformers, openai, none")."""
    if name not in registered:
        raise InputError(
            f"unknown {what} {name!r}; {listed_as}: {', '.join(registered)}",
            where=what,
            hint="name one of them, or install the package that provides it",
        )
    return registered[name]


def _load(point: importlib.metadata.EntryPoint, base: type[T], what: str, where: str) -> T:
    """The object an entry point names: an instance of ``base``, or a subclass to instantiate."""
    try:
        loaded = point.load()
    except Exception as error:  # a broken plugin is named, not a traceback from deep in a run
        raise StateError(
            f"{what} plugin {point.value} does not load: {type(error).__name__}: {error}", where=where
        ) from error
    item = loaded() if isinstance(loaded, type) and issubclass(loaded, base) else loaded
    if not isinstance(item, base):
        expected = f"{base.__module__}.{base.__qualname__}"
        raise StateError(
            f"{what} plugin {point.value} is a {type(item).__name__}, not a {expected}", where=where
        )
    return item
