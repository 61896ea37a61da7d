"""``$JS.API.DIRECT.GET``: stored messages answered as messages, not JSON (no trio).

Theory of operation
-------------------
A stream with ``allow_direct`` answers ``$JS.API.DIRECT.GET.<stream>`` (a
JSON ``JSApiMsgGetRequest``) and ``$JS.API.DIRECT.GET.<stream>.<subject>``
(last message on that subject, empty body) with the stored message itself:
its own headers plus ``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence`` and
``Nats-Time-Stamp``, or a status message (404 Message Not Found / No Results,
408 Empty / Malformed / Bad Request, 413 Too Many Results). nats-server's
rules (server/stream.go processDirectGetRequest, getDirectRequest,
getDirectMulti), wire facts only:

* **One message**: ``seq``, ``last_by_subj``, ``next_by_subj`` (from ``seq``,
  wildcards allowed) or ``start_time``.
* **Batch** (``batch`` > 0): up to ``batch`` messages from ``seq`` (matching
  ``next_by_subj`` if given), each with ``Nats-Num-Pending`` (matching
  messages after it) and ``Nats-Last-Sequence`` (the previous one sent), then
  a ``204 EOB`` status carrying both; ``max_bytes`` stops it early.
* **Multi last** (``multi_last``: subject filters): the last message of every
  matching subject up to ``up_to_seq`` / ``up_to_time``, in stream order, at
  most :data:`MAX_MULTI` subjects (413 past it), then ``204 EOB`` with
  ``Nats-UpTo-Sequence`` as well.
* ``no_hdr``: the messages go without any header.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from core.subjects import subject_matches

from .pull import Out, add_headers, status
from .streams import go_time, parse_go_time
from ..translate import canonical_to_nats

if TYPE_CHECKING:  # pragma: no cover
    from .streams import JetStreams, JsStream

DIRECT_PREFIX = "$JS.API.DIRECT.GET."
MAX_MULTI = 1024                      # nats-server's maxAllowedResponses for multi_last
DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # nats-server's MAX_PENDING_SIZE when max_bytes is unset


def direct_get(streams: "JetStreams", subject: str, payload: bytes, inbox: str) -> list[Out]:
    """The replies to one direct get; an empty list: nobody answers (no such
    stream, or one without ``allow_direct``)."""
    name, _, last_for = subject[len(DIRECT_PREFIX):].partition(".")
    st = streams.streams.get(name)
    if st is None or not st.config["allow_direct"]:
        return []
    req: dict = {}
    if payload.strip():
        try:
            req = json.loads(payload)
            if not isinstance(req, dict):
                raise ValueError
        except (ValueError, UnicodeDecodeError, RecursionError):  # deep nesting too (api.loads_request)
            return [status(inbox, 408, "Malformed Request")]
    seq, last, after = _int(req.get("seq")), req.get("last_by_subj") or "", req.get("next_by_subj") or ""
    batch, multi, start = _int(req.get("batch")), req.get("multi_last") or [], req.get("start_time")
    if last_for:
        if seq or last or after or batch or multi or start or req.get("up_to_seq") or req.get("up_to_time"):
            return [status(inbox, 408, "Bad Request")]
        last = last_for
    elif not payload.strip() or not (seq or last or after or multi or start):
        return [status(inbox, 408, "Empty Request")]
    if (seq and last) or (seq and start) or (start and last) or (last and after) or (last and batch) \
            or (last and multi) or (after and multi) or (req.get("up_to_seq") and req.get("up_to_time")):
        return [status(inbox, 408, "Bad Request")]
    if start:
        seq = streams.seq_at_time(st, parse_go_time(start))
    headers = not req.get("no_hdr")
    if multi:
        return _multi_last(streams, st, inbox, multi, seq, req, headers)
    if batch:
        return _batch(streams, st, inbox, seq, after or ">", batch, _int(req.get("max_bytes")), headers)
    view = streams.find(st, seq, last, after)
    if view is None:
        return [status(inbox, 404, "Message Not Found")]
    return [reply(inbox, st.name, streams.subject_of(st, view), view, headers)]


def reply(inbox: str, stream: str, subject: str, view, headers: bool = True,
          extra: tuple[tuple[str, int], ...] = ()) -> Out:
    """One message: its own headers, then nats-server's (``extra``: the batch counters)."""
    if not headers:
        return Out(inbox, block=b"", payload=bytes(view.payload))
    block = canonical_to_nats(view.headers) if len(view.headers) else b""
    block = add_headers(block, (("Nats-Stream", stream), ("Nats-Subject", subject),
                                ("Nats-Sequence", view.offset + 1),
                                ("Nats-Time-Stamp", go_time(view.timestamp * 1000))) + extra)
    return Out(inbox, block=block, payload=bytes(view.payload))


def _matching(streams: "JetStreams", st: "JsStream", seq: int, subject: str, upto: int):
    """Visible records from ``seq`` to ``upto`` whose subject ``subject`` matches, in order."""
    for view in streams._forwards(st, max(seq, streams.first_seq(st)), upto):
        if streams.visible(st, view.offset + 1) and subject_matches(subject, streams.subject_of(st, view)):
            yield view


def _batch(streams, st, inbox, seq, subject, batch, max_bytes, headers) -> list[Out]:
    # Keep only what goes out (``batch`` records, up to ``max_bytes``); the rest is counted.
    limit = max_bytes or DEFAULT_MAX_BYTES
    chosen: list = []
    total = chosen_bytes = 0
    for view in _matching(streams, st, seq, subject, streams.last_seq(st)):
        total += 1
        if len(chosen) < batch and chosen_bytes < limit:
            chosen.append(view)
            chosen_bytes += len(streams.subject_of(st, view)) + len(view.headers) + len(view.payload)
    if not total:
        return [status(inbox, 404, "Message Not Found")]
    out: list[Out] = []
    pending, sent_seq = total, 0
    for view in chosen:
        pending -= 1
        out.append(reply(inbox, st.name, streams.subject_of(st, view), view, headers,
                         (("Nats-Num-Pending", pending), ("Nats-Last-Sequence", sent_seq))))
        sent_seq = view.offset + 1
    out.append(status(inbox, 204, "EOB", [("Nats-Num-Pending", str(pending)),
                                          ("Nats-Last-Sequence", str(sent_seq))]))
    return out


def _multi_last(streams, st, inbox, filters, seq, req, headers) -> list[Out]:
    upto = _int(req.get("up_to_seq"))
    if req.get("up_to_time"):
        upto = streams.seq_at_time(st, parse_go_time(req["up_to_time"])) - 1    # the last one before it
        if upto + 1 <= streams.first_seq(st):
            return [status(inbox, 404, "No Results")]
    upto = upto or streams.last_seq(st)
    lasts: dict[str, int] = {}
    for view in _matching(streams, st, 1, ">", upto):
        subj = streams.subject_of(st, view)
        if any(subject_matches(f, subj) for f in filters):
            lasts[subj] = view.offset + 1
            if len(lasts) > MAX_MULTI:
                return [status(inbox, 413, "Too Many Results")]
    seqs = sorted(lasts.values())
    if not seqs:
        return [status(inbox, 404, "No Results")]
    out: list[Out] = []
    pending, sent_seq, sent, sent_bytes = len(seqs), 0, 0, 0
    limit, batch = _int(req.get("max_bytes")) or DEFAULT_MAX_BYTES, _int(req.get("batch"))
    for q in seqs:
        pending -= 1
        if q < seq:
            continue
        view = streams.record(st, q)
        subj = streams.subject_of(st, view)
        out.append(reply(inbox, st.name, subj, view, headers,
                         (("Nats-Num-Pending", pending), ("Nats-Last-Sequence", sent_seq))))
        sent_seq, sent = q, sent + 1
        sent_bytes += len(subj) + len(view.headers) + len(view.payload)
        if sent_bytes >= limit or (batch and sent >= batch):
            break
    out.append(status(inbox, 204, "EOB", [("Nats-Num-Pending", str(pending)), ("Nats-Last-Sequence", str(sent_seq)),
                                          ("Nats-UpTo-Sequence", str(upto))]))
    return out


def _int(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


__all__ = ["DIRECT_PREFIX", "MAX_MULTI", "direct_get", "reply"]
