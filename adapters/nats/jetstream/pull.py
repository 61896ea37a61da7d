"""JetStream pull requests: the ``MSG.NEXT`` body and the status messages (no trio).

Theory of operation
-------------------
:func:`parse_pull` reads a ``$JS.API.CONSUMER.MSG.NEXT`` body (empty = one
message, a bare number = a batch, else nats-server's ``JSApiConsumerGetNextRequest``
JSON) into a :class:`PullRequest`, or raises ``ValueError`` with the text
nats-server puts after ``400 Bad Request - ``. :func:`status` and
:func:`heartbeat` build the header-only status messages nats-server sends
to a request's inbox, byte for byte: ``404 No Messages``, ``408 Request
Timeout`` and ``409 ...`` (with ``Nats-Pending-Messages``/``-Bytes`` where
nats-server adds them), ``100 Idle Heartbeat``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

_NUMBERS = {"batch": "int", "expires": "time.Duration", "max_bytes": "int", "idle_heartbeat": "time.Duration"}


@dataclass(frozen=True, slots=True)
class Out:
    """One message for an inbox (or a push consumer's deliver subject): a
    stored message (``ack`` set), or a status header block (``block``, with a
    ``reply`` for a flow control request), or an empty reply (all empty)."""

    inbox: str
    subject: str = ""
    ack: str = ""
    headers: bytes = b""          # canonical TLV of a stored message
    payload: bytes = b""
    block: bytes = b""            # NATS header block: a status's, or a stored message's already translated
    reply: str = ""


@dataclass(slots=True)
class PullRequest:
    """One waiting pull request."""

    inbox: str
    batch: int                   # as requested (0 when left out)
    left: int                    # messages still wanted
    max_bytes: int
    bytes_left: int
    expires: float | None        # monotonic deadline
    no_wait: bool
    heartbeat: float             # seconds, 0 = none
    next_beat: float
    delivered: int = 0

    def taken(self, size: int, now: float) -> None:
        self.left -= 1
        self.delivered += 1
        if self.max_bytes:
            self.bytes_left -= size
        if self.heartbeat:
            self.next_beat = now + self.heartbeat

    def pending_headers(self) -> list[tuple[str, str]]:
        return [("Nats-Pending-Messages", str(max(self.batch - self.delivered, 0))),
                ("Nats-Pending-Bytes", str(max(self.bytes_left, 0) if self.max_bytes else 0))]


def parse_pull(payload: bytes, inbox: str, now: float) -> PullRequest | None:
    """The request in a ``MSG.NEXT`` body; None for one nats-server ignores."""
    text = bytes(payload).strip()
    doc: dict = {}
    if text and text[:1] != b"{":
        try:
            doc = {"batch": int(text)}
        except ValueError:
            raise ValueError("invalid character looking for beginning of value") from None
    elif text:
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):  # nesting past the recursion limit is bad JSON too (tests/fuzz)
            raise ValueError("unexpected end of JSON input") from None
        if not isinstance(doc, dict):
            raise ValueError("json: cannot unmarshal into Go value of type server.JSApiConsumerGetNextRequest")
    for key, gotype in _NUMBERS.items():
        value = doc.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            kind = "string" if isinstance(value, str) else "bool" if isinstance(value, bool) else "value"
            raise ValueError(f"json: cannot unmarshal {kind} into Go struct field .{key} of type {gotype}")
    batch = doc.get("batch") or 0
    if batch < 0:
        return None
    expires_ns = doc.get("expires") or 0
    hb_ns = doc.get("idle_heartbeat") or 0
    if hb_ns > 0 and (not expires_ns or hb_ns > expires_ns // 2):
        raise ValueError("heartbeat value too large")
    max_bytes = max(doc.get("max_bytes") or 0, 0)
    hb = hb_ns / 1e9 if hb_ns > 0 else 0.0
    return PullRequest(inbox, batch, max(batch, 1), max_bytes, max_bytes,
                       now + expires_ns / 1e9 if expires_ns > 0 else None,
                       bool(doc.get("no_wait")), hb, now + hb)


def status(inbox: str, code: int, text: str, headers: list[tuple[str, str]] | None = None) -> Out:
    lines = [f"NATS/1.0 {code} {text}"] + [f"{k}: {v}" for k, v in headers or ()]
    return Out(inbox, block=("\r\n".join(lines) + "\r\n\r\n").encode())


def add_headers(block: bytes, items) -> bytes:
    """A stored message's NATS header block (``b""``: none) with ``items``
    (name, value) added after its own, as nats-server adds Nats-* headers."""
    head = block[:-2] if block else b"NATS/1.0\r\n"
    return head + "".join(f"{k}: {v}\r\n" for k, v in items).encode() + b"\r\n"


def heartbeat(inbox: str, cseq: int, sseq: int) -> Out:
    return status(inbox, 100, "Idle Heartbeat", [("Nats-Last-Consumer", str(cseq)), ("Nats-Last-Stream", str(sseq))])


__all__ = ["Out", "PullRequest", "add_headers", "heartbeat", "parse_pull", "status"]
