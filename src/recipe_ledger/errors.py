"""One error base class for everything the tool reports to a person.

Every message names where the problem is (a file and line, or an object such as a hardware id)
and, where one exists, the next command to run. The CLI prints ``str(error)`` on one line and
exits with ``error.exit_code``; it never shows a traceback for a ``LedgerError``.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base class of every error the tool raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        self.message = message
        self.where = where
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f" (next: {self.hint})"
        return text


class InputError(LedgerError):
    """Bad input from the user: a malformed file, an unknown id, a missing path."""

    exit_code = 2


class SpecError(InputError):
    """A spec file (recipe, taxonomy, strategy, box, experiment) that does not load or validate."""


class UnknownIdError(InputError):
    """A name that is not in the vocabulary it should come from (hardware, strategy, feature...)."""


class ResolutionError(InputError):
    """A recipe that cannot be turned into a launch command for the requested selection."""


class StateError(LedgerError):
    """The world is not in the state an operation needs (a port in use, a dirty tree, a dead server)."""

    exit_code = 3


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler, a CI timeout, `kill`), raised where Ctrl-C would be so it takes the same
    path (servers stopped, a failure entry, exit 130); its own type so the entry can say which."""
