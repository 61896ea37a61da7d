"""What an append call is given and what it is answered (re-exported by core.log).

:class:`AppendInput` is one message as an adapter hands it to the core;
:class:`AppendResult` is where one ``append`` call's records went, given to its
``on_durable`` callback (:data:`OnDurable`) once durable. Kept apart from the
partition, which fills them on the hot path (``_fast_result``) and fires the
callbacks (``_fire``), so the many modules that only name these types do not
read the partition's state machine.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger("ferry.log")


@dataclass(frozen=True, slots=True)
class AppendInput:
    """What an adapter hands the core, one per message."""

    payload: bytes
    headers: bytes = b""  # Headers.encode() output, already validated
    id: int = 0  # 0 = the core assigns a UUIDv7
    origin_timestamp: int = 0  # µs; 0 = use the append timestamp


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where one ``append`` call's records went. For a duplicate (the producer
    sequence was already stored) nothing was written: ``count`` is 0 and
    ``base_offset`` is the partition's next offset at that moment."""

    partition_id: int
    base_offset: int
    count: int
    timestamp: int  # append time (µs) given to every record of the call
    duplicate: bool = False


OnDurable = Callable[[AppendResult | BaseException], None]

# A frozen dataclass's __init__ goes through object.__setattr__ once per field
# (about 1 µs on a small VM, a fifth of an append); the hot path fills the slots
# through their descriptors instead: same object, equal and immutable as usual.
_S_PID, _S_BASE, _S_COUNT, _S_TS, _S_DUP = (
    AppendResult.__dict__[name].__set__
    for name in ("partition_id", "base_offset", "count", "timestamp", "duplicate")
)


def _fast_result(partition_id: int, base_offset: int, count: int, timestamp: int) -> AppendResult:
    result = object.__new__(AppendResult)
    _S_PID(result, partition_id)
    _S_BASE(result, base_offset)
    _S_COUNT(result, count)
    _S_TS(result, timestamp)
    _S_DUP(result, False)
    return result


def _nothing() -> None:
    return None


def _fire(callback: Callable[[object], None], arg: object) -> None:
    try:
        callback(arg)
    except Exception:  # noqa: BLE001 - one bad callback must not stop the others
        log.exception("on_durable callback failed")


__all__ = ["AppendInput", "AppendResult", "OnDurable"]
