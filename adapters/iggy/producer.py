"""Idempotent sends over Iggy: a Ferry extension carried in two reserved headers.

Theory of operation
-------------------
The core de-duplicates appends per partition by producer: an append tagged
``(producer id, sequence)`` whose sequence is not above the last one stored
for that id is dropped and acknowledged as a duplicate (``core/log``; the
table is stored with the batches, so it survives restarts). Iggy's wire
protocol has no field for that, so a SendMessages may carry it in the
**first** message's user headers:

* ``ferry-producer-id``  STRING, 1..255 bytes (``core.log.batch.check_producer_id``)
* ``ferry-producer-seq`` INT64 or UINT64 (<= i64 max; the core stores i64)

Both are removed before the message is stored, so readers never see them.
A send whose first message has neither header is an ordinary send: every
Iggy client keeps its behaviour. Used by the Spark sink (docs/spark.md),
keyed by (query id, batch id, task partition). Malformed tags are the
sender's fault: 4019 InvalidHeaderValue, nothing stored.
"""

from __future__ import annotations

import dataclasses

from core.message import HeaderKind, Headers

from .errors import IggyError, IggyStatus

PRODUCER_ID_KEY = "ferry-producer-id"
PRODUCER_SEQ_KEY = "ferry-producer-seq"
_MARK = b"ferry-producer-"  # cheap pre-check: only blocks containing it are decoded
_I64_MAX = (1 << 63) - 1


def take_producer(items: list) -> tuple[list, tuple[str, int] | None]:
    """``(items, producer)``: the producer tag of the first item, removed from it,
    or ``None`` when untagged. Raises IggyStatus 4019 for a malformed tag."""
    first = items[0]
    if _MARK not in first.headers:
        return items, None
    headers = Headers.decode(first.headers)
    pid, seq = headers.get(PRODUCER_ID_KEY), headers.get(PRODUCER_SEQ_KEY)
    if pid is None and seq is None:
        return items, None
    if pid is None or seq is None or pid.kind is not HeaderKind.STRING \
            or seq.kind not in (HeaderKind.INT64, HeaderKind.UINT64) or not 0 <= seq.as_int() <= _I64_MAX:
        raise IggyStatus(IggyError.INVALID_HEADER_VALUE,
                         f"{PRODUCER_ID_KEY} (string) and {PRODUCER_SEQ_KEY} (int64 >= 0) go together")
    headers.remove(PRODUCER_ID_KEY)
    headers.remove(PRODUCER_SEQ_KEY)
    items = list(items)
    items[0] = dataclasses.replace(first, headers=headers.encode() if len(headers) else b"")
    return items, (pid.as_str(), seq.as_int())


__all__ = ["PRODUCER_ID_KEY", "PRODUCER_SEQ_KEY", "take_producer"]
