"""The console's message browser: ``GET /console/api/streams/{s}/topics/{t}/messages``.

Theory of operation
-------------------
A browse is a bounded, read-only scan of one partition or of all a topic's partitions. It
stores no consumer offset; like a poll it delivers messages to a client, so what it returns
counts in ``messages_out``/``bytes_out`` of the HTTP listener.

*Position.* Per partition a **boundary** b splits the log: offsets below b are *older*,
offsets at or above b are *newer*. A **cursor** is every browsed partition's boundary, as
text ``"0:120,1:87"`` (partition:boundary), so a page can be linked, retried and read by a
person. ``dir=older`` takes records below the boundaries, newest first; ``dir=newer`` takes
records at or above them, oldest first. Every answer carries the cursor of the page *below*
it (``older``) and *above* it (``newer``), or null when nothing is there (yet).

*Several partitions* are merged into one time line by ``(timestamp, partition, offset)``:
append times never decrease within a partition (core/log), so that order agrees with each
partition's own, and a page of "all partitions" is the newest (or oldest) ``count`` messages
of the topic, not ``count`` of each.

*Jumps.* ``offset=N`` and ``time=T`` (µs since the epoch) set the starting boundaries:
going older, a page starts at offset N (at the last message stored at or before T);
going newer, at offset N (at the first message stored at or after T). The time jump uses
the partition's time index (``offset_for_timestamp``, a bisection over segments and their
time index; the same lookup an Iggy poll by timestamp makes), not a scan.

*Filters* (header key and optional value, message key, payload text) make a scan read
records that it does not return. A request reads at most :data:`MAX_SCAN_RECORDS` records
and :data:`MAX_SCAN_BYTES` stored bytes, then stops (``scan.stopped == "limit"``) with
the cursor of where it got to, and the next request in the same direction continues there.

*A message's key* differs per protocol. Shown and matched, in this order:
``Ferry-Partition-Key`` (the NATS header that picks a partition, Kafka's record key in
spirit: docs/addressing.md), else ``ferry-nats-subject`` (the subject a NATS publish
used; a ``key`` filter may be a NATS wildcard pattern then), else the message id (the Iggy
message id, u128, which Iggy and HTTP senders may set; 32 hex digits or decimal). Iggy's
and HTTP's ``messages_key`` partitioning key is only hashed to pick a partition and is not
stored (as on Iggy), so such messages are found by id.
"""

from __future__ import annotations

import heapq
import json
import re
from dataclasses import dataclass, field

from core.addressing import PARTITION_KEY_HEADER, SUBJECT_HEADER
from core.errors import InvalidSubject
from core.header_value import MAX_HEADER_FIELD, HeaderKind
from core.log import Partition
from core.message import Headers, Message
from core.permissions import Action
from core.record import RecordView
from core.subjects import is_literal, is_valid_pattern, subject_matches

from . import models
from .handler import App, Ctx, Route, json_response
from .limits import MAX_POLL_BYTES, MAX_POLL_COUNT
from .routes_console import infer_origin
from .routes_streams import topic_of

# A page is one screen: more would only make the page slow to render.
MAX_BROWSE_COUNT = 100
DEFAULT_COUNT = 20
# Payload bytes shown per message (text, hex, base64 and JSON views); the full size is
# reported beside them. Pretty JSON is offered only for a payload that fits whole.
MAX_PREVIEW_BYTES = 4096
# What one request may read while filtering: no more than one HTTP poll may return
# (limits.py). The scan runs on the event loop like a poll, so this also bounds how long
# one browse holds it.
MAX_SCAN_RECORDS = MAX_POLL_COUNT
MAX_SCAN_BYTES = MAX_POLL_BYTES
# Records read per partition per read call while filtering: large enough that a scan is a
# few dozen reads, small enough that the records of many partitions read ahead of the merge
# stay within the scan's budget (each read also takes no more than its share of it).
READ_CHUNK = 256
# Filter values: a header key or value is at most 255 bytes (core/header_value.py), so a
# longer header or key filter could never match; payload text gets a little more room.
MAX_TEXT_FILTER_BYTES = 1024
_U128_LIMIT = 2**128
_CURSOR_ITEM = re.compile(r"(\d{1,10}):(\d{1,20})")

QUERY = ("partition_id", "count", "order", "dir", "cursor", "offset", "time", "header", "header_value", "key",
         "text")


# -- what a browse asks for ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KeyQuery:
    """A ``key`` filter, parsed once per request."""

    text: str
    msg_id: int | None  # the text read as a message id (32 hex digits, or decimal)
    pattern: bool  # a NATS wildcard pattern, matched against the subject

    @classmethod
    def parse(cls, text: str) -> KeyQuery:
        msg_id = None
        if len(text) == 32 and all(c in "0123456789abcdefABCDEF" for c in text):
            msg_id = int(text, 16)
        elif text.isascii() and text.isdigit() and int(text) < _U128_LIMIT:
            msg_id = int(text)
        return cls(text, msg_id, not is_literal(text) and is_valid_pattern(text))


@dataclass(frozen=True, slots=True)
class Filter:
    """What a message must have to be returned; all given conditions must hold."""

    header: str | None = None  # header key text, compared without case (nats.go once canonicalised keys)
    header_value: str | None = None  # exact text form of that header's value
    key: KeyQuery | None = None
    text: bytes | None = None  # lower-cased UTF-8, found in the lower-cased payload (ASCII case folding)

    @property
    def active(self) -> bool:
        return self.header is not None or self.key is not None or self.text is not None

    def matches(self, view: RecordView) -> bool:
        if self.text is not None and self.text not in bytes(view.payload).lower():
            return False
        if self.header is None and self.key is None:
            return True
        try:
            headers = Headers.decode(view.headers) if len(view.headers) else Headers()
        except Exception:  # noqa: BLE001 - a block that no longer decodes has no header to match
            return False
        if self.header is not None and not any(
                k.to_text().lower() == self.header and (self.header_value is None or v.to_text() == self.header_value)
                for k, v in headers.items()):
            return False
        return self.key is None or key_matches(self.key, view.id, headers)


def message_key(msg_id: int, headers: Headers) -> tuple[str, str]:
    """(key text, where it came from) of a message: module docstring, "A message's key"."""
    pkey = _partition_key(headers)
    if pkey is not None:
        return pkey, PARTITION_KEY_HEADER
    subject = headers.get(SUBJECT_HEADER)
    if subject is not None:
        return subject.to_text(), SUBJECT_HEADER
    return f"{msg_id:032x}", "id"


def key_matches(query: KeyQuery, msg_id: int, headers: Headers) -> bool:
    """Whether a message's partition key, NATS subject (or subject pattern) or id is ``query``."""
    if query.msg_id is not None and query.msg_id == msg_id:
        return True
    if _partition_key(headers) == query.text:
        return True
    subject = headers.get(SUBJECT_HEADER)
    if subject is None:
        return False
    text = subject.to_text()
    if text == query.text:
        return True
    try:
        return query.pattern and subject_matches(query.text, text)
    except InvalidSubject:
        return False


_PKEY = PARTITION_KEY_HEADER.lower().encode()


def _partition_key(headers: Headers) -> str | None:
    """The first ``Ferry-Partition-Key`` value, its key compared without case as the NATS
    adapter does when it picks the partition (adapters/nats/session.py)."""
    for k, v in headers.items():
        if k.kind is HeaderKind.STRING and k.data.lower() == _PKEY:
            return v.to_text()
    return None


@dataclass(frozen=True, slots=True)
class BrowseQuery:
    partitions: tuple[int, ...]
    count: int
    newest_first: bool  # the order rows are shown in
    older: bool  # the direction this request scans
    cursor: dict[int, int] | None
    offset: int | None
    time_us: int | None
    filter: Filter


def _choice(ctx: Ctx, name: str, options: tuple[str, str], default: str) -> str:
    value = ctx.query.get(name) or default
    if value not in options:
        raise models.bad_field(name, f"must be {options[0]} or {options[1]}")
    return value


def _text(ctx: Ctx, name: str, limit: int) -> str | None:
    value = ctx.query.get(name)
    if value is None or value == "":
        return None
    if len(value.encode("utf-8", "surrogatepass")) > limit:
        raise models.bad_field(name, f"must be at most {limit} bytes")
    return value


def parse_cursor(text: str, partitions: tuple[int, ...]) -> dict[int, int]:
    """``"p:b,p:b"`` -> {partition: boundary}; it must name exactly ``partitions``. 400 otherwise."""
    out: dict[int, int] = {}
    for item in text.split(","):
        m = _CURSOR_ITEM.fullmatch(item)
        if m is None:
            raise models.bad_field("cursor", "must be partition:offset pairs separated by commas")
        pid, boundary = int(m.group(1)), int(m.group(2))
        if pid in out:
            raise models.bad_field("cursor", f"names partition {pid} twice")
        out[pid] = boundary
    if set(out) != set(partitions):
        raise models.bad_field("cursor", f"must name partitions {','.join(map(str, partitions))}")
    return out


def parse_query(ctx: Ctx, partitions_count: int) -> BrowseQuery:
    """The browse parameters (docs/http.md "Web console"); 400 naming the field when one is bad."""
    pid_text = ctx.query.get("partition_id")
    if pid_text is None or pid_text == "":
        partitions = tuple(range(partitions_count))
    else:
        pid = ctx.q_int("partition_id", 0, 0, models.U32_MAX)
        if pid >= partitions_count:
            raise models.bad_field("partition_id", f"the topic has partitions 0..{partitions_count - 1}")
        partitions = (pid,)
    count = ctx.q_int("count", DEFAULT_COUNT, 1, MAX_BROWSE_COUNT)
    newest_first = _choice(ctx, "order", ("newest", "oldest"), "newest") == "newest"
    older = _choice(ctx, "dir", ("older", "newer"), "older" if newest_first else "newer") == "older"
    given = [name for name in ("cursor", "offset", "time") if ctx.query.get(name)]
    if len(given) > 1:
        raise models.bad_field(given[1], "give one of cursor, offset and time")
    cursor_text = ctx.query.get("cursor")
    cursor = parse_cursor(cursor_text, partitions) if cursor_text else None
    offset = ctx.q_int("offset", None) if "offset" in given else None
    time_us = ctx.q_int("time", None) if "time" in given else None
    header = _text(ctx, "header", MAX_HEADER_FIELD)
    header_value = _text(ctx, "header_value", MAX_HEADER_FIELD)
    if header_value is not None and header is None:
        raise models.bad_field("header_value", "needs header (the key whose value to match)")
    key = _text(ctx, "key", MAX_HEADER_FIELD)
    text = _text(ctx, "text", MAX_TEXT_FILTER_BYTES)
    flt = Filter(header=None if header is None else header.lower(), header_value=header_value,
                 key=None if key is None else KeyQuery.parse(key),
                 text=None if text is None else text.encode("utf-8", "surrogatepass").lower())
    return BrowseQuery(partitions, count, newest_first, older, cursor, offset, time_us, flt)


def start_boundaries(q: BrowseQuery, parts: dict[int, Partition]) -> dict[int, int]:
    """Each partition's boundary before the scan, inside first_offset..next_offset."""
    out = {}
    for pid, part in parts.items():
        if q.cursor is not None:
            b = q.cursor[pid]
        elif q.offset is not None:
            b = q.offset + 1 if q.older else q.offset  # the page starts at offset N either way
        elif q.time_us is not None:  # older: stored at or before T; newer: at or after T
            b = part.offset_for_timestamp(q.time_us + 1 if q.older else q.time_us)
        else:
            b = part.next_offset if q.older else part.first_offset
        out[pid] = min(max(b, part.first_offset), part.next_offset)
    return out


# -- the scan -----------------------------------------------------------------------------
@dataclass(slots=True)
class _Lane:
    """One partition in a scan: its boundary and the records read, in pop order, not yet taken."""

    pid: int
    part: Partition
    boundary: int
    buf: list[RecordView] = field(default_factory=list)
    i: int = 0
    filled: bool = False  # read at least once in this request


@dataclass(slots=True)
class ScanResult:
    found: list[tuple[int, RecordView]]  # (partition, record), in scan order
    boundaries: dict[int, int]  # where the scan got to
    examined: int  # records compared with the filter
    records_read: int
    bytes_read: int
    stopped: str  # "page" (count found), "end" (nothing more that way) or "limit" (budget spent)


class _Budget:
    def __init__(self, records: int, nbytes: int) -> None:
        self.records, self.bytes = records, nbytes


def _window(part: Partition, lo: int, hi: int, budget: _Budget) -> tuple[list[RecordView], bool]:
    """Records ``lo <= offset < hi`` in offset order, and whether they reach ``hi`` (False:
    the byte budget ran out first). The first read returns at least one record whatever
    the budget (core/log ``read``); reads go on past a gap (a quarantined segment)."""
    out: list[RecordView] = []
    pos = lo
    while pos < hi:
        if out and budget.bytes <= 0:
            return out, False
        batch = part.read(pos, hi - pos, max(budget.bytes, 0))
        if not batch.count:
            break
        budget.bytes -= batch.nbytes
        for rv in batch.records():
            if rv.offset >= hi:  # the read jumped over a gap past the window
                return out, True
            out.append(rv)
        pos = batch.next_offset
    return out, True


def _below_gap(part: Partition, lo: int) -> int:
    """Where records resume below ``lo`` when nothing is stored just below it: the end of the
    last segment that ends at or before ``lo`` (a quarantined segment leaves such a gap,
    core/log/salvage.py), so a scan steps over the gap at once, not a window at a time."""
    ends = [base + count for base, count, _size in part.segment_positions() if count and base + count <= lo]
    return max(ends, default=part.first_offset)


def _refill(lane: _Lane, older: bool, chunk: int, budget: _Budget) -> str:
    """Read ``lane``'s next records: "ready", "end" (none left that way) or "limit". A lane
    not read yet in this request reads one record even past the budget, so that every
    request takes at least one record when there is one and a chain of continuations
    always moves (as a poll returns one record larger than its byte limit)."""
    part = lane.part
    while True:
        if (lane.boundary <= part.first_offset) if older else (lane.boundary >= part.next_offset):
            return "end"
        spent = budget.records <= 0 or budget.bytes <= 0
        if spent and lane.filled:
            return "limit"
        n = 1 if spent else max(1, min(chunk, budget.records))
        if older:
            lo = max(lane.boundary - n, part.first_offset)
            recs, whole = _window(part, lo, lane.boundary, budget)
            budget.records -= max(len(recs), 1)  # an empty window (a gap) still costs a step
            if not whole:  # only the oldest part of the window, which cannot go first: the
                continue   # budget is spent now, so this says "limit" or reads one record
            if not recs:
                lane.boundary = min(lo, _below_gap(part, lo))  # nothing stored there: step over it
                continue
            recs.reverse()
        else:
            batch = part.read(lane.boundary, n, max(budget.bytes, 0))
            if not batch.count:
                return "end"
            budget.bytes -= batch.nbytes
            recs = list(batch.records())
            budget.records -= len(recs)
        lane.buf, lane.i, lane.filled = recs, 0, True
        return "ready"


def scan(parts: dict[int, Partition], start: dict[int, int], older: bool, count: int, flt: Filter, *,
         max_records: int = MAX_SCAN_RECORDS, max_bytes: int = MAX_SCAN_BYTES) -> ScanResult:
    """Up to ``count`` records matching ``flt`` from ``start`` in one direction, merged over
    ``parts`` by (timestamp, partition, offset); module docstring. Reads at most
    ``max_records`` records and ``max_bytes`` stored bytes, plus at most one record per
    partition so that every request moves (:func:`_refill`)."""
    lanes = [_Lane(pid, parts[pid], start[pid]) for pid in sorted(parts)]
    budget = _Budget(max_records, max_bytes)
    sign = -1 if older else 1
    heap: list[tuple[int, int, int, int]] = []  # (timestamp, partition, offset), signed; lane index
    found: list[tuple[int, RecordView]] = []
    live = len(lanes)  # lanes not at their end
    examined = 0

    def chunk(lane: _Lane) -> int:
        # unfiltered, no lane needs more than the rest of the page, and at first only its
        # share of it; filtered, READ_CHUNK. Never more than the lane's share of the budget.
        need = READ_CHUNK if flt.active else count - len(found)
        if not lane.filled:
            need = -(-need // live)
        return max(1, min(need, budget.records // live))

    def result(stopped: str) -> ScanResult:
        return ScanResult(found, {lane.pid: lane.boundary for lane in lanes}, examined,
                          max_records - budget.records, max_bytes - budget.bytes, stopped)

    pending = list(range(len(lanes)))  # lanes whose next record is not in the heap
    while True:
        for li in pending:
            lane = lanes[li]
            state = _refill(lane, older, chunk(lane), budget)
            if state == "limit":
                return result("limit")
            if state == "end":
                live -= 1
                continue
            rv = lane.buf[lane.i]
            heapq.heappush(heap, (sign * rv.timestamp, sign * lane.pid, sign * rv.offset, li))
        if not heap:
            return result("end")
        *_, li = heapq.heappop(heap)
        lane = lanes[li]
        rv = lane.buf[lane.i]
        lane.i += 1
        lane.boundary = rv.offset if older else rv.offset + 1
        examined += 1
        if flt.matches(rv):
            found.append((lane.pid, rv))
            if len(found) >= count:
                return result("page")
        if lane.i < len(lane.buf):
            nxt = lane.buf[lane.i]
            heapq.heappush(heap, (sign * nxt.timestamp, sign * lane.pid, sign * nxt.offset, li))
            pending = []
        else:
            pending = [li]


# -- what a message looks like on the page ---------------------------------------------------------
# The text view escapes what would not show, in Python's repr notation: a backslash is
# doubled, so every backslash starts an escape and the page can mark escapes apart from
# the text; \n \r \t; \xNN for other control bytes and for bytes that are not UTF-8;
# \uXXXX for C1 controls and invisible format characters (zero-width, bidi overrides that
# could reorder the text around them, BOM). Plain ASCII on purpose: U+2400 "control
# pictures" are missing from common fonts (DejaVu among them: Chromium drew boxes).
_INVISIBLE = (*range(0x80, 0xA0), 0xAD, 0x061C, 0x180E, *range(0x200B, 0x2010), *range(0x2028, 0x202F),
              *range(0x2060, 0x2065), *range(0x2066, 0x206A), 0xFEFF, *range(0xFFF9, 0xFFFC))
_ESCAPES = {0x5C: "\\\\", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}
_ESCAPES.update({c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F) if c not in _ESCAPES})
_ESCAPES.update({0xDC00 + b: f"\\x{b:02x}" for b in range(0x80, 0x100)})  # "surrogateescape" bytes
_ESCAPES.update({c: f"\\u{c:04x}" for c in _INVISIBLE})
# JSON escapes its own controls and backslashes; the rest become JSON escapes too
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in (0x7F, *_INVISIBLE)}


def escaped(text: str) -> str:
    """``text`` with the text view's escapes (above)."""
    return text.translate(_ESCAPES)


def _utf8_end(preview: bytes, cut: bool) -> int | None:
    """Length of ``preview`` that is whole UTF-8 (a character cut at the limit leaves at most
    3 bytes of it, dropped), or None when it is not UTF-8."""
    for drop in range(4 if cut else 1):
        try:
            preview[:len(preview) - drop].decode("utf-8")
            return len(preview) - drop
        except UnicodeDecodeError:
            continue
    return None


def payload_preview(payload: bytes) -> tuple[str, str]:
    """(text, "utf-8") when the first MAX_PREVIEW_BYTES are UTF-8 (a character cut at the
    limit is dropped), else (standard base64 of them, "base64")."""
    preview = payload[:MAX_PREVIEW_BYTES]
    end = _utf8_end(preview, len(payload) > MAX_PREVIEW_BYTES)
    if end is None:
        return models.b64(preview), "base64"
    return preview[:end].decode("utf-8"), "utf-8"


def payload_text(payload: bytes) -> str:
    """The preview as text anyone can read, escaped (:func:`escaped`)."""
    preview = payload[:MAX_PREVIEW_BYTES]
    end = _utf8_end(preview, len(payload) > MAX_PREVIEW_BYTES)
    return escaped(preview[:end if end is not None else len(preview)].decode("utf-8", "surrogateescape"))


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")  # Python's json reads NaN and Infinity; JSON has neither


def payload_json(payload: bytes) -> str | None:
    """The payload pretty-printed (2-space indent) when all of it is one JSON value and fits
    the preview; else None. Python's json keeps every number's digits (a browser's
    JSON.parse would round integers past 2**53)."""
    if len(payload) > MAX_PREVIEW_BYTES or not payload.strip():
        return None
    try:
        value = json.loads(payload, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return json.dumps(value, indent=2, ensure_ascii=False).translate(_JSON_ESCAPES)


def _field(value) -> dict:
    return {"kind": value.kind.json_name, "text": value.to_text()}


def message_entry(pid: int, msg: Message, stream: str, pravega_visible: bool) -> dict:
    origin = infer_origin(msg.headers, stream, pravega_visible)
    text, encoding = payload_preview(msg.payload)
    key, key_source = message_key(msg.id, msg.headers)
    return {"partition_id": pid, "offset": msg.offset, "id": f"{msg.id:032x}", "timestamp": msg.timestamp,
            "origin_timestamp": msg.origin_timestamp or msg.timestamp,
            "key": {"text": key, "source": key_source},
            "headers": [{"key": _field(k), "value": _field(v)} for k, v in msg.headers.items()],
            "payload": text, "payload_encoding": encoding, "payload_size": len(msg.payload),
            "payload_text": payload_text(msg.payload), "payload_json": payload_json(msg.payload),
            "origin": origin.protocol, "origin_evidence": origin.evidence}


def cursor_text(boundaries: dict[int, int]) -> str:
    return ",".join(f"{pid}:{b}" for pid, b in sorted(boundaries.items()))


# -- the route ------------------------------------------------------------------------------------
def browse_messages(app: App, ctx: Ctx):
    """One page of messages (module docstring; parameters and answer in docs/http.md "Web
    console"). Permission: poll_messages. Consumer offsets are not touched."""
    topic = topic_of(app, ctx)
    ctx.require(Action.POLL_MESSAGES, topic.stream_id, topic.id)
    stream_name = app.broker.get_stream(topic.stream_id).name
    q = parse_query(ctx, topic.partitions_count)
    parts = {pid: app.broker.partition(topic.stream_id, topic.id, pid) for pid in q.partitions}
    start = start_boundaries(q, parts)
    result = scan(parts, start, q.older, q.count, q.filter)
    pravega = app.broker.addressing.pravega_names_for(stream_name, topic.name) is not None
    messages = []
    for pid, view in result.found:
        try:
            msg = Message.from_record(view)
        except Exception:  # noqa: BLE001 - a stored header block that no longer decodes: show the rest
            messages.append({"partition_id": pid, "offset": view.offset, "timestamp": view.timestamp,
                             "payload_size": len(view.payload), "error": "header block does not decode"})
            continue
        messages.append(message_entry(pid, msg, stream_name, pravega))
    if q.older != q.newest_first:  # scanned against the order shown
        messages.reverse()
    below, above = (result.boundaries, start) if q.older else (start, result.boundaries)
    # a browse delivers messages to a client like a poll does, so it counts as one
    app.counters["messages_out"].inc(app.listener, amount=len(messages))
    app.counters["bytes_out"].inc(app.listener, amount=sum(m["payload_size"] for m in messages))
    return json_response({
        "order": "newest" if q.newest_first else "oldest", "dir": "older" if q.older else "newer",
        "partitions": [{"id": pid, "first_offset": p.first_offset, "next_offset": p.next_offset}
                       for pid, p in parts.items()],
        "messages": messages,
        "older": cursor_text(below) if any(b > parts[pid].first_offset for pid, b in below.items()) else None,
        "newer": cursor_text(above) if any(b < parts[pid].next_offset for pid, b in above.items()) else None,
        "scan": {"stopped": result.stopped, "examined": result.examined, "records_read": result.records_read,
                 "bytes_read": result.bytes_read, "position": cursor_text(result.boundaries),
                 "filtered": q.filter.active, "max_records": MAX_SCAN_RECORDS, "max_bytes": MAX_SCAN_BYTES},
    })


ROUTES = [
    Route("GET", "/console/api/streams/{stream_id}/topics/{topic_id}/messages", browse_messages, entity="topic",
          query=QUERY),
]

__all__ = ["MAX_BROWSE_COUNT", "MAX_SCAN_BYTES", "MAX_SCAN_RECORDS", "ROUTES", "Filter", "KeyQuery",
           "message_key", "payload_json", "payload_preview", "payload_text", "scan", "escaped"]
