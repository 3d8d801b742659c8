"""Compatibility only: ``release_commands`` imports its options from here until it is renamed.

Delete this file once ``release_commands.py`` imports ``recipe_ledger.cli.options`` itself.
"""

from recipe_ledger.cli.options import root_option, writer_option

__all__ = ["root_option", "writer_option"]
