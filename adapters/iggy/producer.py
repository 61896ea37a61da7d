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

from core.message import HeaderKind, Headers

from .errors import IggyError, IggyStatus
from .messages import MIDDLE_HEADER, StoredBatch

PRODUCER_ID_KEY = "ferry-producer-id"
PRODUCER_SEQ_KEY = "ferry-producer-seq"
_MARK = b"ferry-producer-"  # cheap pre-check: only blocks containing it are decoded
_I64_MAX = (1 << 63) - 1


def _untag(block) -> tuple[bytes, tuple[str, int]] | None:
    """``(header block without the tag, producer)`` for a TLV block carrying the
    tag, ``None`` when it carries none. Raises IggyStatus 4019 for a malformed tag."""
    if _MARK not in block:
        return None
    headers = Headers.decode(bytes(block))
    pid, seq = headers.get(PRODUCER_ID_KEY), headers.get(PRODUCER_SEQ_KEY)
    if pid is None and seq is None:
        return None
    if pid is None or seq is None or pid.kind is not HeaderKind.STRING \
            or seq.kind not in (HeaderKind.INT64, HeaderKind.UINT64) or not 0 <= seq.as_int() <= _I64_MAX:
        raise IggyStatus(IggyError.INVALID_HEADER_VALUE,
                         f"{PRODUCER_ID_KEY} (string) and {PRODUCER_SEQ_KEY} (int64 >= 0) go together")
    headers.remove(PRODUCER_ID_KEY)
    headers.remove(PRODUCER_SEQ_KEY)
    return (headers.encode() if len(headers) else b""), (pid.as_str(), seq.as_int())


def take_producer_block(batch: StoredBatch) -> tuple[bytearray, tuple[str, int] | None]:
    """``(block, producer)`` for a send in the stored layout: the tag is taken
    from the first record, which is then laid out again without it (the rest of
    the block is copied once; untagged sends, the usual case, are not touched)."""
    data = batch.data
    _c, lo, hi, _o, _t, origin, hlen, plen, _r = MIDDLE_HEADER.unpack_from(data, 0)
    if not hlen:
        return data, None
    start = MIDDLE_HEADER.size + plen
    found = _untag(data[start : start + hlen])
    if found is None:
        return data, None
    headers, producer = found
    head = MIDDLE_HEADER.pack(0, lo, hi, 0, 0, origin, len(headers), plen, 0)
    return bytearray().join((head, data[MIDDLE_HEADER.size : start], headers, data[start + hlen :])), producer


__all__ = ["PRODUCER_ID_KEY", "PRODUCER_SEQ_KEY", "take_producer_block"]
