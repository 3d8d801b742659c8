"""Reading a vLLM argv as flags: which flag, which values, and how it was written.

A vLLM command line mixes ``--flag value``, ``--flag=value``, boolean switches and flags that
take several values (``--cpu-offload-params a b``). Fit arithmetic reads values from it and the
lint looks for one flag written two ways; both go through ``parse_flags``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FLAG = re.compile(r"^--?[A-Za-z][\w.-]*(=.*)?$", re.DOTALL)


@dataclass(frozen=True)
class Flag:
    name: str  # "--max-num-seqs"
    values: tuple[str, ...]  # () for a switch
    joined: bool  # written as --name=value
    index: int  # position of the flag in argv


def is_flag(token: str) -> bool:
    return bool(_FLAG.match(token))


def parse_flags(argv: list[str]) -> list[Flag]:
    """Flags in order of appearance; positional words before the first flag are skipped."""
    flags: list[Flag] = []
    for index, token in enumerate(argv):
        if is_flag(token):
            name, eq, value = token.partition("=")
            flags.append(Flag(name, (value,) if eq else (), bool(eq), index))
        elif flags and not flags[-1].joined:
            last = flags[-1]
            flags[-1] = Flag(last.name, (*last.values, token), False, last.index)
    return flags


def flag_values(argv: list[str]) -> dict[str, str]:
    """``{flag: its values joined by spaces}``, ``"(set)"`` for a bare switch; the last one wins."""
    return {f.name: " ".join(f.values) or "(set)" for f in parse_flags(list(argv))}


def last_value(argv: list[str], name: str) -> str | None:
    """The value the last occurrence of ``name`` gives (argparse semantics: the last one wins)."""
    found = None
    for flag in parse_flags(argv):
        if flag.name == name:
            found = flag.values[-1] if flag.values else ""
    return found


def all_values(argv: list[str], name: str) -> tuple[str, ...]:
    """Every value of the last occurrence of a multi-value flag such as --cpu-offload-params."""
    found: tuple[str, ...] = ()
    for flag in parse_flags(argv):
        if flag.name == name:
            found = flag.values
    return found
