"""Fuzz targets for the HTTP API (adapters/http).

* ``http_h1``: a connection's bytes through :class:`H1Side` (h11 underneath: request
  heads, chunked and sized bodies, 100-continue, the h2c upgrade), in pieces, with a
  small body limit. Contract (h1.py): a malformed request becomes a
  :class:`RequestError` event (400/413/431) or :class:`ConnectionClosed`; the side
  raises nothing. Every request is answered so the next one on the connection is read,
  and each request's body also goes through :func:`models.parse_json`.
* ``http_json``: one JSON request body through the parsers the routes call
  (``models.parse_send`` for POST .../messages, ``create_topic_args``,
  ``update_topic_args``, ``permissions_from_json``, ``parse_user_headers``). Contract
  (models.py): :class:`HttpError` (400 with Iggy's code and the field). What
  ``parse_send`` accepts, written back as the JSON the server itself renders (base64
  payload, ``headers_json``), parses to the same messages; accepted permissions render
  (``permissions_json``) and parse back equal.
* ``http_jwt``: one bearer token through ``TokenService.verify`` (PyJWT, then Ferry's
  claim checks). Contract (tokens.py): :class:`TokenError`. With the first byte odd
  the rest is taken as the claims JSON and signed with the service's own key, so the
  claim checks after the signature are reached too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from fuzzlib import Picker, check, chunks, outcome

from adapters.http import models
from adapters.http.errors import HttpError, Response
from adapters.http.events import NEED_DATA, ConnectionClosed, Request, RequestError
from adapters.http.h1 import H1Side, Upgrade
from adapters.http.limits import HttpLimits
from adapters.http.tokens import TokenError, TokenService
from core.message import Headers

_MAX_EVENTS = 64


def http_h1(data: bytes) -> None:
    p = Picker(data)
    flags = p.byte()
    cuts = bytes(p.byte() for _ in range(3))
    side = H1Side(HttpLimits(max_body_bytes=64 << (flags % 8), max_header_bytes=256 << ((flags >> 3) % 6)),
                  allow_h2c=bool(flags & 0x80))
    events = 0
    for piece in chunks(p.rest(), cuts):
        side.receive_data(piece)
        while events < _MAX_EVENTS:
            event = side.next_event()
            if event is NEED_DATA or isinstance(event, (ConnectionClosed, Upgrade)):
                break
            events += 1
            if isinstance(event, Request):
                outcome(models.parse_json, HttpError, event.body)
                side.send_response(event.stream_id, Response(200, (), b"ok"))
            elif isinstance(event, RequestError):
                side.send_response(event.stream_id, event.error.response())
        side.data_to_send()
    side.receive_data(b"")
    side.next_event()


def _send_json(items) -> dict:
    """The SendMessages body a client would write for ``items`` (AppendInputs)."""
    out = []
    for it in items:
        msg = {"id": it.id, "payload": base64.b64encode(it.payload).decode()}
        if it.headers:
            msg["user_headers"] = models.headers_json(Headers.decode(it.headers))
        out.append(msg)
    return {"messages": out}


def _parse_send(obj) -> None:
    kind, value = outcome(models.parse_send, HttpError, obj, 1 << 16)
    if kind == "ok":
        partition, key, items = value
        again = models.parse_send(json.loads(json.dumps(_send_json(items))), 1 << 16)
        check(again[2] == items, f"messages {items!r} re-parsed as {again[2]!r}")


def _permissions(obj) -> None:
    kind, value = outcome(models.permissions_from_json, HttpError, obj)
    if kind == "ok" and value is not None:
        again = models.permissions_from_json(json.loads(json.dumps(models.permissions_json(value))))
        check(again == value, f"permissions {value!r} re-parsed as {again!r}")


_PARSERS = (
    _parse_send,
    lambda obj: models.create_topic_args(models.Fields(obj)),
    lambda obj: models.update_topic_args(models.Fields(obj)),
    _permissions,
    lambda obj: models.parse_user_headers(obj, "user_headers"),
)


def http_json(data: bytes) -> None:
    p = Picker(data)
    parser = p.pick(_PARSERS)
    kind, obj = outcome(models.parse_json, HttpError, p.rest())
    if kind == "ok":
        outcome(parser, HttpError, obj)


_SECRET = b"ferry-fuzz-secret-of-32-bytes!!!"  # MIN_SECRET_BYTES
_NOW = 1_800_000_000  # a fixed clock: a run must not depend on the day it runs
_HEADER = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")


def _signed(claims: bytes) -> str:
    """A token over ``claims`` (any bytes) with a valid HS256 signature (RFC 7515 3.1)."""
    body = _HEADER + b"." + base64.urlsafe_b64encode(claims).rstrip(b"=")
    sig = base64.urlsafe_b64encode(hmac.new(_SECRET, body, hashlib.sha256).digest()).rstrip(b"=")
    return (body + b"." + sig).decode()


def http_jwt(data: bytes) -> None:
    p = Picker(data)
    mode = p.byte()
    service = TokenService(_SECRET, clock=lambda: _NOW)
    token = _signed(p.rest()) if mode & 1 else p.rest().decode("latin-1")
    kind, claims = outcome(service.verify, TokenError, token)
    if kind == "ok" and mode & 2:
        outcome(service.refresh, TokenError, token)
        kind, _ = outcome(service.verify, TokenError, token)
        check(kind == "err", "a refreshed token still verifies")


TARGETS = {"http_h1": http_h1, "http_json": http_json, "http_jwt": http_jwt}
