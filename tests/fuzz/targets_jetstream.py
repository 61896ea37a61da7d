"""Fuzz target for the JetStream API's request parsing (adapters/nats/jetstream).

``jetstream_api``: the first byte picks what the rest is:

* a ``$JS.API.`` subject tail through the router (``api._route``);
* a request body through ``api._body`` with one of the request shapes the handlers
  read (STREAM.INFO/NAMES/LIST/PURGE, MSG.GET/DELETE, CONSUMER.CREATE/NAMES/PAUSE);
* a STREAM.CREATE body through ``JetStreamApi._config`` (``loads_request``, then
  ``config.parse_config``; ``check_update``);
* a CONSUMER.CREATE body through ``_body`` and its ``config`` through
  ``consumer_config.parse_consumer_config``;
* a CONSUMER.MSG.NEXT body through ``pull.parse_pull`` (contract: ValueError with
  nats-server's text) and a ``-NAK`` tail through ``consumers._nak_delay`` (never raises).

Contract (api.py, config.py, consumer_config.py): :class:`JsApiError`, whose
``to_json`` is what the client gets. A config they accept is normalised: parsed
again it gives itself back (compared as JSON text: a value may be NaN), and an update to itself is allowed.
"""

from __future__ import annotations

import json

from fuzzlib import Picker, check, outcome

from adapters.nats.jetstream import api
from adapters.nats.jetstream.config import check_update, parse_config
from adapters.nats.jetstream.consumers import _nak_delay
from adapters.nats.jetstream.consumer_config import parse_consumer_config
from adapters.nats.jetstream.errors import JsApiError
from adapters.nats.jetstream.pull import parse_pull

# (Go struct name, typed fields) of the bodies JetStreamApi's handlers read (api.py).
_SHAPES = (
    ("JSApiStreamInfoRequest", {"subjects_filter": "string", "offset": "int"}),
    ("JSApiStreamNamesRequest", {"offset": "int", "subject": "string"}),
    ("JSApiStreamPurgeRequest", {"filter": "string", "seq": "uint64", "keep": "uint64"}),
    ("JSApiMsgGetRequest", {"seq": "uint64", "last_by_subj": "string", "next_by_subj": "string"}),
    ("JSApiMsgDeleteRequest", {"seq": "uint64"}),
    ("CreateConsumerRequest", {"stream_name": "string", "action": "string"}),
    ("JSApiConsumersRequest", {"offset": "int"}),
    ("JSApiConsumerPauseRequest", {"pause_until": "string"}),
)


def _stream_config(body: bytes) -> None:
    """STREAM.CREATE.<name> as ``JetStreamApi._config`` reads it (it uses no state), the name
    taken from the body so the name check passes whenever the body has one."""
    try:
        name = api.loads_request(body).get("name")
    except (JsApiError, AttributeError):
        name = None
    kind, cfg = outcome(api.JetStreamApi._config, JsApiError, None, name if isinstance(name, str) else "S", body)
    if kind == "ok":
        again = parse_config(json.loads(api.go_json(cfg)))
        check(api.go_json(again) == api.go_json(cfg), f"stream config {cfg!r} re-parsed as {again!r}")
        check_update(cfg, again)
    else:
        api.go_json(cfg.to_json())


def _consumer_config(body: bytes, ephemeral: bool) -> None:
    """CONSUMER.CREATE's body as ``JetStreamApi._create_consumer`` reads it, up to the config check."""
    kind, req = outcome(api._body, JsApiError, body, "CreateConsumerRequest",
                        {"stream_name": "string", "action": "string"})
    if kind == "err":
        api.go_json(req.to_json())
        return
    doc = req.get("config") if isinstance(req.get("config"), dict) else {}
    kind, cfg = outcome(parse_consumer_config, JsApiError, doc, ephemeral, ["orders.>"])
    if kind == "ok":
        again = parse_consumer_config(json.loads(api.go_json(cfg)), ephemeral, ["orders.>"])
        check(api.go_json(again) == api.go_json(cfg), f"consumer config {cfg!r} re-parsed as {again!r}")
    else:
        api.go_json(cfg.to_json())


def jetstream_api(data: bytes) -> None:
    p = Picker(data)
    mode = p.byte() % 6
    if mode == 4:
        outcome(parse_pull, ValueError, p.rest(), "_INBOX.fuzz", 0.0)
        return
    if mode == 5:
        _nak_delay(p.rest())
        return
    if mode == 1:
        struct, types = p.pick(_SHAPES)
        kind, err = outcome(api._body, JsApiError, p.rest(), struct, types)
        if kind == "err":
            api.go_json(err.to_json())
        return
    body = p.rest()
    if mode == 0:
        api._route(body.decode("utf-8", "surrogateescape"))
    elif mode == 2:
        _stream_config(body)
    else:
        _consumer_config(body, ephemeral=bool(len(body) & 1))


TARGETS = {"jetstream_api": jetstream_api}
