"""Reading a vLLM argv as flags: which flag, which values, and how it was written.

A vLLM command line mixes ``--flag value``, ``--flag=value``, boolean switches and flags that
take several values (``--cpu-offload-params a b``). Fit arithmetic reads values from it and the
lint looks for one flag written two ways; both go through ``parse_flags``. Planning a run edits a
command through ``LaunchCommand``: parsed once, edited as options, rendered once; the MLflow index
and the site's experiment pages read an arm's flags and program words from it too (``settings``,
``option_texts``, ``positionals``).
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
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


# ------------------------------------------------------------------------------ the launch command


@dataclass(frozen=True)
class Option:
    """One flag of a launch command as it was written, or (``name`` None) words that no flag owns
    (they follow a ``--name=value``); kept so that rendering gives back every token in order."""

    name: str | None
    values: tuple[str, ...] = ()
    joined: bool = False  # written as --name=value

    def render(self) -> list[str]:
        if self.name is None:
            return list(self.values)
        if self.joined:
            return [f"{self.name}={self.values[0]}", *self.values[1:]]
        return [self.name, *self.values]


@dataclass(frozen=True)
class LaunchCommand:
    """A server command parsed once: the program words (``vllm serve MODEL``) and its options.

    Planning edits it (model path, overrides, server address, engine binary) as operations on this
    form and renders the argv once at the end. The reading rules are those of ``parse_flags`` (a
    word after a spaced flag is its value), so ``render`` gives back the argv byte for byte and an
    edit gives what editing the argv and reading it again would."""

    program: tuple[str, ...]
    options: tuple[Option, ...] = ()

    @classmethod
    def parse(cls, argv: list[str] | tuple[str, ...]) -> LaunchCommand:
        program: list[str] = []
        for index, token in enumerate(argv):
            if is_flag(token):
                return cls(tuple(program)).extended(argv[index:])
            program.append(token)
        return cls(tuple(program))

    def render(self) -> list[str]:
        return [*self.program, *(token for option in self.options for token in option.render())]

    def extended(self, tokens: list[str] | tuple[str, ...]) -> LaunchCommand:
        """``tokens`` appended, read as if they had been part of the command all along."""
        options = list(self.options)
        for token in tokens:
            if is_flag(token):
                name, eq, value = token.partition("=")
                options.append(Option(name, (value,) if eq else (), bool(eq)))
            elif options and options[-1].name is not None and not options[-1].joined:
                last = options[-1]
                options[-1] = Option(last.name, (*last.values, token))
            elif options and options[-1].name is None:
                options[-1] = Option(None, (*options[-1].values, token))
            elif options:
                options.append(Option(None, (token,)))
            else:
                return LaunchCommand.parse([*self.program, *tokens])  # no option yet: program words
        return LaunchCommand(self.program, tuple(options))

    def without(self, names: set[str] | frozenset[str]) -> LaunchCommand:
        """Every occurrence of the flags ``names`` dropped, with their values. Words no flag owned
        are read again against what now precedes them, as reading the shorter argv would."""
        kept = LaunchCommand(self.program)
        for option in self.options:
            if option.name is None:
                kept = kept.extended(option.values)
            elif option.name not in names:
                kept = LaunchCommand(kept.program, (*kept.options, option))
        return kept

    def replacing(
        self, tokens: list[str] | tuple[str, ...], also_remove: AbstractSet[str] = frozenset()
    ) -> LaunchCommand:
        """``tokens`` appended after dropping every earlier occurrence of the flags they set (and of
        ``also_remove``): one occurrence per flag keeps the command readable, and the value is the one
        the server would have used anyway (the last one wins)."""
        names = {flag.name for flag in parse_flags(list(tokens))} | set(also_remove)
        return self.without(names).extended(tokens)

    def with_word(self, position: int, word: str) -> LaunchCommand:
        """The program word at ``position`` (0: the binary, 2: vLLM's model) replaced."""
        if position < len(self.program):
            program = list(self.program)
            program[position] = word
            return LaunchCommand(tuple(program), self.options)
        argv = self.render()
        argv[position] = word
        return LaunchCommand.parse(argv)

    def word(self, position: int) -> str | None:
        """The token at ``position`` of the rendered argv (None past its end)."""
        tokens = self.render()
        return tokens[position] if position < len(tokens) else None

    def first_value(self, name: str) -> str | None:
        for option in self.options:
            if option.name == name and option.values:
                return option.values[0]
        return None

    def settings(self) -> dict[str, tuple[str, ...]]:
        """``{flag: the values of its last occurrence}`` (``()`` for a switch), in the order the
        flags first appear: what the server reads, since the last occurrence wins."""
        return {option.name: option.values for option in self.options if option.name is not None}

    def positionals(self) -> tuple[str, ...]:
        """The words no flag owns, in order: the program words, then any word after a
        ``--name=value`` (a joined flag takes no further word)."""
        unowned = (word for option in self.options if option.name is None for word in option.values)
        return (*self.program, *unowned)

    def has(self, name: str) -> bool:
        """Whether the flag ``name`` is written at all (a switch has no value to ask for)."""
        return any(option.name == name for option in self.options)

    def with_value(self, name: str, value: str) -> LaunchCommand:
        """Every occurrence of the flag ``name`` given ``value``, where it stands (written spaced);
        a command without the flag is returned as it is."""
        options = tuple(Option(name, (value,)) if option.name == name else option for option in self.options)
        return LaunchCommand(self.program, options)

    def option_texts(self) -> dict[str, str]:
        """``{flag: its values joined by spaces}`` as a person reads the command: ``"(set)"`` for a
        bare switch, ``""`` for ``--name=``; the last occurrence wins, as it does for the server."""
        return {name: " ".join(values) if values else "(set)" for name, values in self.settings().items()}
