"""``ferry pub``, ``sub``, ``req``, ``reply`` and ``bench`` on NATS subjects (being built)."""

from __future__ import annotations


def add_parsers(sub) -> None:
    """Add this module's subcommands to the ``ferry`` parser's subparsers."""
