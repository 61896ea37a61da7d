"""Admin commands against a running server, through its HTTP API (no trio).

Theory of operation
-------------------
The admin commands (gateway/admin.py, gateway/cli/admin.py) talk to a running
``ferry serve`` as an Iggy HTTP client would (docs/http.md): log in (a
password, a personal access token traded for a JWT, or a JWT used as it is;
gateway/remote_target.py says which server and which identity), then call the
routes for streams, topics, sends, polls, users, permissions, tokens and
consumer groups. :class:`RemoteBroker` offers the few ``Broker`` methods the
stream/topic/produce/tail commands use, so each of those has one body for a
server and for ``--local``.

The HTTP API numbers ids from 0, as the CLI (the current Iggy server's
numbering; ``ID_BASE`` keeps the shift in one place). Messages travel in the
current server's JSON: ``user_headers`` as typed key/value entries, so a
repeated key keeps each value and typed keys survive. A send answers only once
durable under the fsync policy, with the base offset it was given.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import quote, unquote, urlencode

from core.header_value import HeaderKind, HeaderValue
from core.message import Headers, Message
from core.model import TopicSettings

from .config import Config
from .remote_target import Auth, Target

GENERIC_NOT_FOUND = "Resource not found"  # Iggy's answer to a GET of a missing entity
ID_BASE = 0             # docs/http.md: ids on the HTTP API are numbered from 0
TIMEOUT_S = 30.0        # one request; a long poll asks for less (WAIT_MS)
DOWNLOAD_CHUNK = 64 * 1024  # bytes per read of a file answer (a snapshot): a bounded buffer, steady progress
LOOPBACK = "127.0.0.1"  # a listener bound to every address is reached on loopback
_ANY_HOSTS = ("0.0.0.0", "::", "")


class RemoteError(Exception):
    """The server refused a request; the message is its Iggy reason."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class RemoteUnreachable(RemoteError):
    """Nothing answered at the target's URL; ``url`` and ``reason`` say where and why."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the server at {url}: {reason}")
        self.url, self.reason = url, reason


@dataclass(frozen=True, slots=True)
class RemoteStream:
    id: int
    name: str
    topics_count: int
    created_at: int


@dataclass(frozen=True, slots=True)
class RemoteTopic:
    stream_id: int
    id: int
    name: str
    partitions_count: int
    message_expiry: int
    max_topic_size: int


@dataclass(frozen=True, slots=True)
class RemotePartition:
    first_offset: int
    next_offset: int
    size_bytes: int
    record_count: int


@dataclass(frozen=True, slots=True)
class RemoteSent:
    count: int
    partition_id: int | None   # from the confirmation; None only if the server sent none
    base_offset: int | None


def http_address(cfg: Config) -> tuple[str, int] | None:
    """Where the running server's HTTP listener answers, or None if it is off or TLS-only."""
    try:
        lc = cfg.listener("http")
    except KeyError:
        return None
    if not lc.enabled or lc.port == 0 or lc.options.get("tls_cert"):
        return None
    host = LOOPBACK if lc.host in _ANY_HOSTS else lc.host
    return host, lc.port


def _path_id(ident: int | str) -> str:
    return str(ident + ID_BASE) if isinstance(ident, int) else quote(ident, safe="")


def _size(text: Any) -> int:
    """Iggy's size text ("1234 B") -> bytes."""
    try:
        return int(str(text).split()[0])
    except (ValueError, IndexError):
        return 0


class NotHttp(RemoteUnreachable):
    """Something answered at the address, but not HTTP (nats-server's ``INFO {...}``
    greeting on 4222, say): one line naming the port, never the greeting."""

    def __init__(self, url: str, address: str, protocol: str | None) -> None:
        what = f"a {protocol} port" if protocol else "not an HTTP port"
        super().__init__(url, what)
        self.args = (f"{address} is {what}, not Ferry's HTTP API (default 127.0.0.1:3000)",)


def _reason(exc: BaseException) -> str:
    """A short human reason for a failed connection ("connection refused", ...)."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return f"no answer within {TIMEOUT_S:g} s"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc})"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text[0].lower() + text[1:] if text else type(exc).__name__


class RemoteBroker:
    """The admin subset of ``core.broker.Broker``, over one HTTP/1.1 connection,
    logged in as ``target.auth``. Raises RemoteUnreachable or RemoteError (login refused)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        if target.scheme == "https":
            self._conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                target.host, target.port, timeout=TIMEOUT_S, context=ssl.create_default_context())
        else:
            self._conn = http.client.HTTPConnection(target.host, target.port, timeout=TIMEOUT_S)
        self._token = ""
        self.user_id: int | None = None
        self._login(target.auth)

    def _login(self, auth: Auth) -> None:
        if auth.token and auth.is_jwt:   # a JWT is already what the routes want
            self._token = auth.token
            return
        try:
            if auth.token:
                body = self._call("POST", "/personal-access-tokens/login", {"token": auth.token})
            else:
                body = self._call("POST", "/users/login", {"username": auth.username, "password": auth.password})
        except RemoteUnreachable:
            raise
        except RemoteError as exc:
            raise RemoteError(f"{self.target.url} refused the login as {auth.describe()}: "
                              f"{str(exc).rpartition(': ')[2]}", exc.status) from None
        self._token = body["access_token"]["token"]
        self.user_id = body.get("user_id")

    def close(self) -> None:
        self._conn.close()

    def process_id(self) -> int | None:
        """The server's pid from ``/stats`` (Iggy's Stats.process_id)."""
        pid = (self._call("GET", "/stats") or {}).get("process_id")
        return pid if isinstance(pid, int) else None

    # -- transport -------------------------------------------------------------------
    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request; the decoded JSON answer (None when empty). RemoteError when refused."""
        return self._call(method, path, body)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        resp, raw = self._exchange(method, path, body, lambda resp: resp.read())
        return json.loads(raw) if raw else None

    def download(self, method: str, path: str, body: Any, sink, on_chunk=None) -> tuple[int, str | None]:
        """One request whose answer is a file: written to ``sink`` in DOWNLOAD_CHUNK
        pieces (``on_chunk(n, total)`` after each; total from Content-Length or None).
        Returns (bytes, the Content-Disposition filename or None). Errors as :meth:`call`."""
        def copy(resp) -> int:
            total = int(resp.headers.get("content-length") or 0) or None
            got = 0
            while chunk := resp.read(DOWNLOAD_CHUNK):
                sink.write(chunk)
                got += len(chunk)
                if on_chunk is not None:
                    on_chunk(len(chunk), total)
            return got

        resp, got = self._exchange(method, path, body, copy)
        disposition = resp.headers.get("content-disposition") or ""
        return got, disposition.partition('filename="')[2].partition('"')[0] or None

    def _exchange(self, method: str, path: str, body: Any, take):
        """Send one request; ``take(resp)`` reads a successful answer. Returns
        ``(resp, take's result)``; RemoteUnreachable when the connection fails,
        RemoteError with the server's reason when it answers >= 400."""
        headers = {"content-type": "application/json"}
        if self._token:
            headers["authorization"] = f"Bearer {self._token}"
        data = None if body is None else json.dumps(body).encode()
        try:
            self._conn.request(method, path, body=data, headers=headers)
            resp = self._conn.getresponse()
            result = resp.read() if resp.status >= 400 else take(resp)
        except http.client.BadStatusLine as exc:
            self._conn.close()
            line = str(getattr(exc, "line", "") or "")
            if not isinstance(exc, ConnectionError) and line:
                raise NotHttp(self.target.url, f"{self.target.host}:{self.target.port}",
                              "NATS" if line.startswith("INFO ") else None) from None
            raise RemoteUnreachable(self.target.url, _reason(exc)) from exc
        except (OSError, http.client.HTTPException) as exc:
            self._conn.close()
            raise RemoteUnreachable(self.target.url, _reason(exc)) from exc
        if resp.status >= 400:
            try:
                reason = json.loads(result)["reason"]
            except (ValueError, KeyError, TypeError):
                reason = {401: "not authorized (log in again, or check --token)",
                          403: "permission denied"}.get(resp.status, f"HTTP {resp.status}")
            if resp.status == 404 and reason == GENERIC_NOT_FOUND:
                reason = self._what_is_missing(path) or reason
            raise RemoteError(f"server refused {method} {path.partition('?')[0]}: {reason}", resp.status)
        return resp, result

    def _what_is_missing(self, path: str) -> str | None:
        """Iggy answers a GET of a missing stream or topic "Resource not found";
        name it as produce's errors do (``stream 'nosuch' not found``). The
        stream of a ``/streams/S/topics/T`` path is asked for once to tell which."""
        segs = [unquote(p) for p in path.partition("?")[0].strip("/").split("/")]
        if len(segs) < 2 or segs[0] != "streams":
            return None
        stream = _shown(segs[1])
        if len(segs) < 4 or segs[2] != "topics":
            return f"stream {stream} not found" if len(segs) == 2 else None
        topic = _shown(segs[3])
        if not self._exists(f"/streams/{quote(segs[1], safe='')}"):
            return f"stream {stream} not found"
        if len(segs) == 4 or not self._exists(f"/streams/{quote(segs[1], safe='')}/topics/{quote(segs[3], safe='')}"):
            return f"topic {topic} not found in stream {stream}"
        if len(segs) >= 6 and segs[4] == "consumer-groups":
            return f"consumer group {_shown(segs[5])} not found in {stream}/{topic}"
        return None

    def _exists(self, path: str) -> bool:
        """False when GET ``path`` answers 404 (any other refusal: True, say nothing new)."""
        try:
            self._exchange("GET", path, None, lambda resp: resp.read())
        except RemoteUnreachable:
            raise
        except RemoteError as exc:
            return exc.status != 404
        return True

    # -- streams ---------------------------------------------------------------------
    def create_stream(self, name: str, stream_id: int | None = None) -> RemoteStream:
        body: dict[str, Any] = {"name": name}
        if stream_id is not None:
            body["stream_id"] = stream_id + ID_BASE
        return _stream(self._call("POST", "/streams", body))

    def list_streams(self) -> list[RemoteStream]:
        return [_stream(s) for s in self._call("GET", "/streams")]

    def get_stream(self, stream: int | str) -> RemoteStream:
        return _stream(self._call("GET", f"/streams/{_path_id(stream)}"))

    def delete_stream(self, stream: int | str) -> None:
        self._call("DELETE", f"/streams/{_path_id(stream)}")

    # -- topics ----------------------------------------------------------------------
    def create_topic(self, stream: int | str, name: str, partitions: int = 1, *, topic_id: int | None = None,
                     settings: TopicSettings = TopicSettings(), **_: Any) -> RemoteTopic:
        """``Broker.create_topic`` over HTTP; the replication factor and the log settings
        (``segment_bytes``, ``fsync``: the ``**_``) are not sent: the server's defaults apply."""
        body: dict[str, Any] = {"name": name, "partitions_count": partitions,
                                "compression_algorithm": settings.compression,
                                "message_expiry": settings.message_expiry, "max_topic_size": settings.max_topic_size}
        if topic_id is not None:
            body["topic_id"] = topic_id + ID_BASE
        sid = self.get_stream(stream).id
        return _topic(sid, self._call("POST", f"/streams/{_path_id(stream)}/topics", body))

    def list_topics(self, stream: int | str) -> list[RemoteTopic]:
        sid = self.get_stream(stream).id
        return [_topic(sid, t) for t in self._call("GET", f"/streams/{_path_id(stream)}/topics")]

    def get_topic(self, stream: int | str, topic: int | str) -> RemoteTopic:
        sid = self.get_stream(stream).id
        return _topic(sid, self._call("GET", f"/streams/{_path_id(stream)}/topics/{_path_id(topic)}"))

    def delete_topic(self, stream: int | str, topic: int | str) -> None:
        self._call("DELETE", f"/streams/{_path_id(stream)}/topics/{_path_id(topic)}")

    def partitions(self, stream: int | str, topic: int | str) -> dict[int, RemotePartition]:
        """Every partition of a topic by id, from one GET of the topic."""
        info = self._call("GET", f"/streams/{_path_id(stream)}/topics/{_path_id(topic)}")
        out = {}
        for p in info.get("partitions") or ():
            count = p["messages_count"]
            # current_offset is the last offset (0 when empty): records are contiguous
            # from first to last, retention only removes the oldest (docs/storage.md).
            next_offset = p["current_offset"] + 1 if count or p["current_offset"] else 0
            out[p["id"] - ID_BASE] = RemotePartition(next_offset - count, next_offset, _size(p["size"]), count)
        return out

    def partition(self, stream: int | str, topic: int | str, partition_id: int) -> RemotePartition:
        found = self.partitions(stream, topic).get(partition_id)
        if found is None:
            raise RemoteError(f"partition {partition_id} not found")
        return found

    # -- messages ----------------------------------------------------------------------
    def append(self, stream: int | str, topic: int | str, payloads: Sequence[bytes], headers: Headers, *,
               partition: int | None = None, key: bytes | None = None) -> RemoteSent:
        if partition is not None:
            partitioning = {"kind": "partition_id", "value": _b64((partition + ID_BASE).to_bytes(4, "little"))}
        elif key is not None:
            partitioning = {"kind": "messages_key", "value": _b64(key)}
        else:
            partitioning = {"kind": "balanced", "value": ""}
        hdrs = [{"key": _field(k), "value": _field(v)} for k, v in headers.items()] or None
        messages = [{"id": 0, "payload": _b64(p), "user_headers": hdrs} for p in payloads]
        body = self._call("POST", f"/streams/{_path_id(stream)}/topics/{_path_id(topic)}/messages",
                          {"partitioning": partitioning, "messages": messages})
        confirmations = (body or {}).get("confirmations") or [{}]
        first = confirmations[0]
        pid = first.get("partition_id")
        return RemoteSent(len(payloads), None if pid is None else pid - ID_BASE, first.get("base_offset"))

    def read_messages(self, stream: int | str, topic: int | str, partition: int, offset: int,
                      count: int) -> list[Message]:
        query = urlencode({"partition_id": partition + ID_BASE, "kind": "offset", "value": offset,
                           "count": count})
        body = self._call("GET", f"/streams/{_path_id(stream)}/topics/{_path_id(topic)}/messages?{query}")
        return [_message(m) for m in body.get("messages") or ()]


def _shown(segment: str) -> str:
    """A path identifier as the user typed it: ``'orders'``, or ``id 3`` for a number."""
    return f"id {int(segment) - ID_BASE}" if segment.isdigit() else repr(segment)


def _b64(data: bytes | bytearray) -> str:
    return base64.b64encode(data).decode("ascii")


def _field(value: HeaderValue) -> dict:
    return {"kind": value.kind.json_name, "value": _b64(value.data)}


def _header_value(field: dict) -> HeaderValue:
    return HeaderValue(HeaderKind.from_json_name(field["kind"]), base64.b64decode(field["value"]))


def _stream(s: dict) -> RemoteStream:
    return RemoteStream(s["id"] - ID_BASE, s["name"], s.get("topics_count", 0), s.get("created_at", 0))


def _topic(sid: int, t: dict) -> RemoteTopic:
    return RemoteTopic(sid, t["id"] - ID_BASE, t["name"], t["partitions_count"], t.get("message_expiry", 0),
                       t.get("max_topic_size", 0))


def _message(m: dict) -> Message:
    """One message of the current server's PolledMessages JSON (``header``, ``payload``,
    ``user_headers``)."""
    headers = Headers()
    for entry in m.get("user_headers") or ():
        headers.add(_header_value(entry["key"]), _header_value(entry["value"]))
    h = m["header"]
    return Message(id=h["id"], timestamp=h["timestamp"], origin_timestamp=h.get("origin_timestamp", h["timestamp"]),
                   headers=headers, payload=base64.b64decode(m["payload"]), offset=h["offset"],
                   checksum=h.get("checksum", 0))


def path_id(ident: int | str) -> str:
    """A stream, topic, group or user identifier as a URL path segment."""
    return _path_id(ident)


__all__ = ["RemoteBroker", "RemoteError", "RemoteUnreachable", "http_address", "path_id"]
