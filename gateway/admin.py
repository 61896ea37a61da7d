"""Admin commands on streams, topics and messages: stream, topic, produce, tail.

Each command has one body for two places (``open_broker``):

* a running server, through its HTTP API (``server=``, a
  :class:`~.remote_target.Target`; gateway/remote.py): the default of the CLI;
* the data directory itself (``server=None``, the CLI's ``--local``): the
  broker is opened directly (taking the data-directory lock), so it works while
  no server runs. When a running server holds the directory, the command talks
  to that server instead (the ``[listeners.http]`` port of the same config), and
  if that listener is off it says so and exits 2.

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
from typing import IO, TYPE_CHECKING, Iterator, Sequence

from core.errors import InvalidArgument, NotFound
from core.header_value import HeaderKind, HeaderValue
from core.message import Headers, Message
from core.model import TopicSettings

from .config import Config

if TYPE_CHECKING:
    from core.broker import Broker
from .confkeys import Key
from .lock import DataDirLock, DataDirLocked
from .remote import RemoteBroker, RemoteError, RemoteUnreachable, http_address
from .remote_target import Auth, Target

# Records read per call while tailing: large enough that a backlog drains in
# few calls, small enough that one call's memory stays bounded (Iggy's CLI
# polls 1000 at a time by default too).
TAIL_BATCH = 1000
# Follow mode re-opens the data directory at most this often: opening runs
# recovery, and a human watching a tail does not notice a quarter second.
DEFAULT_FOLLOW_INTERVAL_S = 0.25
# produce sends stdin in batches of at most this many messages and raw bytes:
# the HTTP listener refuses bodies over max_body_bytes (2 MB by default) and
# base64 grows payloads by a third, so 1 MiB of payload stays under it.
PRODUCE_BATCH = 1000
PRODUCE_BATCH_BYTES = 1 << 20
# A progress bar appears only on a terminal and only when an operation takes
# longer than this (tqdm's ``delay``): short commands print nothing extra.
PROGRESS_DELAY_S = 0.5
_DURATION_UNITS = {"us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000,
                   "d": 86_400_000_000}


class AdminError(Exception):
    """A command-line mistake the admin commands report without a traceback."""


class UsageError(AdminError):
    """A malformed argument (a bad STREAM/TOPIC, header, duration, size, --from):
    bad usage, exit 2 as argparse's own errors (docs/cli.md)."""


class DirInUse(DataDirLocked):
    """The data directory is held by another process; the message says what to do."""

    def __init__(self, err: DataDirLocked) -> None:
        super().__init__(err.data_dir, err.pid)
        self.args = (f"{err}; admin commands open the data directory directly, so stop the server first "
                     "(or point --data at another directory)",)


# -- opening -----------------------------------------------------------------
@contextmanager
def _remote(target: Target) -> Iterator[RemoteBroker]:
    """A logged-in client of ``target``; its refusals become AdminError (one line,
    exit 1). RemoteUnreachable passes through for the CLI to word."""
    try:
        client = RemoteBroker(target)
    except RemoteUnreachable:
        raise
    except RemoteError as exc:
        raise AdminError(str(exc)) from None
    try:
        yield client
    except RemoteUnreachable:
        raise
    except RemoteError as exc:
        raise AdminError(str(exc)) from None
    finally:
        client.close()


def remote_session(target: Target):
    """``with remote_session(target) as client``: see :func:`_remote`."""
    return _remote(target)


@contextmanager
def open_broker(cfg: Config, *, must_exist: bool = False, remote: bool = True, server: Target | None = None,
                auth: Auth | None = None) -> Iterator["Broker"]:
    """With ``server``: a :class:`RemoteBroker` logged in to it. Without: lock
    the data directory and open its broker; close and unlock on exit.

    When a running server holds the directory, yield a :class:`RemoteBroker`
    talking to that server (``remote``; as ``auth``, default the configured
    root user), else raise :class:`DirInUse`."""
    if server is not None and not server.local:
        with _remote(server) as client:
            yield client  # type: ignore[misc]
        return
    if server is not None:
        auth = auth or server.auth
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
        auth = auth or Auth(cfg.auth.root_username, cfg.auth.root_password)
        try:
            client = RemoteBroker(Target("http", address[0], address[1], auth, "the same config"))
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
    from core.broker import Broker  # only --local opens a broker: the server commands start without it

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
        raise UsageError(f"{text!r} is not STREAM/TOPIC")
    return ident(stream), ident(topic)


def parse_duration_us(text: str) -> int:
    """``"90s"``, ``"15m"``, ``"7d"``, ``"250ms"`` or plain seconds -> microseconds."""
    value = text.strip().lower()
    for unit in sorted(_DURATION_UNITS, key=len, reverse=True):
        if value.endswith(unit) and value[: -len(unit)].strip().isdigit():
            return int(value[: -len(unit)]) * _DURATION_UNITS[unit]
    if value.isdigit():
        return int(value) * _DURATION_UNITS["s"]
    raise UsageError(f"{text!r} is not a duration (like 90s, 15m, 2h, 7d)")


def parse_size(text: str) -> int:
    try:
        return Key("size", 0, lo=0).convert(text, from_text=True)
    except ValueError as exc:
        raise UsageError(f"{text!r}: {exc}") from None


def _iso(us: int) -> str:
    secs, micros = divmod(us, 1_000_000)
    return datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{micros:06d}Z"


def _print_table(rows: list[list[object]], header: list[str], out: IO[str]) -> None:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")


# -- streams -----------------------------------------------------------------
def _existing(lookup):
    """``lookup()``'s answer, or None when the thing is not there (locally a core
    NotFound, on a server a 404): ``--exist-ok`` asks first, then creates."""
    try:
        return lookup()
    except NotFound:
        return None
    except RemoteError as err:
        if err.status == 404:
            return None
        raise


def stream_create(cfg: Config, name: str, stream_id: int | None, out: IO[str], server: Target | None = None,
                  exist_ok: bool = False) -> None:
    with open_broker(cfg, server=server) as broker:
        found = _existing(lambda: broker.get_stream(name)) if exist_ok else None
        if found is not None:
            out.write(f"stream {found.name!r} exists with id {found.id}\n")
            return
        info = broker.create_stream(name, stream_id)
    out.write(f"created stream {info.name!r} with id {info.id}\n")


def stream_list(cfg: Config, as_json: bool, out: IO[str], server: Target | None = None) -> None:
    with open_broker(cfg, must_exist=True, server=server) as broker:
        streams = broker.list_streams()
    if as_json:
        out.write(json.dumps([{"id": s.id, "name": s.name, "topics": s.topics_count,
                               "created_at": s.created_at} for s in streams]) + "\n")
        return
    rows = [[s.id, s.name, s.topics_count, _iso(s.created_at)] for s in streams]
    _print_table(rows, ["ID", "NAME", "TOPICS", "CREATED"], out)


def stream_delete(cfg: Config, stream: str, out: IO[str], server: Target | None = None) -> None:
    with open_broker(cfg, must_exist=True, server=server) as broker:
        info = broker.get_stream(ident(stream))
        broker.delete_stream(info.id)
    out.write(f"deleted stream {info.name!r} (id {info.id})\n")


# -- topics ------------------------------------------------------------------
def topic_create(cfg: Config, stream: str, name: str, *, partitions: int, topic_id: int | None,
                 message_expiry: str | None, max_size: str | None, out: IO[str], server: Target | None = None,
                 exist_ok: bool = False) -> None:
    expiry = parse_duration_us(message_expiry) if message_expiry else 0
    size = parse_size(max_size) if max_size else 0
    with open_broker(cfg, server=server) as broker:
        found = _existing(lambda: broker.get_topic(ident(stream), name)) if exist_ok else None
        if found is not None:  # as it is: an existing topic's settings are not changed
            out.write(f"topic {found.name!r} exists with id {found.id} and {found.partitions_count} partition(s)\n")
            return
        info = broker.create_topic(ident(stream), name, partitions, topic_id=topic_id,
                                   settings=TopicSettings(message_expiry=expiry, max_topic_size=size))
    out.write(f"created topic {info.name!r} with id {info.id} and {info.partitions_count} partition(s)\n")


def topic_list(cfg: Config, stream: str, as_json: bool, out: IO[str], server: Target | None = None) -> None:
    with open_broker(cfg, must_exist=True, server=server) as broker:
        rows = []
        for t in broker.list_topics(ident(stream)):
            parts = [broker.partition(t.stream_id, t.id, pid) for pid in range(t.partitions_count)]
            rows.append((t, sum(p.record_count for p in parts), sum(p.size_bytes for p in parts)))
    if as_json:
        out.write(json.dumps([{"id": t.id, "name": t.name, "partitions": t.partitions_count,
                               "messages": n, "size_bytes": size, "message_expiry_us": t.message_expiry,
                               "max_topic_size": t.max_topic_size} for t, n, size in rows]) + "\n")
        return
    table = [[t.id, t.name, t.partitions_count, n, human_size(size), _limit(t.message_expiry, _human_us),
              _limit(t.max_topic_size, human_size)] for t, n, size in rows]
    _print_table(table, ["ID", "NAME", "PARTITIONS", "MESSAGES", "SIZE", "EXPIRY", "MAX_SIZE"], out)


U64_MAX = 2**64 - 1  # Iggy's "no limit" for message_expiry and max_topic_size (as is 0)


def _limit(value: int, shown) -> str:
    """A topic limit for a table: ``unlimited`` for 0 and u64::MAX, else ``shown(value)``."""
    return "unlimited" if value in (0, U64_MAX) else shown(value)


def human_size(n: int) -> str:
    """``512 B``, ``1.5 GiB``: bytes for a table (``--json`` keeps the number)."""
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            break
        value /= 1024
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}".replace(".0 ", " ")


def _human_us(us: int) -> str:
    """Microseconds as the largest whole unit of ``--message-expiry``: ``7d``, ``90s``, ``250ms``."""
    for unit in ("d", "h", "m", "s", "ms"):
        if us % _DURATION_UNITS[unit] == 0:
            return f"{us // _DURATION_UNITS[unit]}{unit}"
    return f"{us}us"


def topic_delete(cfg: Config, stream: str, topic: str, out: IO[str], server: Target | None = None) -> None:
    with open_broker(cfg, must_exist=True, server=server) as broker:
        info = broker.get_topic(ident(stream), ident(topic))
        broker.delete_topic(info.stream_id, info.id)
    out.write(f"deleted topic {info.name!r} (id {info.id})\n")


# -- produce -----------------------------------------------------------------
def parse_header(text: str) -> tuple[str, HeaderValue]:
    """``key=value`` (a string header) or ``key:kind=value`` with ``kind`` one
    of the JSON kind names (``int64``, ``bool``, ``raw`` as base64, ...)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--header {text!r}: not KEY=VALUE (or KEY:KIND=VALUE)")
    name, colon, kind_name = key.rpartition(":")
    if colon and name:
        try:
            kind = HeaderKind.from_json_name(kind_name)
        except InvalidArgument:
            kind = None
        if kind is not None:
            try:
                return name, HeaderValue.from_text(kind, value)
            except (InvalidArgument, ValueError) as exc:
                why = getattr(exc, "message", None) or str(exc)
                raise UsageError(f"--header {text!r}: header {name!r} is not a valid {kind_name}: {why}") from None
    return key, HeaderValue.string(value)


def _batches(payloads: Sequence[bytes]) -> Iterator[Sequence[bytes]]:
    """Consecutive slices of at most PRODUCE_BATCH messages and about PRODUCE_BATCH_BYTES."""
    start = 0
    while start < len(payloads):
        end, size = start, 0
        while end < len(payloads) and end - start < PRODUCE_BATCH and (end == start or size + len(payloads[end])
                                                                           <= PRODUCE_BATCH_BYTES):
            size += len(payloads[end])
            end += 1
        yield payloads[start:end]
        start = end


def progress(total: int | None, unit: str, desc: str):
    """A tqdm bar on stderr, shown only on a terminal and only for long operations;
    a no-op object otherwise (update/close do nothing)."""
    if not sys.stderr.isatty():
        return _NoProgress()
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, delay=PROGRESS_DELAY_S, leave=False,
                dynamic_ncols=True)


class _NoProgress:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _offsets_line(pid: int | None, first: int | None, last: int | None, count: int) -> str:
    where = "partition=(server's choice)" if pid is None else f"partition={pid}"
    if first is None or last is None:
        return f"{where} sent={count}"
    return f"{where} offset={last}" if first == last else f"{where} offsets={first}..{last}"


def produce(cfg: Config, address: str, message: str, *, headers: Sequence[str], key: str | None,
            partition: int | None, lines: bool, stdin: IO[bytes], out: IO[str], server: Target | None = None) -> None:
    """Append one message, stdin as one message, or (``lines``) each stdin line.

    Large inputs go in batches (PRODUCE_BATCH); each prints nothing until all
    are durable, then one ``partition=P offset(s)=...`` line per partition used
    (a balanced topic may spread batches over partitions)."""
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
    key_bytes = key.encode("utf-8") if key is not None else None
    spans: dict[int | None, list] = {}  # partition -> [first offset, last offset, count], in first-use order

    def note(pid: int | None, base: int | None, count: int) -> None:
        span = spans.setdefault(pid, [base, None, 0])
        span[1] = None if base is None else base + count - 1
        span[2] += count

    bar = progress(len(payloads), "msg", "produce") if len(payloads) > 1 else _NoProgress()
    try:
        with open_broker(cfg, server=server) as broker:
            for batch in _batches(payloads):
                if isinstance(broker, RemoteBroker):  # answers once durable, with the base offset
                    sent = broker.append(stream, topic, batch, hdrs, partition=partition, key=key_bytes)
                    note(sent.partition_id, sent.base_offset, sent.count)
                else:
                    from core.log import AppendInput

                    items = [AppendInput(payload=p, headers=block) for p in batch]
                    result = broker.append(stream, topic, items, partition=partition, key=key_bytes)
                    note(result.partition_id, result.base_offset, result.count)
                bar.update(len(batch))
            if not isinstance(broker, RemoteBroker):
                broker.flush()  # durable before we say so
    finally:
        bar.close()
    for pid, (first, last, count) in spans.items():
        out.write(_offsets_line(pid, first, last, count) + "\n")


# -- tail --------------------------------------------------------------------
def start_offset(first: int, next_: int, spec: str) -> int:
    """Where ``--from first|last|N`` starts in a partition holding ``first..next_-1``."""
    if spec == "first":
        return first
    if spec == "last":
        return max(next_ - 1, first)
    if spec.isdigit():
        return max(int(spec), first)
    raise UsageError(f"--from {spec!r}: expected first, last or an offset")


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


class _Budget:
    """How many messages a tail may still print (``--count``); None = no limit."""

    def __init__(self, count: int | None) -> None:
        self.left = count

    @property
    def spent(self) -> bool:
        return self.left is not None and self.left <= 0

    def take(self, n: int) -> int:
        if self.left is None:
            return n
        n = min(n, self.left)
        self.left -= n
        return n


def _drain(broker: Broker, stream, topic, cursors: dict[int, int], spec: str, partition: int | None,
           as_json: bool, out: IO[str], budget: _Budget | None = None, bar=None) -> None:
    """Print every record from each partition's cursor to its end (or until the
    budget is spent), advancing the cursors."""
    budget = budget or _Budget(None)
    info = broker.get_topic(stream, topic)
    pids = [partition] if partition is not None else range(info.partitions_count)
    parts = {pid: broker.partition(info.stream_id, info.id, pid) for pid in pids}
    for pid, part in parts.items():
        if cursors.get(pid) is None:
            cursors[pid] = start_offset(part.first_offset, part.next_offset, spec)
    if bar is not None:  # known only now: what this drain will read, within the budget
        pending = sum(max(p.next_offset - cursors[pid], 0) for pid, p in parts.items())
        bar.total = (bar.n + pending) if budget.left is None else bar.n + min(pending, budget.left)
        bar.refresh()
    for pid, part in parts.items():
        offset = cursors[pid]
        while offset < part.next_offset and not budget.spent:
            want = min(TAIL_BATCH, budget.left) if budget.left is not None else TAIL_BATCH
            msgs = broker.read_messages(info.stream_id, info.id, pid, offset, want)
            if not msgs:
                break
            msgs = msgs[: budget.take(len(msgs))]
            out.write("".join(format_message(pid, msg, as_json) + "\n" for msg in msgs))
            if bar is not None:
                bar.update(len(msgs))
            offset = msgs[-1].offset + 1
        cursors[pid] = offset
    out.flush()


def tail(cfg: Config, address: str, *, spec: str, partition: int | None, follow: bool, as_json: bool,
         interval: float = DEFAULT_FOLLOW_INTERVAL_S, out: IO[str], sleep=time.sleep,
         rounds: int | None = None, count: int | None = None, server: Target | None = None) -> None:
    """Print a topic's messages; with ``follow``, keep polling for new ones;
    with ``count``, stop after that many.

    Against a server one connection serves every round. Locally, following
    re-opens the data directory each round (so ``ferry produce --local`` can
    take it in between) and waits quietly while another process holds it.
    ``rounds`` bounds the follow loop (tests); ``None`` runs until interrupted.
    A non-follow tail shows a progress bar on a terminal (stderr) when it runs long."""
    stream, topic = split_address(address)
    start_offset(0, 0, spec)  # reject a bad --from before touching the disk
    if count is not None and count < 1:
        raise UsageError(f"--count {count}: expected a positive number of messages")
    cursors: dict[int, int] = {}
    budget = _Budget(count)
    bar = None if follow else progress(None, "msg", "tail")
    try:
        with open_broker(cfg, must_exist=True, server=server) as broker:
            _drain(broker, stream, topic, cursors, spec, partition, as_json, out, budget,
                   None if isinstance(bar, _NoProgress) else bar)
            if isinstance(broker, RemoteBroker):
                while follow and not budget.spent and (rounds is None or rounds > 0):
                    rounds = None if rounds is None else rounds - 1
                    sleep(interval)
                    _drain(broker, stream, topic, cursors, "first", partition, as_json, out, budget)
                return
    finally:
        if bar is not None:
            bar.close()
    warned = False
    while follow and not budget.spent and (rounds is None or rounds > 0):
        rounds = None if rounds is None else rounds - 1
        sleep(interval)
        try:
            with open_broker(cfg, must_exist=True, server=server) as broker:
                _drain(broker, stream, topic, cursors, "first", partition, as_json, out, budget)
        except DirInUse as err:
            if not warned:
                print(f"ferry tail: waiting: {err}", file=sys.stderr)
                warned = True


print_table = _print_table


__all__ = [
    "AdminError",
    "DirInUse",
    "format_message",
    "open_broker",
    "parse_header",
    "print_table",
    "produce",
    "progress",
    "remote_session",
    "stream_create",
    "stream_delete",
    "stream_list",
    "tail",
    "topic_create",
    "topic_delete",
    "topic_list",
]
