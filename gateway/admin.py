"""Admin commands on an embedded data directory: streams, topics, produce, tail.

These open the broker directly (taking the data-directory lock), so they work
while no server runs. When a running server holds the directory they talk to it
through its HTTP API instead (gateway/remote.py, as the configured root user);
if that listener is off they say so and exit 2.

Names on the command line follow Iggy's rule: an all-digit identifier is an
id (0-based, the canonical numbering of docs/internals.md), anything else is a
name. ``stream/topic`` splits at the first ``/``.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import IO, Iterator, Sequence

from core.broker import Broker
from core.errors import InvalidArgument
from core.header_value import HeaderKind, HeaderValue
from core.log import AppendInput
from core.message import Headers, Message

from .config import Config
from .confkeys import Key
from .lock import DataDirLock, DataDirLocked
from .remote import RemoteBroker, RemoteError, RemoteUnreachable, http_address

# Records read per call while tailing: large enough that a backlog drains in
# few calls, small enough that one call's memory stays bounded (Iggy's CLI
# polls 1000 at a time by default too).
TAIL_BATCH = 1000
# Follow mode re-opens the data directory at most this often: opening runs
# recovery, and a human watching a tail does not notice a quarter second.
DEFAULT_FOLLOW_INTERVAL_S = 0.25
_DURATION_UNITS = {"us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000,
                   "d": 86_400_000_000}


class AdminError(Exception):
    """A command-line mistake the admin commands report without a traceback."""


class DirInUse(DataDirLocked):
    """The data directory is held by another process; the message says what to do."""

    def __init__(self, err: DataDirLocked) -> None:
        super().__init__(err.data_dir, err.pid)
        self.args = (f"{err}; admin commands open the data directory directly, so stop the server first "
                     "(or point --data at another directory)",)


# -- opening -----------------------------------------------------------------
@contextmanager
def open_broker(cfg: Config, *, must_exist: bool = False, remote: bool = True) -> Iterator[Broker]:
    """Lock the data directory and open its broker; close and unlock on exit.

    When a running server holds the directory, yield a :class:`RemoteBroker`
    talking to that server (``remote``), else raise :class:`DirInUse`."""
    data_dir = cfg.server.data_dir
    if must_exist and not data_dir.is_dir():
        raise AdminError(f"data directory {str(data_dir)!r} does not exist (nothing stored yet)")
    lock = DataDirLock(data_dir)
    try:
        lock.acquire()
    except DataDirLocked as err:
        address = http_address(cfg) if remote else None
        if address is None:
            raise DirInUse(err) from None
        try:
            client = RemoteBroker(cfg, address)
        except RemoteUnreachable:  # e.g. the server listens elsewhere than this config says
            raise DirInUse(err) from None
        except RemoteError as exc:
            raise AdminError(f"{err}; its HTTP API at {address[0]}:{address[1]} refused the login: {exc}") from None
        if err.pid is not None and client.process_id() != err.pid:
            # Another server answers at that address: never act on the wrong data.
            client.close()
            raise DirInUse(err) from None
        try:
            yield client  # type: ignore[misc]
        except RemoteError as exc:
            raise AdminError(str(exc)) from None
        finally:
            client.close()
        return
    try:
        broker = Broker.open(data_dir, cfg.broker_config())
        try:
            yield broker
        finally:
            broker.close()
    finally:
        lock.release()


def ident(text: str) -> int | str:
    """An all-digit identifier is an id, anything else a name."""
    return int(text) if text.isdigit() else text


def split_address(text: str) -> tuple[int | str, int | str]:
    """``stream/topic`` -> the two identifiers; AdminError when malformed."""
    stream, sep, topic = text.partition("/")
    if not sep or not stream or not topic:
        raise AdminError(f"{text!r} is not stream/topic")
    return ident(stream), ident(topic)


def parse_duration_us(text: str) -> int:
    """``"90s"``, ``"15m"``, ``"7d"``, ``"250ms"`` or plain seconds -> microseconds."""
    value = text.strip().lower()
    for unit in sorted(_DURATION_UNITS, key=len, reverse=True):
        if value.endswith(unit) and value[: -len(unit)].strip().isdigit():
            return int(value[: -len(unit)]) * _DURATION_UNITS[unit]
    if value.isdigit():
        return int(value) * _DURATION_UNITS["s"]
    raise AdminError(f"{text!r} is not a duration (like 90s, 15m, 2h, 7d)")


def parse_size(text: str) -> int:
    try:
        return Key("size", 0, lo=0).convert(text, from_text=True)
    except ValueError as exc:
        raise AdminError(f"{text!r}: {exc}") from None


def _iso(us: int) -> str:
    secs, micros = divmod(us, 1_000_000)
    return datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{micros:06d}Z"


def _print_table(rows: list[list[object]], header: list[str], out: IO[str]) -> None:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")


# -- streams -----------------------------------------------------------------
def stream_create(cfg: Config, name: str, stream_id: int | None, out: IO[str]) -> None:
    with open_broker(cfg) as broker:
        info = broker.create_stream(name, stream_id)
    out.write(f"created stream {info.name!r} with id {info.id}\n")


def stream_list(cfg: Config, as_json: bool, out: IO[str]) -> None:
    with open_broker(cfg, must_exist=True) as broker:
        streams = broker.list_streams()
    if as_json:
        out.write(json.dumps([{"id": s.id, "name": s.name, "topics": s.topics_count,
                               "created_at": s.created_at} for s in streams]) + "\n")
        return
    rows = [[s.id, s.name, s.topics_count, _iso(s.created_at)] for s in streams]
    _print_table(rows, ["ID", "NAME", "TOPICS", "CREATED"], out)


def stream_delete(cfg: Config, stream: str, out: IO[str]) -> None:
    with open_broker(cfg, must_exist=True) as broker:
        info = broker.get_stream(ident(stream))
        broker.delete_stream(info.id)
    out.write(f"deleted stream {info.name!r} (id {info.id})\n")


# -- topics ------------------------------------------------------------------
def topic_create(cfg: Config, stream: str, name: str, *, partitions: int, topic_id: int | None,
                 message_expiry: str | None, max_size: str | None, out: IO[str]) -> None:
    expiry = parse_duration_us(message_expiry) if message_expiry else 0
    size = parse_size(max_size) if max_size else 0
    with open_broker(cfg) as broker:
        info = broker.create_topic(ident(stream), name, partitions, topic_id=topic_id,
                                   message_expiry=expiry, max_topic_size=size)
    out.write(f"created topic {info.name!r} with id {info.id} and {info.partitions_count} partition(s)\n")


def topic_list(cfg: Config, stream: str, as_json: bool, out: IO[str]) -> None:
    with open_broker(cfg, must_exist=True) as broker:
        rows = []
        for t in broker.list_topics(ident(stream)):
            parts = [broker.partition(t.stream_id, t.id, pid) for pid in range(t.partitions_count)]
            rows.append((t, sum(p.record_count for p in parts), sum(p.size_bytes for p in parts)))
    if as_json:
        out.write(json.dumps([{"id": t.id, "name": t.name, "partitions": t.partitions_count,
                               "messages": n, "size_bytes": size, "message_expiry_us": t.message_expiry,
                               "max_topic_size": t.max_topic_size} for t, n, size in rows]) + "\n")
        return
    table = [[t.id, t.name, t.partitions_count, n, size, t.message_expiry or "-", t.max_topic_size or "-"]
             for t, n, size in rows]
    _print_table(table, ["ID", "NAME", "PARTITIONS", "MESSAGES", "BYTES", "EXPIRY_US", "MAX_SIZE"], out)


def topic_delete(cfg: Config, stream: str, topic: str, out: IO[str]) -> None:
    with open_broker(cfg, must_exist=True) as broker:
        info = broker.get_topic(ident(stream), ident(topic))
        broker.delete_topic(info.stream_id, info.id)
    out.write(f"deleted topic {info.name!r} (id {info.id})\n")


# -- produce -----------------------------------------------------------------
def parse_header(text: str) -> tuple[str, HeaderValue]:
    """``key=value`` (a string header) or ``key:kind=value`` with ``kind`` one
    of the JSON kind names (``int64``, ``bool``, ``raw`` as base64, ...)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise AdminError(f"header {text!r} is not key=value")
    name, colon, kind_name = key.rpartition(":")
    if colon and name:
        try:
            kind = HeaderKind.from_json_name(kind_name)
        except InvalidArgument:
            kind = None
        if kind is not None:
            return name, HeaderValue.from_text(kind, value)
    return key, HeaderValue.string(value)


def produce(cfg: Config, address: str, message: str, *, headers: Sequence[str], key: str | None,
            partition: int | None, lines: bool, stdin: IO[bytes], out: IO[str]) -> None:
    stream, topic = split_address(address)
    hdrs = Headers()
    for text in headers:
        hdrs.add(*parse_header(text))
    block = hdrs.encode()
    if message == "-":
        data = stdin.read()
        payloads = data.splitlines() if lines else [data]
    else:
        payloads = [message.encode("utf-8")]
    if not payloads:
        raise AdminError("nothing to produce (stdin was empty)")
    items = [AppendInput(payload=p, headers=block) for p in payloads]
    key_bytes = key.encode("utf-8") if key is not None else None
    with open_broker(cfg) as broker:
        if isinstance(broker, RemoteBroker):  # the server answers once durable, without offsets
            sent = broker.append(stream, topic, payloads, hdrs, partition=partition, key=key_bytes)
            where = f"partition={sent.partition_id}" if sent.partition_id is not None else "partition=(server's choice)"
            out.write(f"{where} sent={sent.count} (via the running server)\n")
            return
        result = broker.append(stream, topic, items, partition=partition, key=key_bytes)
        broker.flush()  # durable before we say so
    last = result.base_offset + result.count - 1
    offsets = f"offset={last}" if result.count == 1 else f"offsets={result.base_offset}..{last}"
    out.write(f"partition={result.partition_id} {offsets}\n")


# -- tail --------------------------------------------------------------------
def start_offset(first: int, next_: int, spec: str) -> int:
    """Where ``--from first|last|N`` starts in a partition holding ``first..next_-1``."""
    if spec == "first":
        return first
    if spec == "last":
        return max(next_ - 1, first)
    if spec.isdigit():
        return max(int(spec), first)
    raise AdminError(f"--from {spec!r}: expected first, last or an offset")


def _payload_text(payload: bytes) -> tuple[str, str]:
    try:
        text = payload.decode("utf-8")
        if all(c.isprintable() or c in "\t\n\r" for c in text):
            return text, "utf-8"
    except UnicodeDecodeError:
        pass
    return base64.b64encode(payload).decode("ascii"), "base64"


def _header_key_text(key: HeaderValue) -> str:
    return key.to_text() if key.kind is HeaderKind.STRING else f"{key.kind.json_name}:{key.to_text()}"


def format_message(pid: int, msg: Message, as_json: bool) -> str:
    """One tail line: offset, timestamp, headers and payload."""
    payload, encoding = _payload_text(msg.payload)
    if as_json:
        return json.dumps({
            "partition": pid, "offset": msg.offset, "timestamp": msg.timestamp, "id": f"{msg.id:032x}",
            "headers": [{"key": _header_key_text(k), "kind": v.kind.json_name, "value": v.to_text()}
                        for k, v in msg.headers.items()],
            "payload": payload, "encoding": encoding,
        })
    hdrs = []
    for k, v in msg.headers.items():
        kind = "" if v.kind is HeaderKind.STRING else f":{v.kind.json_name}"
        hdrs.append(f"{_header_key_text(k)}{kind}={json.dumps(v.to_text())[1:-1]}")
    if encoding == "base64":
        shown = f"base64:{payload}"
    elif payload.isprintable() and not payload.startswith(('"', "base64:")):
        shown = payload
    else:  # control characters or an ambiguous start: quote it so one message stays one line
        shown = json.dumps(payload, ensure_ascii=False)
    return (f"partition={pid} offset={msg.offset} timestamp={_iso(msg.timestamp)} "
            f"headers={{{', '.join(hdrs)}}} payload={shown}")


def _drain(broker: Broker, stream, topic, cursors: dict[int, int], spec: str, partition: int | None,
           as_json: bool, out: IO[str]) -> None:
    """Print every record from each partition's cursor to its end, advancing the cursors."""
    info = broker.get_topic(stream, topic)
    pids = [partition] if partition is not None else range(info.partitions_count)
    for pid in pids:
        part = broker.partition(info.stream_id, info.id, pid)
        offset = cursors.get(pid)
        if offset is None:
            offset = start_offset(part.first_offset, part.next_offset, spec)
        while offset < part.next_offset:
            msgs = broker.read_messages(info.stream_id, info.id, pid, offset, TAIL_BATCH)
            if not msgs:
                break
            for msg in msgs:
                out.write(format_message(pid, msg, as_json) + "\n")
            offset = msgs[-1].offset + 1
        cursors[pid] = offset
    out.flush()


def tail(cfg: Config, address: str, *, spec: str, partition: int | None, follow: bool, as_json: bool,
         interval: float = DEFAULT_FOLLOW_INTERVAL_S, out: IO[str], sleep=time.sleep,
         rounds: int | None = None) -> None:
    """Print a topic's messages; with ``follow``, keep polling for new ones.

    Following re-opens the data directory each round (so ``ferry produce`` can
    take it in between) and waits quietly while another process holds it.
    ``rounds`` bounds the follow loop (tests); ``None`` runs until interrupted."""
    stream, topic = split_address(address)
    start_offset(0, 0, spec)  # reject a bad --from before touching the disk
    cursors: dict[int, int] = {}
    with open_broker(cfg, must_exist=True) as broker:
        _drain(broker, stream, topic, cursors, spec, partition, as_json, out)
    warned = False
    while follow and (rounds is None or rounds > 0):
        rounds = None if rounds is None else rounds - 1
        sleep(interval)
        try:
            with open_broker(cfg, must_exist=True) as broker:
                _drain(broker, stream, topic, cursors, "first", partition, as_json, out)
        except DirInUse as err:
            if not warned:
                print(f"ferry tail: waiting: {err}", file=sys.stderr)
                warned = True


__all__ = [
    "AdminError",
    "DirInUse",
    "format_message",
    "open_broker",
    "parse_header",
    "produce",
    "stream_create",
    "stream_delete",
    "stream_list",
    "tail",
    "topic_create",
    "topic_delete",
    "topic_list",
]
