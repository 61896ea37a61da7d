"""``ferry config sample`` and ``ferry config check FILE`` (being built)."""

from __future__ import annotations


def add_parsers(sub) -> None:
    """Add this module's subcommands to the ``ferry`` parser's subparsers."""
