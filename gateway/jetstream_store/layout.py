"""Ferry's durable state as NATS JetStream streams and messages (scale-out mode, no I/O).

Theory of operation
-------------------
docs/scale-out.md has the whole mapping; this module holds its exact bytes so
the JetStream store (gateway/jetstream_store/store.py) and the tests share one
definition.

* **Names.** Partition ``p`` of topic ``t`` in stream ``s`` is the JetStream
  stream ``<PREFIX>_P_<s>_<t>_<p>_<c>`` on the one subject
  ``<prefix>.p.<s>.<t>.<p>.<c>``, ``c`` being the topic's creation time in µs,
  followed by ``e<n>`` once it was purged ``n`` times (ids, not names: Ferry
  names may hold characters stream names may not, and renames then cost
  nothing; ``c`` tells a topic from a later one that reuses its ids, and a
  purge starts new streams, so offsets start again at 0). Stream sequence
  ``n`` is Ferry offset ``n - 1``.
  The metadata log is ``<PREFIX>_META`` on ``<prefix>.meta``. The prefix lets
  several Ferry deployments share a cluster.
* **Messages.** The payload is the NATS payload. The header block starts with
  one ``Ferry-Store`` line, ``1;<id hex>;<time µs>;<origin time µs>`` plus
  ``;<producer b64url>;<sequence>`` for an idempotent producer's call, then a
  ``Nats-Msg-Id`` line: ``<producer b64url>:<sequence>:<i>`` for a producer's
  call (so a call the client retries through another gateway is stored once);
  on a JetStream stream's partition, for a message whose own headers carry a
  ``Nats-Msg-Id``, ``js.<that id>`` (so a client's retry through another
  gateway is stored once, gateway/jetstream_store/msgids.py; ``.`` is in
  neither other form, so the ids cannot meet); else the message id in hex (so
  the gateway's own re-sends after a lost acknowledgement are stored once).
  JetStream drops a repeated id inside its duplicate window. The canonical headers follow as
  the NATS adapter writes them for subscribers (adapters/nats/translate.py,
  kinds in ``Ferry-Header-Kinds``, the publish subject kept), so a nats-py
  client reading the stream directly sees readable headers. A block whose
  user keys start with ``Nats-`` (JetStream acts on those) goes as one
  ``Ferry-Headers: <base64 TLV>`` line instead. Both are lossless.
* **Metadata log entries.** JSON ``{"v": 1, "s": [[sql, [params]], ...]}``
  with bytes parameters as ``{"b": "<base64>"}`` (core/metadb.py replays them).
* **API.** Stream configs, PubAck and API-error parsing, consumer configs for
  the mirrors, and the ``$JS.ACK`` reply subject's stream sequence.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from adapters.nats.headers import HeaderBlock, parse_headers
from adapters.nats.jetstream.errors import ERRORS
from adapters.nats.jetstream.fields import msg_id_of
from adapters.nats.translate import block_to_headers, canonical_to_nats
from core.errors import InvalidArgument

STORE_HEADER = "Ferry-Store"
# The cluster Nats-Msg-Id of a JetStream client's msg id (encode_message, msgids.py).
CLIENT_ID_PREFIX = "js."
# encode_message's ``client_ids`` for a partition whose topic has Iggy deduplication on:
# each message goes as ``iggy.<id hex>`` (iggyids.py).
IGGY_IDS = "iggy"
IGGY_ID_PREFIX = "iggy."
RAW_HEADERS = "Ferry-Headers"
MSG_ID = "Nats-Msg-Id"
# The publish path's chain (publisher.py): JetStream keeps the line in the stored block,
# as the block's last; decode_message drops it (never a user header: those are carried
# as Ferry-Headers when a key starts with "Nats-").
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
FORMAT = "1"
# JetStream error codes the store acts on, from the one table of them
# (adapters/nats/jetstream/errors.py, nats-server's server/errors.json names):
# a publish whose Nats-Expected-Last-Sequence did not match;
WRONG_LAST_SEQUENCE = ERRORS["JSStreamWrongLastSequenceErrF"].err_code
# "stream name already in use with a different configuration": another gateway
# created it first, with settings that may differ in a default;
STREAM_NAME_EXISTS = ERRORS["JSStreamNameExistErr"].err_code
STREAM_NOT_FOUND = ERRORS["JSStreamNotFoundErr"].err_code
# How long JetStream remembers Nats-Msg-Id values: the window in which a retried
# producer call is dropped as a duplicate (JetStream's own default is 2 minutes).
DUPLICATE_WINDOW_NS = 120 * 1_000_000_000
# Mirrors' idle heartbeat: how soon a mirror notices a gap or a silent server.
MIRROR_HEARTBEAT_NS = 5 * 1_000_000_000
NS_PER_US = 1000
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
# nats-server's PubAck for a stored, not duplicate, message (server/stream.go): {"stream":"S","seq":N}
_PLAIN_ACK = re.compile(rb'\{"stream":"[^"\\]*",\s*"seq":(\d+)\}')


@dataclass(frozen=True, slots=True)
class Layout:
    """Names for one Ferry deployment in a cluster (module docstring)."""

    prefix: str = "FERRY"
    replicas: int = 3

    def __post_init__(self) -> None:
        if not _PREFIX_RE.match(self.prefix):
            raise InvalidArgument(f"store prefix {self.prefix!r}: 1-32 of A-Z a-z 0-9 _ -")
        if not 1 <= self.replicas <= 5:  # JetStream's replica limit
            raise InvalidArgument(f"store replicas must be 1..5, got {self.replicas}")

    def partition_stream(self, sid: int, tid: int, pid: int, incarnation: object) -> str:
        return f"{self.prefix.upper()}_P_{sid}_{tid}_{pid}_{incarnation}"

    def partition_subject(self, sid: int, tid: int, pid: int, incarnation: object) -> str:
        return f"{self.prefix.lower()}.p.{sid}.{tid}.{pid}.{incarnation}"

    @property
    def meta_stream(self) -> str:
        return f"{self.prefix.upper()}_META"

    @property
    def meta_subject(self) -> str:
        return f"{self.prefix.lower()}.meta"

    def stream_config(self, name: str, subject: str, *, max_age_us: int = 0, max_bytes: int = 0,
                      duplicate_window_ns: int = DUPLICATE_WINDOW_NS) -> dict:
        """``$JS.API.STREAM.CREATE.<name>`` (and ``UPDATE``) body: file storage, limits
        retention, the deployment's replicas, direct gets on. The duplicate window is at
        most ``max_age``: nats-server refuses a longer one ("duplicates window can not be
        larger then max age", server/stream.go checkStreamCfg)."""
        max_age = max(0, max_age_us) * NS_PER_US
        window = min(duplicate_window_ns, max_age) if max_age else duplicate_window_ns
        return {
            "name": name, "subjects": [subject], "retention": "limits", "storage": "file",
            "num_replicas": self.replicas, "discard": "old", "duplicate_window": window,
            "max_age": max_age, "max_bytes": max_bytes or -1,
            "max_msgs": -1, "allow_direct": True,
        }


# -- stored messages -------------------------------------------------------------------
def encode_message(mid: int, timestamp: int, origin_timestamp: int, tlv: bytes,
                   producer: tuple[str, int] | None = None, index: int = 0, client_ids: bool = False) -> bytes:
    """The header block for one stored message (module docstring); ``client_ids``: the
    partition is a JetStream stream's, whose clients' msg ids the cluster de-duplicates."""
    hid = f"{mid:032x}"
    system = f"{FORMAT};{hid};{timestamp};{origin_timestamp}"
    if producer is not None:
        ptext = _b64url(producer[0].encode("utf-8", "surrogateescape"))
        head = f"NATS/1.0\r\n{STORE_HEADER}: {system};{ptext};{producer[1]}\r\n{MSG_ID}: {ptext}:{producer[1]}:{index}\r\n"
    else:
        if client_ids == IGGY_IDS:
            cid = IGGY_ID_PREFIX + hid
        else:
            cid = client_msg_id(tlv) if client_ids and tlv else None
        head = f"NATS/1.0\r\n{STORE_HEADER}: {system}\r\n{MSG_ID}: {cid or hid}\r\n"
    return head.encode("utf-8") + (_user_lines(bytes(tlv)) if tlv else b"") + b"\r\n"


def client_msg_id(tlv) -> str | None:
    """``js.<id>`` for a message whose canonical headers carry a ``Nats-Msg-Id`` (module
    docstring), else None. An id with a control character (a CR or LF would end the header
    line; only a record written by another protocol can hold one, a NATS header cannot)
    keeps the hex id: the gateway's own window still de-duplicates it."""
    found = msg_id_of(tlv)
    if not found or not found.isprintable():
        return None
    return CLIENT_ID_PREFIX + found


def _user_lines(tlv: bytes) -> bytes:
    """The ``Key: Value\\r\\n`` lines carrying a canonical block (cached: a producer's
    messages tend to repeat the same headers, a NATS subject's always do)."""
    lines = _USER_LINES.get(tlv)
    if lines is None:
        user = canonical_to_nats(tlv, drop_subject=False)
        block = parse_headers(user)
        if any(k.lower().startswith("nats-") for k, _ in block.items):
            lines = f"{RAW_HEADERS}: {base64.b64encode(tlv).decode('ascii')}\r\n".encode("ascii")
        else:
            lines = user[len(b"NATS/1.0\r\n"):-2]  # the block's lines, without version and end
        if len(_USER_LINES) >= USER_LINES_CACHE:
            _USER_LINES.clear()
        _USER_LINES[tlv] = lines
    return lines


# Distinct header blocks remembered by _user_lines / _tlv_of: a few hundred KiB at most.
USER_LINES_CACHE = 1024
_USER_LINES: dict[bytes, bytes] = {}
_TLV_OF: dict[bytes, bytes] = {}


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    timestamp: int
    origin_timestamp: int
    headers: bytes  # canonical TLV (Headers.encode())
    producer: tuple[str, int] | None


def decode_message(header: bytes | None) -> StoredMessage:
    """The fields :func:`encode_message` wrote. Raises InvalidArgument for a
    message Ferry did not write (no ``Ferry-Store`` first line)."""
    if not header:
        raise InvalidArgument("stored message without a Ferry-Store header")
    header = bytes(header)
    if header.startswith(_FAST_HEAD):  # what encode_message writes: read it without a full parse
        end = header.find(b"\r\n", len(_FAST_HEAD))
        second = header.find(b"\r\n", end + 2)
        if end > 0 and second > 0 and header.startswith(_MSG_ID_LINE, end + 2):
            rest = header[second + 2:]
            k = rest.rfind(_EXPECT_LINE)
            if k >= 0 and (k == 0 or rest[k - 2:k] == b"\r\n"):
                rest = rest[:k] + rest[rest.index(b"\r\n", k) + 2:]
            if rest == b"\r\n":
                tlv = b""
            else:
                tlv = _TLV_OF.get(rest)
                if tlv is None:
                    tlv = _decode_user(parse_headers(b"NATS/1.0\r\n" + rest).items)
                    if len(_TLV_OF) >= USER_LINES_CACHE:
                        _TLV_OF.clear()
                    _TLV_OF[rest] = tlv
            mid, ts, origin, producer = _system(header[len(_FAST_HEAD):end].decode("ascii", "replace"))
            return StoredMessage(mid, ts, origin, tlv, producer)
    block = parse_headers(header)
    items = block.items
    if not items or items[0][0] != STORE_HEADER:
        raise InvalidArgument("stored message without a Ferry-Store header")
    mid, ts, origin, producer = _system(items[0][1])
    rest = items[1:]
    if rest and rest[0][0] == MSG_ID:
        rest = rest[1:]
    rest = [item for item in rest if item[0] != EXPECTED_LAST_SEQ]
    return StoredMessage(mid, ts, origin, _decode_user(rest), producer)


_FAST_HEAD = f"NATS/1.0\r\n{STORE_HEADER}: ".encode("ascii")
_MSG_ID_LINE = f"{MSG_ID}: ".encode("ascii")
_EXPECT_LINE = f"{EXPECTED_LAST_SEQ}: ".encode("ascii")


def _system(text: str) -> tuple[int, int, int, tuple[str, int] | None]:
    parts = text.split(";")
    try:
        if parts[0] != FORMAT or len(parts) not in (4, 6):
            raise ValueError(parts[0])
        mid, ts, origin = int(parts[1], 16), int(parts[2]), int(parts[3])
        producer = None
        if len(parts) == 6:
            producer = (base64.urlsafe_b64decode(parts[4]).decode("utf-8", "surrogateescape"), int(parts[5]))
    except (ValueError, binascii.Error) as exc:
        raise InvalidArgument(f"malformed Ferry-Store header: {text!r}") from exc
    return mid, ts, origin, producer


def _decode_user(rest) -> bytes:
    if rest and rest[0][0] == RAW_HEADERS:
        try:
            tlv = base64.b64decode(rest[0][1], validate=True)
        except (ValueError, binascii.Error) as exc:
            raise InvalidArgument("malformed Ferry-Headers header") from exc
    else:
        tlv = block_to_headers(HeaderBlock(tuple(rest))).encode() if rest else b""
    return tlv


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


# -- metadata log entries ----------------------------------------------------------------
def encode_entry(statements: Sequence[tuple[str, Sequence[object]]]) -> bytes:
    return json.dumps({"v": 1, "s": [[sql, [_param_out(p) for p in params]] for sql, params in statements]},
                      separators=(",", ":")).encode()


def decode_entry(data: bytes) -> list[tuple[str, tuple]]:
    try:
        doc = json.loads(data)
        if doc.get("v") != 1:
            raise ValueError(f"metadata log entry version {doc.get('v')!r}")
        return [(str(sql), tuple(_param_in(p) for p in params)) for sql, params in doc["s"]]
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
        raise InvalidArgument(f"malformed metadata log entry: {exc}") from exc


def _param_out(value: object) -> object:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"b": base64.b64encode(bytes(value)).decode("ascii")}
    if value is None or isinstance(value, (int, float, str)):
        return value
    raise InvalidArgument(f"metadata statement parameter of type {type(value).__name__}")


def _param_in(value: object) -> object:
    if isinstance(value, dict):
        return base64.b64decode(value["b"], validate=True)
    return value


# -- API answers ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ApiError(Exception):
    code: int
    err_code: int
    description: str

    def __str__(self) -> str:
        return f"{self.description} (JetStream {self.code}/{self.err_code})"


def api_answer(data: bytes) -> dict:
    """A JetStream API or PubAck JSON answer; raises :class:`ApiError` for ``error``."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ApiError(500, 0, f"not JSON: {data[:80]!r}") from exc
    if not isinstance(doc, dict):
        raise ApiError(500, 0, f"not a JSON object: {data[:80]!r}")
    err = doc.get("error")
    if err:
        raise ApiError(int(err.get("code", 500)), int(err.get("err_code", 0)), str(err.get("description", "")))
    return doc


def pub_ack(data: bytes) -> tuple[int, bool]:
    """``(sequence, duplicate)`` of a PubAck; raises ApiError for a refused publish."""
    m = _PLAIN_ACK.fullmatch(data)
    if m is not None:  # the common answer, read without a JSON parse
        return int(m.group(1)), False
    doc = api_answer(data)
    try:
        return int(doc["seq"]), bool(doc.get("duplicate", False))
    except (KeyError, TypeError, ValueError) as exc:
        raise ApiError(500, 0, f"PubAck without a sequence: {data[:80]!r}") from exc


def mirror_consumer(stream: str, deliver_subject: str, start_seq: int) -> dict:
    """``$JS.API.CONSUMER.CREATE.<stream>`` body for a mirror: every message from
    ``start_seq`` in order, pushed, no acks, flow control and heartbeats (what an
    ordered consumer is: ADR-17), kept in memory on the server, one replica."""
    return {"stream_name": stream, "config": {
        "deliver_policy": "by_start_sequence", "opt_start_seq": max(1, start_seq),
        "ack_policy": "none", "deliver_subject": deliver_subject, "flow_control": True,
        "idle_heartbeat": MIRROR_HEARTBEAT_NS, "mem_storage": True, "num_replicas": 1,
        "inactive_threshold": 5 * MIRROR_HEARTBEAT_NS, "replay_policy": "instant",
    }}


def ack_info(reply: str | None) -> tuple[int, int] | None:
    """``(stream sequence, stored time in ns)`` from a pushed message's ``$JS.ACK``
    reply subject (the 9-token form and the 12-token form with domain and
    account hash; ADR-15), None for any other subject."""
    tokens = (reply or "").split(".")
    if len(tokens) < 9 or tokens[0] != "$JS" or tokens[1] != "ACK":
        return None
    index = 5 if len(tokens) == 9 else 7
    try:
        return int(tokens[index]), int(tokens[index + 2])
    except (ValueError, IndexError):
        return None


def request_json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


__all__ = ["ApiError", "IGGY_IDS", "IGGY_ID_PREFIX", "Layout", "StoredMessage", "ack_info", "api_answer",
           "client_msg_id", "decode_entry", "decode_message", "encode_entry", "encode_message", "mirror_consumer",
           "pub_ack", "request_json"]
