"""The compiled Iggy wire loops (adapters/iggy/_speedups.c), or None each.

Built by setup.py where a C compiler is there; FERRY_PURE_PYTHON=1 (as for
core._speedups, core/log/encoded.py) makes every caller take its Python loop,
which gives the same results and statuses."""

from __future__ import annotations

from core.compiled import load

_mod = load("adapters.iggy._speedups")
COMPILED = _mod is not None
vsr_frames = _mod.vsr_frames if COMPILED else None
vsr_render = _mod.vsr_render if COMPILED else None

__all__ = ["COMPILED", "vsr_frames", "vsr_render"]
