"""The ``$JS.API`` request router and JetStream publish checks (no trio).

Theory of operation
-------------------
:class:`JetStreamApi` turns one request (subject and JSON body) into the
reply nats-server would send, as bytes, or ``None`` where nats-server sends
nothing (a subject it does not serve). :data:`ROUTES` is the table of the
subjects served: the ``$JS.API.`` suffix, whether a stream name follows as
the last token, the reply's ``type`` and the handler. Every handler raises
:class:`JsApiError` for a refusal; :meth:`JetStreamApi.handle` turns it into
``{"type": ..., "error": {...}}`` plus the fields nats-server adds to that
reply's error form. JSON goes out as Go writes it (compact, ``<``, ``>`` and
``&`` escaped).

For publishes on a stream's subjects, :meth:`check_publish` applies the
``Nats-Expected-*`` headers, ``max_msg_size``, rollups and ``Nats-Msg-Id``
de-duplication before the session appends; :func:`pub_ack` and
:func:`pub_error` are the PubAck bodies, byte for byte as nats-server sends
them. The session (``adapters/nats/session.py``) does the append and sends
the ack once it is durable.
"""

from __future__ import annotations

import json
import re
import time
import weakref
from functools import partial
from typing import Any, Callable

from core.perowner import PerOwner

from .config import API_PREFIX, parse_config, type_error
from .consumer_config import parse_consumer_config
from .consumers import JsConsumers
from .errors import JsApiError
from .index import ROLLUP_HEADER, TTL_HEADER, parse_ttl, subject_totals
from .streams import JS_STREAM, MSG_ID_HEADER, JetStreams, JsStream, go_time

TYPE_PREFIX = "io.nats.jetstream.api.v1."
NAMES_LIMIT = 1024      # nats-server's page sizes for STREAM.NAMES and STREAM.LIST
LIST_LIMIT = 256
# STREAM.INFO's subject details per answer: nats-server's JSMaxSubjectDetails
# (server/jetstream_api.go); past it the client pages with ``offset``.
SUBJECT_DETAILS_LIMIT = 100_000
API_LEVEL = 1
_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def go_json(doc: Any) -> bytes:
    """JSON as Go's encoding/json writes it: compact, HTML characters escaped."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).translate(_GO_ESCAPES).encode()


def pub_ack(stream: str, seq: int, duplicate: bool = False) -> bytes:
    """A PubAck; nats-server writes the duplicate flag with a space after the colon."""
    body = go_json({"stream": stream, "seq": seq})
    return body[:-1] + b',"duplicate": true}' if duplicate else body


def pub_error(stream: str, err: JsApiError) -> bytes:
    return go_json({"error": err.to_json(), "stream": stream, "seq": 0})


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _go_text(text: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", text)


def loads_request(payload: bytes) -> Any:
    """A request body's JSON as nats-server's Go decoder reads it; JSInvalidJSONErr if it is not JSON.

    Go's encoding/json turns a ``\\uD800`` escape that is not half of a pair into
    U+FFFD (``unquote`` in decode.go); Python keeps the lone surrogate, which then
    cannot be encoded as UTF-8 (a reply echoing it, ``valid_name``;
    tests/fuzz/regressions/jetstream_api). Nesting deeper than the interpreter's recursion
    limit is refused as not JSON, as HTTP's ``models.parse_json`` does, instead of
    escaping as RecursionError. The walk is iterative: a document nested nearly to
    that limit must not hit it again here."""
    try:
        doc = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise JsApiError("JSInvalidJSONErr", err=str(exc)) from None
    if b"\\u" not in payload:  # raw UTF-8 never decodes to a surrogate: only escapes make one
        return doc
    if isinstance(doc, str):
        return _go_text(doc)
    stack = [doc] if isinstance(doc, (dict, list)) else []
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in [k for k in node if _LONE_SURROGATE.search(k)]:
                node[_go_text(key)] = node.pop(key)
            pairs = list(node.items())
        else:
            pairs = list(enumerate(node))
        for key, value in pairs:
            if isinstance(value, str):
                if _LONE_SURROGATE.search(value):
                    node[key] = _go_text(value)
            elif isinstance(value, (dict, list)):
                stack.append(value)
    return doc


def _body(payload: bytes, struct: str, types: dict[str, str]) -> dict[str, Any]:
    """A request body: ``{}`` when empty, else a JSON object whose known
    fields have the types nats-server's decoder wants."""
    if not payload.strip():
        return {}
    doc = loads_request(payload)
    if not isinstance(doc, dict):
        raise JsApiError("JSInvalidJSONErr", err=f"json: cannot unmarshal into Go value of type server.{struct}")
    for field, gotype in types.items():
        value = doc.get(field)
        if value is None:
            continue
        ok = isinstance(value, str) if gotype == "string" else \
            isinstance(value, int) and not isinstance(value, bool) and (gotype == "int" or value >= 0)
        if not ok:
            raise type_error(struct, field, gotype, value)
    return doc


class JetStreamApi:
    """Answers ``$JS.API`` requests for one broker's :class:`JetStreams`."""

    def __init__(self, streams: JetStreams, server_name: str = "", tables=None) -> None:
        self.streams = streams
        self.server_name = server_name
        self.total = self.errors = 0
        self.consumers = JsConsumers(streams, tables)
        self.timers_running = False                 # the NATS listener's timer task (driver.py)
        # The asking user's view during one handle() (STREAM.NAMES/LIST leave out
        # the streams it may not read: adapters/nats/ferryauth.py); None = all.
        self._visible: Callable[[str], bool] | None = None
        streams.consumer_count = self.consumers.count

    # -- requests ------------------------------------------------------------------
    def handle(self, subject: str, payload: bytes, visible: Callable[[str], bool] | None = None) -> bytes | None:
        """The reply to a request on ``subject``, or None (nats-server stays silent).
        ``visible(name)``: whether the asker may see a stream in STREAM.NAMES/LIST."""
        rest = subject[len(API_PREFIX) + 1:]
        route = _route(rest)
        if route is None:
            return None
        suffix, kind, handler, name = route
        self.total += 1
        self._visible = visible
        try:
            doc = handler(self, name, payload)
            return go_json({"type": TYPE_PREFIX + kind, **doc})
        except JsApiError as err:
            self.errors += 1
            return go_json({"type": TYPE_PREFIX + kind, "error": err.to_json(), **_ERROR_EXTRAS.get(suffix, {})})
        finally:
            self._visible = None

    def _names(self, subject: str | None) -> list[str]:
        names = self.streams.names(subject)
        visible = self._visible
        return names if visible is None else [n for n in names if visible(n)]

    def account_info(self, _name: str, _payload: bytes) -> dict:
        memory, storage = self.streams.totals()
        return {"memory": memory, "storage": storage, "reserved_memory": 0, "reserved_storage": 0,
                "streams": len(self.streams.streams), "consumers": self.consumers.count(),
                "limits": {"max_memory": -1, "max_storage": -1, "max_streams": -1, "max_consumers": -1,
                           "max_ack_pending": -1, "memory_max_stream_bytes": -1, "storage_max_stream_bytes": -1,
                           "max_bytes_required": False},
                "api": {"level": API_LEVEL, "total": self.total, "errors": self.errors}}

    def create(self, name: str, payload: bytes) -> dict:
        cfg = self._config(name, payload)
        return {**self._info(self.streams.create(cfg)), "did_create": True}

    def update(self, name: str, payload: bytes) -> dict:
        cfg = self._config(name, payload)
        return self._info(self.streams.update(cfg))

    def info(self, name: str, payload: bytes) -> dict:
        req = _body(payload, "JSApiStreamInfoRequest", {"subjects_filter": "string", "offset": "int"})
        st = self.streams.get(name)
        out = {"total": 0, "offset": 0, "limit": 0, **self._info(st, cluster=True)}
        if req.get("subjects_filter"):
            self._subject_details(st, out, req["subjects_filter"], req.get("offset") or 0)
        return out

    def _subject_details(self, st: JsStream, out: dict, pattern: str, offset: int) -> None:
        """``state.subjects`` for a ``subjects_filter``, paged as nats-server pages it
        (server/jetstream_api.go ``jsStreamInfoRequest``): every match when
        ``offset`` is 0 and there are at most :data:`SUBJECT_DETAILS_LIMIT`,
        else that many from ``offset`` of the sorted subjects; ``total``,
        ``offset`` (as asked) and ``limit`` only when some subject matched."""
        streams = self.streams
        idx = streams.index(st)
        if idx is not None:
            totals = subject_totals(idx.subjects, pattern)
        else:
            first, last = streams.first_seq(st), streams.last_seq(st)
            counts = streams.subject_counts(st, first, last).subjects if last >= first else {}
            totals = subject_totals(counts, pattern, int)
        if not totals:
            return
        out.update(total=len(totals), offset=offset, limit=SUBJECT_DETAILS_LIMIT)
        if offset or len(totals) > SUBJECT_DETAILS_LIMIT:
            names = sorted(totals)
            start = min(max(offset, 0), len(names))
            totals = {s: totals[s] for s in names[start:start + SUBJECT_DETAILS_LIMIT]}
        if totals:                                   # an offset past the end: no map (Go's nil, omitted)
            out["state"]["subjects"] = totals

    def names(self, _name: str, payload: bytes) -> dict:
        req = _body(payload, "JSApiStreamNamesRequest", {"offset": "int", "subject": "string"})
        names = self._names(req.get("subject"))
        offset = min(max(req.get("offset", 0), 0), len(names))
        return {"total": len(names), "offset": offset, "limit": NAMES_LIMIT,
                "streams": names[offset:offset + NAMES_LIMIT]}

    def list(self, _name: str, payload: bytes) -> dict:
        req = _body(payload, "JSApiStreamListRequest", {"offset": "int", "subject": "string"})
        names = self._names(req.get("subject"))
        offset = min(max(req.get("offset", 0), 0), len(names))
        infos = [self._info(self.streams.streams[n]) for n in names[offset:offset + LIST_LIMIT]]
        return {"total": len(names), "offset": offset, "limit": LIST_LIMIT, "streams": infos}

    def delete(self, name: str, _payload: bytes) -> dict:
        self.streams.delete(name)
        self.consumers.drop_stream(name)
        return {"success": True}

    def purge(self, name: str, payload: bytes) -> dict:
        req = _body(payload, "JSApiStreamPurgeRequest", {"filter": "string", "seq": "uint64", "keep": "uint64"})
        if req.get("seq") and req.get("keep"):
            raise JsApiError("JSBadRequestErr")
        return {"success": True, "purged": self.streams.purge(name, req)}

    def msg_get(self, name: str, payload: bytes) -> dict:
        req = _body(payload, "JSApiMsgGetRequest",
                    {"seq": "uint64", "last_by_subj": "string", "next_by_subj": "string"})
        st = self.streams.get(name)
        seq, last, after = req.get("seq", 0), req.get("last_by_subj"), req.get("next_by_subj")
        if (not seq and not last) or (seq and last) or (last and after):
            raise JsApiError("JSBadRequestErr")
        view = self.streams.find(st, seq, last, after)
        if view is None:
            raise JsApiError("JSNoMessageFoundErr")
        return {"message": self.streams.message_json(st, view)}


    def msg_delete(self, name: str, payload: bytes) -> dict:
        st = self.streams.get(name)
        if not payload.strip():
            raise JsApiError("JSBadRequestErr")
        req = _body(payload, "JSApiMsgDeleteRequest", {"seq": "uint64"})
        if st.config["sealed"]:
            raise JsApiError("JSStreamSealedErr")
        if st.config["deny_delete"]:
            raise JsApiError("JSStreamMsgDeleteFailedF", err="message delete not permitted")
        seq = req.get("seq", 0)
        if seq > self.streams.last_seq(st):
            # nats-server's file store answers past its end with its EOF error
            raise JsApiError("JSStreamMsgDeleteFailedF", err="stream store EOF")
        if seq < self.streams.first_seq(st) or not self.streams.delete_msg(st, seq):
            raise JsApiError("JSStreamMsgDeleteFailedF", err="no message found")
        return {"success": True}

    def _config(self, name: str, payload: bytes) -> dict:
        doc = loads_request(payload) if payload.strip() else {}
        if isinstance(doc, dict) and doc.get("name", "") != name and isinstance(doc.get("name", ""), str):
            raise JsApiError("JSStreamMismatchErr")
        return parse_config(doc)

    def _info(self, st: JsStream, cluster: bool = False) -> dict:
        out = {"config": st.config, "created": st.created, "state": self.streams.state(st)}
        if cluster:
            out["cluster"] = {"leader": self.server_name}
        out["ts"] = go_time(time.time_ns())
        return out

    # -- consumers ---------------------------------------------------------------------
    def consumer_create(self, rest: str, payload: bytes) -> dict:
        """``CONSUMER.CREATE.<stream>[.<consumer>[.<filter>]]``."""
        stream, _, tail = rest.partition(".")
        name, _, filter_subject = tail.partition(".")
        return self._create_consumer(stream, name or None, filter_subject, payload, durable_api=False)

    def durable_create(self, rest: str, payload: bytes) -> dict:
        """``CONSUMER.DURABLE.CREATE.<stream>.<durable>`` (the older API)."""
        stream, _, name = rest.partition(".")
        if not name or "." in name:
            raise JsApiError("JSConsumerDurableNameNotMatchSubjectErr")
        return self._create_consumer(stream, name, "", payload, durable_api=True)

    def _create_consumer(self, stream: str, name: str | None, filter_subject: str, payload: bytes,
                         durable_api: bool) -> dict:
        req = _body(payload, "CreateConsumerRequest", {"stream_name": "string", "action": "string"})
        if req.get("stream_name", stream) != stream:
            raise JsApiError("JSStreamMismatchErr")
        st = self.streams.get(stream)
        doc = req.get("config") if isinstance(req.get("config"), dict) else {}
        durable = doc.get("durable_name")
        if durable_api and not durable:
            raise JsApiError("JSConsumerDurableNameNotSetErr")
        if name is None:
            if durable:
                raise JsApiError("JSConsumerEphemeralWithDurableNameErr")
        elif (durable and durable != name) or (doc.get("name") and doc["name"] != name):
            raise JsApiError("JSConsumerDurableNameNotMatchSubjectErr")
        if filter_subject and doc.get("filter_subject") != filter_subject:
            raise JsApiError("JSConsumerCreateFilterSubjectMismatchErr")
        cfg = parse_consumer_config(doc, ephemeral=not durable, stream_subjects=st.config["subjects"])
        if st.config["retention"] == "workqueue" and not cfg.get("deliver_subject") and cfg["ack_policy"] == "none":
            raise JsApiError("JSConsumerPullRequiresAckErr")
        if name is not None and "name" not in cfg:
            cfg = {**({"durable_name": name} if durable else {}), "name": name,
                   **{k: v for k, v in cfg.items() if k != "durable_name"}}
        con = self.consumers.add(st, name or cfg.get("name"), cfg, bool(durable), req.get("action", ""))
        self.consumers.wake()
        return self.consumers.info(con)

    def consumer_info(self, rest: str, _payload: bytes) -> dict:
        stream, _, name = rest.partition(".")
        return self.consumers.info(self.consumers.get(stream, name))

    def consumer_names(self, stream: str, payload: bytes) -> dict:
        req = _body(payload, "JSApiConsumersRequest", {"offset": "int"})
        names = self.consumers.names(stream)
        offset = min(max(req.get("offset", 0), 0), len(names))
        return {"total": len(names), "offset": offset, "limit": NAMES_LIMIT,
                "consumers": names[offset:offset + NAMES_LIMIT]}

    def consumer_list(self, stream: str, payload: bytes) -> dict:
        req = _body(payload, "JSApiConsumersRequest", {"offset": "int"})
        names = self.consumers.names(stream)
        offset = min(max(req.get("offset", 0), 0), len(names))
        infos = [self.consumers.info(self.consumers.get(stream, n)) for n in names[offset:offset + LIST_LIMIT]]
        return {"total": len(names), "offset": offset, "limit": LIST_LIMIT, "consumers": infos}

    def consumer_pause(self, rest: str, payload: bytes) -> dict:
        """``CONSUMER.PAUSE.<stream>.<consumer>``: ``{"pause_until": time}``; none or a past time resumes."""
        stream, _, name = rest.partition(".")
        req = _body(payload, "JSApiConsumerPauseRequest", {"pause_until": "string"}) \
            if payload.strip()[:1] in (b"{", b"[") else {}
        con = self.consumers.get(stream, name)
        self.consumers.set_pause(con, req.get("pause_until"))
        remaining = self.consumers.cursor.paused_ns(con)
        out: dict = {"paused": bool(remaining), "pause_until": con.config.get("pause_until") or go_time(0)}
        if remaining:
            out["pause_remaining"] = remaining
        return out

    def consumer_delete(self, rest: str, _payload: bytes) -> dict:
        stream, _, name = rest.partition(".")
        self.consumers.delete(stream, name)
        return {"success": True}

    # -- publishes -------------------------------------------------------------------
    def check_publish(self, st: JsStream, block, size: int) -> int | None:
        """Apply a stream's publish rules; returns the seq of an earlier copy
        (a duplicate: nothing to store) or None. Raises :class:`JsApiError`."""
        get = block.get if block is not None else (lambda key: None)
        expected = get("Nats-Expected-Stream")
        if expected is not None and expected != st.name:
            raise JsApiError("JSStreamNotMatchErr")
        cfg = st.config
        limit = cfg["max_msg_size"]
        if 0 <= limit < size:
            raise JsApiError("JSStreamMessageExceedsMaximumErr")
        ttl = get(TTL_HEADER)
        if ttl is not None:
            try:
                seconds = parse_ttl(ttl)
            except ValueError:
                seconds = None
            if seconds and not cfg.get("allow_msg_ttl"):
                raise JsApiError("JSMessageTTLDisabledErr")
            if seconds is None:
                raise JsApiError("JSMessageTTLInvalidErr")
        msg_id = get(MSG_ID_HEADER)
        if msg_id:
            seq = self.streams.duplicate_of(st, msg_id)
            if seq is not None:
                return seq
        streams = self.streams
        expected = get("Nats-Expected-Last-Sequence")
        if expected is not None and _uint(expected) != streams.last_seq(st):
            raise JsApiError("JSStreamWrongLastSequenceErrF", seq=streams.last_seq(st))
        expected = get("Nats-Expected-Last-Msg-Id")
        if expected is not None and expected != streams.last_msg_id(st):
            raise JsApiError("JSStreamWrongLastMsgIDErrF", id=streams.last_msg_id(st))
        rollup = get(ROLLUP_HEADER)
        if rollup is not None:
            if not cfg["allow_rollup_hdrs"] or cfg["deny_purge"]:
                raise JsApiError("JSStreamRollupFailedF", err="rollup not permitted")
            if rollup not in ("sub", "all"):
                raise JsApiError("JSStreamRollupFailedF", err=f"rollup value invalid: {json.dumps(rollup)}")
        if cfg["discard"] == "new":
            self._check_room(st, size)
        return None

    def _check_room(self, st: JsStream, size: int) -> None:
        """Discard new: refuse what would pass ``max_msgs`` or ``max_bytes``
        (nats-server's store errors, sent as JSStreamStoreFailedF)."""
        cfg, streams = st.config, self.streams
        if cfg["max_msgs"] > 0 and streams.state(st)["messages"] >= cfg["max_msgs"]:
            raise JsApiError("JSStreamStoreFailedF", err="maximum messages exceeded")
        if cfg["max_bytes"] > 0 and streams.stored_bytes(st) + size > cfg["max_bytes"]:
            raise JsApiError("JSStreamStoreFailedF", err="maximum bytes exceeded")

    def check_subject_seq(self, st: JsStream, block, subject: str) -> None:
        """``Nats-Expected-Last-Subject-Sequence`` (the last seq stored on
        ``subject``) and discard new per subject."""
        expected = block.get("Nats-Expected-Last-Subject-Sequence") if block is not None else None
        if expected is not None:
            view = self.streams.last_for_subject(st, subject)
            actual = view.offset + 1 if view is not None else 0
            if _uint(expected) != actual:
                raise JsApiError("JSStreamWrongLastSequenceErrF", seq=actual)
        cfg = st.config
        if cfg.get("discard_new_per_subject") and (block is None or block.get(ROLLUP_HEADER) is None):
            idx = self.streams.index(st, force=True)
            if len(idx.subjects.get(subject, ())) >= cfg["max_msgs_per_subject"]:
                raise JsApiError("JSStreamStoreFailedF", err="maximum messages per subject exceeded")

    def stored(self, st: JsStream, block, seq: int, subject: str) -> None:
        """After an append: remember its msg id for de-duplication; under
        interest retention, remove it when no consumer's filter matches."""
        msg_id = block.get(MSG_ID_HEADER) if block is not None else None
        if msg_id:
            self.streams.remember(st, msg_id, seq)
        if st.config["retention"] == "interest" and not self.consumers.retention.interested(st, subject):
            self.streams.no_interest(st, seq)


def _uint(text: str) -> int:
    """nats-server reads a bad number in an expected-sequence header as 0."""
    try:
        return max(int(text.strip()), 0)
    except ValueError:
        return 0


Handler = Callable[[JetStreamApi, str, bytes], dict]
REST = "rest"       # the handler takes every token after the suffix (stream, consumer, filter)
# suffix after "$JS.API." -> (takes a stream name token (True) / the rest (REST), reply type, handler)
ROUTES: dict[str, tuple[bool | str, str, Handler]] = {
    "INFO": (False, "account_info_response", JetStreamApi.account_info),
    "STREAM.CREATE": (True, "stream_create_response", JetStreamApi.create),
    "STREAM.UPDATE": (True, "stream_update_response", JetStreamApi.update),
    "STREAM.INFO": (True, "stream_info_response", JetStreamApi.info),
    "STREAM.NAMES": (False, "stream_names_response", JetStreamApi.names),
    "STREAM.LIST": (False, "stream_list_response", JetStreamApi.list),
    "STREAM.DELETE": (True, "stream_delete_response", JetStreamApi.delete),
    "STREAM.PURGE": (True, "stream_purge_response", JetStreamApi.purge),
    "STREAM.MSG.GET": (True, "stream_msg_get_response", JetStreamApi.msg_get),
    "STREAM.MSG.DELETE": (True, "stream_msg_delete_response", JetStreamApi.msg_delete),
    "CONSUMER.CREATE": (REST, "consumer_create_response", JetStreamApi.consumer_create),
    "CONSUMER.DURABLE.CREATE": (REST, "consumer_create_response", JetStreamApi.durable_create),
    "CONSUMER.INFO": (REST, "consumer_info_response", JetStreamApi.consumer_info),
    "CONSUMER.NAMES": (True, "consumer_names_response", JetStreamApi.consumer_names),
    "CONSUMER.LIST": (True, "consumer_list_response", JetStreamApi.consumer_list),
    "CONSUMER.DELETE": (REST, "consumer_delete_response", JetStreamApi.consumer_delete),
    "CONSUMER.PAUSE": (REST, "consumer_pause_response", JetStreamApi.consumer_pause),
}
# Fields nats-server's error replies carry besides "error", per route.
_ERROR_EXTRAS: dict[str, dict] = {
    "STREAM.INFO": {"total": 0, "offset": 0, "limit": 0},
    "STREAM.NAMES": {"total": 0, "offset": 0, "limit": 0, "streams": None},
    "STREAM.LIST": {"total": 0, "offset": 0, "limit": 0, "streams": None},
    "STREAM.PURGE": {"purged": 0},
    "CONSUMER.NAMES": {"total": 0, "offset": 0, "limit": 0, "consumers": []},
    "CONSUMER.LIST": {"total": 0, "offset": 0, "limit": 0, "consumers": []},
}


def _route(rest: str) -> tuple[str, str, Handler, str] | None:
    """(suffix, reply type, handler, stream name) for ``$JS.API.<rest>``, or None."""
    entry = ROUTES.get(rest)
    if entry is not None and not entry[0]:
        return rest, entry[1], entry[2], ""
    tokens = rest.split(".")
    for i in range(2, min(len(tokens), 4)):      # CONSUMER.CREATE.<...>, CONSUMER.DURABLE.CREATE.<...>
        suffix = ".".join(tokens[:i])
        entry = ROUTES.get(suffix)
        if entry is not None and entry[0] == REST:
            tail = ".".join(tokens[i:])
            return (suffix, entry[1], entry[2], tail) if tail and all(tokens[i:]) else None
    suffix, _, name = rest.rpartition(".")
    entry = ROUTES.get(suffix)
    if entry is None or entry[0] is not True or not name:
        return None
    return suffix, entry[1], entry[2], name


_REGISTRY: PerOwner[JetStreamApi] = PerOwner()


def enable(broker, server_name: str = "") -> JetStreamApi:
    """Turn JetStream on for ``broker``'s NATS listeners (idempotent): loads
    the streams' index from the topics' attributes."""
    api = _REGISTRY.get(broker)
    if api is None:
        streams = JetStreams(broker)
        streams.load()
        api = JetStreamApi(streams, server_name, getattr(broker, "tables", None))
        _REGISTRY.set(broker, api)
        api.consumers.interest = broker.live.has_interest
        api.consumers.load()
        broker.add_append_listener(partial(_appended, weakref.ref(api)))
    return api


def _appended(ref, info, _pid, _result, _items) -> None:
    """Append listener (any protocol): new messages may satisfy waiting pull
    requests and go out to push consumers."""
    api = ref()
    if api is None or not api.consumers.by_stream:
        return
    st = api.streams.streams.get(info.name)
    if st is None or st.topic_id != info.id or not api.consumers.by_stream.get(st.name) \
            or api.streams.broker.get_stream(info.stream_id).name != JS_STREAM:
        return
    consumers = api.consumers
    out = consumers.appended(st, consumers.clock())
    if out and consumers.emit is not None:
        consumers.emit(out)


def jetstream_for(broker) -> JetStreamApi | None:
    """The broker's JetStream API, or None when JetStream is off."""
    return _REGISTRY.get(broker)                     # None too for a test double that cannot be weakly referenced


__all__ = ["ROUTES", "JetStreamApi", "enable", "go_json", "jetstream_for", "pub_ack", "pub_error"]
