"""The ``ferry`` command line (the console script is ``gateway.cli:main``); ferry.py
holds the parser and :func:`main`, the other modules one command family each."""

from .ferry import build_parser, main, serve_flags

__all__ = ["build_parser", "main", "serve_flags"]
