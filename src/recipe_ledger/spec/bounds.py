"""Names and bounds shared by every spec model: one slug rule, one size for each kind of text.

Names written in a spec become folder and file names (``runs/<id>/<arm>/``, ``recipes/releases/
<lane>/``), MLflow tags and URLs of the site. One strict pattern, defined here and nowhere else,
keeps ``../../X``, ``/abs`` or an empty name from ever becoming one: lower-case letters, digits,
``.``, ``_`` and ``-``, starting with a letter or digit, at most 64 characters.

Numbers and lists that size work or memory (repeats, points, list lengths) are bounded so that
``repeats: 100000000`` is a one-line error at its line instead of a plan that never fits in memory.
The limits are far above any real spec; they only refuse what no person means.
"""

from __future__ import annotations

import re
from typing import Annotated

from annotated_types import Len
from pydantic import AfterValidator, Field, StringConstraints
from pydantic_core import PydanticCustomError

from recipe_ledger.redact import looks_like_credential

SLUG_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
SLUG_RULE = "lower-case letters, digits, '.', '_' or '-', starting with a letter or digit, at most 64"
_SLUG = re.compile(SLUG_PATTERN)

CREDENTIAL_NAME = "credential_name"  # the error type describe_error reports without the name


def _not_a_credential(name: str) -> str:
    """A name is stored, published and looked up as it is: one with a credential's shape would be
    redacted to ``[REDACTED]`` wherever it is written (and ``release publish`` could no longer
    find it), so it is refused here instead. The name itself is not echoed."""
    if looks_like_credential(name):
        raise PydanticCustomError(
            CREDENTIAL_NAME,
            "this name has the shape of a credential (an access token or key), and names are "
            "published as they are: rename it",
        )
    return name


# Arm, experiment, lane, instrument, box and writer names: anything that may become a path part.
Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN), AfterValidator(_not_a_credential)]

# Free text sizes. PATH_MAX on Linux is 4096; an argv element or env value longer than that is
# no launch flag anyone typed.
ShortText = Annotated[str, StringConstraints(max_length=256)]
PathText = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
ArgText = Annotated[str, StringConstraints(max_length=4096)]
LongText = Annotated[str, StringConstraints(max_length=20_000)]

MAX_ITEMS = 256  # argv, env, scripts, changes...
MAX_ARMS = 32
MAX_POINTS = 64
MAX_POINT = 1_000_000  # a concurrency level, a batch size: well above any box
MAX_REPEATS = 100  # launches per arm; each is a fresh server boot
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MAX_SEED = 2**63 - 1
# One ledger entry, as canonical JSON (ledger.chain.MAX_LINE_BYTES): raw outputs are files referenced
# by content hash, never inlined. Here so that a spec's text can be checked against it at load.
MAX_ENTRY_BYTES = 16 * 1024

Point = Annotated[int, Field(ge=0, le=MAX_POINT)]
ArgList = Annotated[list[ArgText], Len(max_length=MAX_ITEMS)]
EnvMap = Annotated[dict[ShortText, ArgText], Len(max_length=MAX_ITEMS)]


def is_slug(name: object) -> bool:
    """Whether ``name`` may be used as an arm, experiment, lane, instrument, box or writer name."""
    return isinstance(name, str) and _SLUG.fullmatch(name) is not None
