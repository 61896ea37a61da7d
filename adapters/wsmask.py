"""Compiled WebSocket unmasking for wsproto (the engine under trio-websocket).

Why
---
Every frame a client sends is masked with a 4-byte key (RFC 6455 5.3) and the
server XORs it away. wsproto 1.x does that in ``XorMaskerSimple.process`` with
four ``bytes.translate`` passes over strided copies: 0.19 ms for a 180 KB
message here (/tmp micro-bench of this session, 1 000 x 128 B Iggy batch),
which a py-spy profile of ``ferry serve`` under ``bench/iggy_bench.py``'s
``ws send`` row showed as a quarter of the event loop's samples. The C loop
``core._speedups.xor_mask`` does the same in ~0.02 ms.

How
---
wsproto's ``FrameDecoder`` builds ``XorMaskerSimple(key)`` by its module
global name for each masked frame (``wsproto/frame_protocol.py``), so
:func:`install` replaces that global with :class:`CompiledXorMasker`, which has
the same interface (``process(data) -> bytearray``, the key rotated past a
partial chunk so the next chunk of the same frame continues it). Install is
process-wide, once, and only after a self-check against wsproto's own masker
on chunked input; without the compiled module (no C compiler,
``FERRY_PURE_PYTHON=1``) or with a wsproto that no longer has the class,
wsproto keeps its own loop and the behaviour is the same.
"""

from __future__ import annotations

import itertools
import logging

from core.compiled import load

log = logging.getLogger("ferry.ws")

_speedups = load("core._speedups")
_xor_mask = getattr(_speedups, "xor_mask", None)
_installed = False
# wsproto's own masker class once install() has replaced it (tests compare against it)
python_masker = None


class CompiledXorMasker:
    """wsproto's XorMaskerSimple, with the XOR loop in C."""

    __slots__ = ("_key",)

    def __init__(self, masking_key) -> None:
        self._key = bytes(masking_key)

    def process(self, data) -> bytearray:
        out = _xor_mask(data, self._key)
        turn = len(data) & 3  # the next chunk of this frame starts mid-key
        if turn:
            self._key = self._key[turn:] + self._key[:turn]
        return out


def _agrees(reference) -> bool:
    """Both maskers give the same bytes on chunks that split the key anywhere."""
    data = bytes(range(256)) * 5
    for cuts in ((0, 1, 3, 4, 9, 600, 1280), (0, 7, 8, 13, 1279, 1280), (0, 1280)):
        ours, theirs = CompiledXorMasker(b"\x0f\xa5\x3c\x81"), reference(b"\x0f\xa5\x3c\x81")
        for a, b in itertools.pairwise(cuts):
            if bytes(ours.process(data[a:b])) != bytes(theirs.process(bytearray(data[a:b]))):
                return False
    return True


def install() -> bool:
    """Put :class:`CompiledXorMasker` under wsproto (once); True when it is in use."""
    global _installed, python_masker
    if _installed:
        return True
    if _xor_mask is None:
        return False
    try:
        from wsproto import frame_protocol
    except ImportError:
        return False
    reference = getattr(frame_protocol, "XorMaskerSimple", None)
    if reference is None or not _agrees(reference):
        log.warning("wsproto's masker changed shape; WebSocket unmasking stays in Python")
        return False
    python_masker = reference
    frame_protocol.XorMaskerSimple = CompiledXorMasker
    _installed = True
    return True


__all__ = ["CompiledXorMasker", "install", "python_masker"]
