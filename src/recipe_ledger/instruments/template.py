"""Command templates: an argv part with plain ``{name}`` fields, and nothing else of str.format.

A command instrument's argv (``instruments[].command``) names the arm, the point, the seed...
as ``{arm}``, ``{point}``. ``str.format`` would also obey a format spec or a conversion:
``{arm:>1500000000}`` pads to 1.5 GB and ends in a MemoryError mid-run, ``{arm.__class__}`` walks
attributes, ``{0}`` reads positional arguments. So the templates are parsed here, once, and only
plain identifiers between braces are fields (``{{`` and ``}}`` stay literal braces); everything else
is refused when the experiment file loads, naming the part, and ``render`` fills fields by plain
string joining, never by ``format``.
"""

from __future__ import annotations

import string

# What every command template may name; a study arm's ``params`` add their own names.
BUILT_IN_FIELDS = ("arm", "point", "repeat", "seed", "out", "base_url")
_FORMATTER = string.Formatter()
_SHOWN = 60


class TemplateError(ValueError):
    """A template part that is not plain text with ``{name}`` fields (a ValueError: pydantic
    validators turn it into the spec error at the instrument's line)."""


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "...")


def pieces(part: str) -> list[tuple[str, str | None]]:
    """``part`` as (literal text, field name or None) pairs; a TemplateError for anything that is
    not a plain ``{name}`` (a format spec, a conversion, ``.attr``, ``[index]``, ``{}`` or ``{0}``,
    an unmatched brace)."""
    try:
        parsed = list(_FORMATTER.parse(part))
    except ValueError as error:  # "Single '}' encountered", "unmatched '{'"...
        raise TemplateError(f"{_shown(part)}: {error} (write {{{{ and }}}} for literal braces)") from None
    out: list[tuple[str, str | None]] = []
    for literal, name, spec, conversion in parsed:
        if name is None:
            out.append((literal, None))
            continue
        written = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        if not name.isidentifier():
            raise TemplateError(
                f"{_shown(part)}: field {_shown(written)} is not a plain name (no '.', '[]', "
                "numbers or empty braces; write {{ and }} for literal braces)"
            )
        if conversion is not None or spec:
            kind = "a conversion" if conversion is not None else "a format spec"
            raise TemplateError(f"{_shown(part)}: field {_shown(written)} has {kind}; use plain {{{name}}}")
        out.append((literal, name))
    return out


def fields(part: str) -> list[str]:
    """The field names ``part`` uses, in order (a TemplateError as ``pieces``)."""
    return [name for _, name in pieces(part) if name is not None]


def render(part: str, values: dict[str, object]) -> str:
    """``part`` with each ``{name}`` replaced by ``str(values[name])``; a KeyError names a field
    ``values`` lacks (a TemplateError as ``pieces``)."""
    return "".join(literal + ("" if name is None else str(values[name])) for literal, name in pieces(part))
