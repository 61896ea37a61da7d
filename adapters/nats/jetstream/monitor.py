"""nats-server's ``/jsz`` monitoring document over Ferry's JetStream state (no I/O, no trio).

Theory of operation
-------------------
``GET /jsz`` on nats-server's monitoring port reports JetStream for the
server (server/monitor.go ``Jsz``): usage (``memory``, ``storage``, the
``api`` request counters), the JetStream ``config``, and the counts of
streams, consumers, messages and bytes over every account; with
``accounts=true`` one ``account_details`` entry per account, with
``streams=true`` each account's ``stream_detail`` (name, created, state),
with ``consumers=true`` each stream's ``consumer_detail``, with
``config=true`` the stream and consumer configs. :func:`jsz` builds that
document from :class:`~adapters.nats.jetstream.api.JetStreamApi` (the one
:func:`~adapters.nats.jetstream.api.jetstream_for` finds for the broker):
stream states and consumer infos are the ones ``$JS.API.STREAM.INFO`` and
``CONSUMER.INFO`` answer with, account usage is ``$JS.API.INFO``'s, and
``api.total``/``api.errors`` are the API's own counters. Nothing is cached
across requests: every GET reads the current state (two record reads per
stream, plus each consumer's pending count when consumers are asked for;
those infos are built in slices just before the answer, :func:`warm_for_jsz`).

Wire facts carried over from nats-server (checked against nats-server 2.15.1
in ``tests/nats/test_nats_jsz.py``):

* Ferry has no accounts, so there is one JetStream account, nats-server's
  global account ``$G`` (``accounts`` and ``total`` are 1; ``acc=$G``
  selects it, any other ``acc`` selects nothing).
* ``consumers=true`` implies ``streams=true``, which implies
  ``accounts=true`` unless ``acc`` is given; ``offset``/``limit`` page the
  accounts (``limit`` 0 means 1024); an account's ``api.level`` is 0 and
  its ``reserved_*`` are the unsigned form of its -1 (unlimited) limits.
* Booleans are Go ``strconv.ParseBool`` values, integers ``strconv.Atoi``;
  a bad one is a 400 with nats-server's plain-text message.
* Single server: every stream and consumer leads itself (``raft=true``
  counts them in ``streams_leader``/``consumers_leader``), ``leader-only``
  and ``stream-leader-only`` filter nothing, and a stream's ``cluster`` is
  ``{"leader": <server name>}``. No mirrors or sources, so no
  ``direct_consumer_detail``.
* JetStream off: ``disabled: true`` and zeroes, as nats-server without ``-js``.

What Ferry does not have is left out, never invented: ``config.strict``
(unknown request fields are ignored, not refused), ``domain``,
``unique_tag``, ``compress_ok``, ``meta_cluster``, ``api.inflight`` (requests
are answered synchronously, so none is ever in flight when this runs), the
``limits`` of nats-server's ``jetstream {}`` block (``{}``: Ferry enforces
none). A stream's ``state`` is exactly ``STREAM.INFO``'s (the monitoring
listener first warms cold streams in slices: :func:`warm_for_jsz`), ``num_subjects``
included: every stream that holds messages has it, from the subject index
for an indexed stream and from ``SubjectCounts`` (``jetstream/streams.py``)
for the others (plus ``num_deleted`` when hidden messages lie between its
first and last sequence). Ferry has no
server-wide JetStream memory or storage cap, so ``config.max_memory`` and
``max_storage`` are -1 (unlimited), the value ``$JS.API.INFO`` limits carry.
``store_dir`` is the broker's data directory (log and metadata; nats-server
names a ``jetstream`` directory under ``-sd``). The fsync policy maps onto
``sync_always`` (``always``) or ``sync_interval`` in nanoseconds (``batch``,
its group-commit window); ``never`` sets neither.
"""

from __future__ import annotations

import json
import re
import time
import weakref
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import parse_qs

from .api import API_LEVEL, jetstream_for
from .streams import go_time
from .warmup import STATE, WARM_TAIL, cold, warm_for

GLOBAL_ACCOUNT = "$G"               # nats-server's account when none are configured
DEFAULT_LIMIT = 1024                # Jsz: a limit of 0 pages accounts by 1024
UINT64 = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1
_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})
_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
          "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}
_INT = re.compile(r"[+-]?[0-9]+\Z")
_BOOL_PARAMS = (("accounts", "accounts"), ("streams", "streams"), ("consumers", "consumers"),
                ("direct-consumers", "direct"), ("config", "config"))
_TAIL_BOOL_PARAMS = (("leader-only", "leader_only"), ("raft", "raft"), ("stream-leader-only", "stream_leader_only"))


class JszQueryError(ValueError):
    """A query value nats-server's decoder refuses; the message is its reply body."""


def parse_options(query: str) -> dict[str, Any]:
    """The ``/jsz`` options of a query string, decoded as nats-server decodes
    them (first value of each key, in its order, so the first bad one is reported)."""
    params = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
    opts: dict[str, Any] = {"acc": params.get("acc", "")}
    for key, name in _BOOL_PARAMS:
        opts[name] = _bool(params, key)
    opts["offset"], opts["limit"] = _int(params, "offset"), _int(params, "limit")
    for key, name in _TAIL_BOOL_PARAMS:
        opts[name] = _bool(params, key)
    return opts


def respond(state, query: str, now: float) -> tuple[int, bytes]:
    """``(status, body)`` for ``GET /jsz?query`` on the NATS state ``state``."""
    try:
        opts = parse_options(query)
    except JszQueryError as exc:
        return 400, str(exc).encode()
    api = jetstream_for(state.broker)
    if api is None and opts["leader_only"]:
        return 400, b"filtered response: not leader"
    return 200, go_json_indent(jsz(api, state.info.server_id, state.broker, now, opts))


def warm_for_jsz(broker, target: str) -> bool:
    """One slice of the work a ``/jsz`` request (``target``: its path, with or
    without its query) needs done first: a warm-up slice (:data:`warmup.WARM_TAIL`
    records) toward every stream's ``state``, then, with ``consumers=true``,
    the infos of :data:`CONSUMER_SLICE` consumers (kept for :func:`jsz`). True
    when one ran and the caller should yield and call again, False once
    :func:`jsz` would read at most a slice per stream and build no consumer
    info itself. The monitoring listener runs these slices before it answers,
    other tasks between two (issue 30: a cold 1,000,000-message stream was read
    in one piece inside the request, and every consumer's info built in one)."""
    path, _, query = target.partition("?")
    if path != "/jsz":
        return False
    api = jetstream_for(broker)
    if api is None:
        return False
    streams = api.streams
    try:
        for st in list(streams.streams.values()):
            if cold(streams, st, STATE):
                return warm_for(streams, st, STATE, WARM_TAIL)
        if query and parse_options(query).get("consumers"):
            return _consumer_slice(api)
    except JszQueryError:
        return False                                  # answered with its 400
    except Exception:  # noqa: BLE001 - e.g. a damaged segment: jsz reads what is left itself and reports it
        return False
    return False


# Consumer infos one /jsz slice builds (each a dict and the consumer's pending count,
# 20-50 us here): a slice near the warm-up's ~10 ms.
CONSUMER_SLICE = 256
# Infos built by warm_for_jsz slices for the next jsz() of that API: api -> (monotonic
# s of the first slice, {(stream, consumer): info}). jsz() takes them (and builds only
# the ones missing, e.g. of a consumer created meanwhile) and drops them; a request
# given up between its slices leaves some, which the next one uses only while
# younger than READY_S (the slices of one request take a few ms each).
_READY: "weakref.WeakKeyDictionary[Any, tuple[float, dict[tuple[str, str], dict]]]" = weakref.WeakKeyDictionary()
READY_S = 1.0


def _consumer_slice(api) -> bool:
    now = time.monotonic()
    at, ready = _READY.get(api) or (now, {})
    if now - at > READY_S:
        at, ready = now, {}
    _READY[api] = (at, ready)
    built = 0
    for name in sorted(api.streams.streams):
        for cname in sorted(api.consumers.by_stream.get(name, {})):
            con = api.consumers.by_stream.get(name, {}).get(cname)
            if con is None or (name, cname) in ready:
                continue
            if built == CONSUMER_SLICE:
                return True
            ready[(name, cname)] = api.consumers.info(con)
            built += 1
    return built > 0


def jsz(api, server_id: str, broker, now: float, opts: Mapping[str, Any]) -> dict[str, Any]:
    """nats-server's ``JSInfo`` document for ``api`` (None: JetStream is off)."""
    now_text = go_time(round(now * 1_000_000) * 1000)
    if api is None:
        return {**_stats(0, 0, 0, 0, 0, 0, 0, level=0), "server_id": server_id, "now": now_text,
                "disabled": True, "config": {"max_memory": 0, "max_storage": 0},
                "streams": 0, "consumers": 0, "messages": 0, "bytes": 0, "total": 0}
    account = api.account_info("", b"")             # $JS.API.INFO's figures (not counted as a request)
    names = sorted(api.streams.streams)
    states = {name: api.streams.state(api.streams.streams[name]) for name in names}
    consumers = sum(s["consumer_count"] for s in states.values())
    doc: dict[str, Any] = {
        **_stats(account["memory"], account["storage"], 0, 0, api.total, api.errors, 1, level=API_LEVEL),
        "server_id": server_id, "now": now_text, "config": _config(broker), "limits": {},
        "streams": len(names)}
    if opts.get("raft") and names:
        doc["streams_leader"] = len(names)          # single server: each stream leads itself
    doc["consumers"] = consumers
    if opts.get("raft") and consumers:
        doc["consumers_leader"] = consumers
    doc["messages"] = sum(s["messages"] for s in states.values())
    doc["bytes"] = sum(s["bytes"] for s in states.values())
    if _wants_account(opts):
        limits = account["limits"]
        detail: dict[str, Any] = {
            "name": GLOBAL_ACCOUNT, "id": GLOBAL_ACCOUNT,
            **_stats(account["memory"], account["storage"], limits["max_memory"] & UINT64,
                     limits["max_storage"] & UINT64, api.total, api.errors, 0, level=0)}
        streams_wanted = bool(opts.get("streams") or opts.get("consumers"))
        if streams_wanted and names:
            detail["stream_detail"] = [_stream_detail(api, name, states[name], opts) for name in names]
        doc["account_details"] = [detail]
    doc["total"] = 1
    _READY.pop(api, None)                           # built for this answer (warm_for_jsz)
    return doc


def _wants_account(opts: Mapping[str, Any]) -> bool:
    """Whether the one account ($G) is listed: ``acc`` names it, or accounts
    are asked for (``streams``/``consumers`` imply it when no ``acc`` is
    given) and the page (``offset``, ``limit``) covers it."""
    acc = opts.get("acc", "")
    if acc == GLOBAL_ACCOUNT:
        return True
    if not (opts.get("accounts") or (not acc and (opts.get("streams") or opts.get("consumers")))):
        return False
    limit = opts.get("limit", 0) or DEFAULT_LIMIT
    return limit < 0 or max(opts.get("offset", 0), 0) < 1


def _stream_detail(api, name: str, state: dict[str, Any], opts: Mapping[str, Any]) -> dict[str, Any]:
    st = api.streams.streams[name]
    out: dict[str, Any] = {"name": name, "created": st.created, "cluster": {"leader": api.server_name}}
    if opts.get("config"):
        out["config"] = st.config
    out["state"] = state
    if opts.get("consumers"):
        infos = []
        at, ready = _READY.get(api) or (0.0, {})
        if time.monotonic() - at > READY_S:
            ready = {}
        for cname in api.consumers.names(name):
            info = ready.get((name, cname)) or api.consumers.info(api.consumers.get(name, cname))
            if not opts.get("config"):
                info = {k: v for k, v in info.items() if k != "config"}
            infos.append(info)
        if infos:
            out["consumer_detail"] = infos
    return out


def _stats(memory: int, storage: int, reserved_memory: int, reserved_storage: int, total: int, errors: int,
           accounts: int, level: int) -> dict[str, Any]:
    """nats-server's ``JetStreamStats`` (no HA assets on a single server)."""
    return {"memory": memory, "storage": storage, "reserved_memory": reserved_memory,
            "reserved_storage": reserved_storage, "accounts": accounts, "ha_assets": 0,
            "api": {"level": level, "total": total, "errors": errors}}


def _config(broker) -> dict[str, Any]:
    """``JetStreamConfig``: no server-wide caps (-1), the data directory, the fsync policy."""
    cfg: dict[str, Any] = {"max_memory": -1, "max_storage": -1}
    data_dir = getattr(broker, "data_dir", None)
    if data_dir is not None:
        cfg["store_dir"] = str(Path(data_dir).resolve())
    log = getattr(getattr(broker, "cfg", None), "log", None)
    fsync = getattr(log, "fsync", "")
    if fsync == "batch" and log.fsync_interval_ms:  # a commit delay after busy rounds
        cfg["sync_interval"] = round(log.fsync_interval_ms * 1_000_000)
    elif fsync in ("always", "batch"):  # every ack after its fdatasync: nats-server's sync_always
        cfg["sync_always"] = True
    return cfg


def go_json_indent(doc: Any) -> bytes:
    """JSON as Go's ``json.MarshalIndent(v, "", "  ")`` writes it (HTML characters escaped)."""
    return json.dumps(doc, indent=2, ensure_ascii=False).translate(_GO_ESCAPES).encode()


def _bool(params: Mapping[str, str], key: str) -> bool:
    text = params.get(key, "")
    if text == "":
        return False
    try:
        return _BOOLS[text]
    except KeyError:
        raise JszQueryError(f"Error decoding boolean for '{key}': strconv.ParseBool: "
                            f"parsing {_quote(text)}: invalid syntax") from None


def _int(params: Mapping[str, str], key: str) -> int:
    text = params.get(key, "")
    if text == "":
        return 0
    if not _INT.match(text):
        raise JszQueryError(f"Error decoding int for '{key}': strconv.Atoi: parsing {_quote(text)}: invalid syntax")
    value = int(text)
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise JszQueryError(f"Error decoding int for '{key}': strconv.Atoi: parsing {_quote(text)}: "
                            "value out of range")
    return value


def _quote(text: str) -> str:
    """Close to Go's ``strconv.Quote`` (exact for printable text)."""
    return json.dumps(text, ensure_ascii=False)


__all__ = ["GLOBAL_ACCOUNT", "JszQueryError", "go_json_indent", "jsz", "parse_options", "respond"]
