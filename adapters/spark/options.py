"""Options of ``format("ferry")``: parsed once, into plain picklable data.

Spark hands a data source its options as a case-insensitive mapping whose keys
are stored lower-cased (spark-datasource.md section 2 and pitfall 3), so every
look-up here goes through that mapping, never a ``dict`` copy. Names follow
Spark's Kafka source where they mean the same thing (Structured Streaming +
Kafka Integration Guide: ``startingOffsets``, ``endingOffsets``,
``startingTimestamp``, ``maxOffsetsPerTrigger``, ``maxRecordsPerPartition``,
``subscribePattern``): offsets JSON is ``{"topic": {"partition": offset}}``
with ``-2`` for earliest and ``-1`` for latest, as there.

Every problem is a :class:`FerryOptionError` whose message starts with the
option's name, raised when the source is built (on the driver), so a typo
fails the query before any task runs.
"""

from __future__ import annotations

import json
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from .client import DEFAULT_POLL_COUNT, MAX_POLL_COUNT, FerryClient

DEFAULT_SERVERS = "127.0.0.1:8090"  # the gateway's default Iggy TCP listener (ARCHITECTURE.md "Ports")
EARLIEST, LATEST = -2, -1  # the Kafka source's sentinels in offsets JSON
# Max messages per Spark input partition. Large enough that a task's fixed
# cost (~0.2 s, spark-datasource.md section 8) is small next to its work,
# small enough that a 1M-message partition still spreads over two cores.
DEFAULT_MAX_RECORDS_PER_PARTITION = 250_000
MAX_TOPICS = 1_000  # a pattern matching more topics than this is almost surely a mistake

KNOWN = {
    "servers", "stream", "topic", "subscribepattern", "startingoffsets", "endingoffsets",
    "startingtimestamp", "maxoffsetspertrigger", "maxrecordsperpartition", "pollcount", "username", "password",
    "token", "failondataloss",
    "timeout",
}
# Options Spark itself adds or forwards to every source/sink (a load/save path, a
# stream's checkpoint): accepted and ignored, so only user typos are refused.
SPARK_OWN = {"path", "checkpointlocation"}


class FerryOptionError(ValueError):
    """A ``format("ferry")`` option is missing or malformed; the message names it."""


def _get(options: Mapping[str, Any], name: str) -> str | None:
    value = options.get(name)  # case-insensitive: Spark's mapping lower-cases keys
    return None if value is None else str(value)


def _int(options, name: str, default: int | None, lo: int, hi: int | None = None) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise FerryOptionError(f"{name}: expected an integer, got {raw!r}") from None
    if value < lo or (hi is not None and value > hi):
        bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise FerryOptionError(f"{name}: must be {bound}, got {value}")
    return value


def _bool(options, name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise FerryOptionError(f"{name}: expected true or false, got {raw!r}")


def parse_servers(raw: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in raw.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise FerryOptionError(f"servers: expected host:port[,host:port...], got {raw!r}")
        out.append((host.strip("[]"), int(port)))  # [::1]:8090 -> ::1
    return tuple(out)


def parse_offsets(name: str, raw: str | None, default: str) -> str | dict:
    """``"earliest"``, ``"latest"`` or ``{topic: {partition: offset}}`` (ints, -2/-1 allowed)."""
    text = (raw if raw is not None else default).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        value = json.loads(text)
    except ValueError:
        raise FerryOptionError(f"{name}: expected earliest, latest or JSON like "
                               f'{{"topic": {{"0": 42}}}}, got {text!r}') from None
    if not isinstance(value, dict):
        raise FerryOptionError(f"{name}: the JSON must be an object of topics, got {text!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            raise FerryOptionError(f"{name}: topic {topic!r} must map partition ids to offsets")
        per: dict[int, int] = {}
        for pid, off in parts.items():
            try:
                p = int(pid)
            except ValueError:
                raise FerryOptionError(f"{name}: partition id {pid!r} of topic {topic!r} is not an integer") from None
            if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST or p < 0:
                raise FerryOptionError(f"{name}: offset of {topic}/{pid} must be an integer >= -2, got {off!r}")
            per[p] = off
        out[str(topic)] = per
    return out


# Logged-in connections kept per process, per (servers, credentials). A password
# login costs the gateway an argon2 verification (measured here: ~0.25 s under
# load, against ~0.4 ms for a token), and Spark reuses its Python workers between
# tasks (spark.python.worker.reuse, on by default), as the streaming reader's
# driver process lives for the whole query. So a task or a micro-batch takes a
# connection from this pool instead of logging in again. The pool lives in the
# process, never on a pickled object; a connection that fails its ping is dropped.
MAX_IDLE_PER_KEY = 4  # a worker runs one task at a time; the planner a few calls
_idle: dict[tuple, list] = {}
_idle_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Conn:
    """How to reach the gateway; what executors need to open their own connection."""

    servers: tuple[tuple[str, int], ...]
    username: str
    password: str
    timeout: float
    token: str | None = None

    def connect(self) -> FerryClient:
        """A new logged-in client to the first server that answers (the others are fallbacks)."""
        from .client import FerryClientError

        last: FerryClientError | None = None
        for host, port in self.servers:
            try:
                return FerryClient(host, port, username=self.username, password=self.password, token=self.token,
                                   timeout=self.timeout).connect()
            except FerryClientError as exc:
                if exc.code is not None:  # the gateway answered (bad credentials...): no point trying others
                    raise
                last = exc
        raise last  # type: ignore[misc]

    @contextmanager
    def session(self) -> Iterator[FerryClient]:
        """A logged-in client from this process's pool (or a new one), returned to the
        pool afterwards unless the block raised or the connection broke."""
        from .client import FerryClientError

        key = (self.servers, self.username, self.password, self.token, self.timeout)
        client = None
        while client is None:
            with _idle_lock:
                pooled = _idle.get(key)
                client = pooled.pop() if pooled else None
            if client is None:
                client = self.connect()
                break
            try:
                client.ping()
            except FerryClientError:
                client.close()
                client = None
        ok = False
        try:
            yield client
            ok = True
        finally:
            if ok and client.connected:
                with _idle_lock:
                    pooled = _idle.setdefault(key, [])
                    if len(pooled) < MAX_IDLE_PER_KEY:
                        pooled.append(client)
                        client = None
            if client is not None:
                client.close()


@dataclass(frozen=True, slots=True)
class SourceOptions:
    conn: Conn
    stream: str
    topics: tuple[str, ...]  # explicit topics; empty when a pattern is used
    pattern: str | None
    starting: str | dict
    ending: str | dict
    starting_timestamp_ms: int | None
    max_offsets_per_trigger: int | None
    max_records_per_partition: int
    poll_count: int
    fail_on_data_loss: bool = True

    def topic_names(self, client) -> list[str]:
        """The topics this source reads, now (a pattern is re-evaluated on every call)."""
        if self.pattern is None:
            return list(self.topics)
        info = client.stream(self.stream)
        if info is None:
            raise FerryOptionError(f"stream: {self.stream!r} does not exist on the gateway")
        rx = re.compile(self.pattern)
        names = sorted(t for t in info.topics if rx.fullmatch(t))
        return names[:MAX_TOPICS]


def conn_options(options) -> Conn:
    timeout = _int(options, "timeout", 30, 1, 3600)
    token = _get(options, "token")
    if token is not None and (_get(options, "username") or _get(options, "password")):
        raise FerryOptionError("token: give either a token or username/password, not both")
    return Conn(parse_servers(_get(options, "servers") or DEFAULT_SERVERS),
                _get(options, "username") or "iggy", _get(options, "password") or "iggy", float(timeout),
                token or None)


def _check_unknown(options) -> None:
    for key in options.keys():
        if key.lower() not in KNOWN and key.lower() not in SPARK_OWN:
            raise FerryOptionError(f"{key}: unknown option for format('ferry'); known: {', '.join(sorted(KNOWN))}")


def source_options(options, *, streaming: bool) -> SourceOptions:
    """Parse the read options; raises FerryOptionError naming the bad option."""
    _check_unknown(options)
    stream = _get(options, "stream")
    if not stream:
        raise FerryOptionError("stream: required (the Ferry stream to read)")
    topic, pattern = _get(options, "topic"), _get(options, "subscribePattern")
    if bool(topic) == bool(pattern):
        raise FerryOptionError("topic: give exactly one of 'topic' (a name or a comma-separated list) "
                               "and 'subscribePattern' (a regular expression)")
    topics: tuple[str, ...] = ()
    if topic:
        topics = tuple(t.strip() for t in topic.split(",") if t.strip())
        if not topics or len(topics) != len(set(topics)):
            raise FerryOptionError(f"topic: expected distinct topic names, got {topic!r}")
    if pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise FerryOptionError(f"subscribePattern: not a regular expression: {exc}") from None
    starting = parse_offsets("startingOffsets", _get(options, "startingOffsets"),
                             "latest" if streaming else "earliest")
    if streaming and _get(options, "endingOffsets") is not None:
        raise FerryOptionError("endingOffsets: only for batch reads (a stream has no end)")
    ending = parse_offsets("endingOffsets", _get(options, "endingOffsets"), "latest")
    if ending == "earliest":
        raise FerryOptionError("endingOffsets: 'earliest' would read nothing; use latest or JSON")
    if isinstance(ending, dict) and any(o == EARLIEST for per in ending.values() for o in per.values()):
        raise FerryOptionError("endingOffsets: -2 (earliest) is not allowed as an end")
    max_trigger = _int(options, "maxOffsetsPerTrigger", None, 1)
    if max_trigger is not None and not streaming:
        raise FerryOptionError("maxOffsetsPerTrigger: only for streaming reads")
    for name, given in (("startingOffsets", starting), ("endingOffsets", ending)):
        if isinstance(given, dict) and topics and (extra := set(given) - set(topics)):
            raise FerryOptionError(f"{name}: names topics that are not read: {sorted(extra)}")
    return SourceOptions(
        conn=conn_options(options), stream=stream, topics=topics, pattern=pattern or None,
        starting=starting, ending=ending,
        starting_timestamp_ms=_int(options, "startingTimestamp", None, 0),
        max_offsets_per_trigger=max_trigger,
        max_records_per_partition=_int(options, "maxRecordsPerPartition", DEFAULT_MAX_RECORDS_PER_PARTITION, 1),
        poll_count=_int(options, "pollCount", DEFAULT_POLL_COUNT, 1, MAX_POLL_COUNT),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
    )


@dataclass(frozen=True, slots=True)
class SinkOptions:
    conn: Conn
    stream: str
    topic: str


def sink_options(options) -> SinkOptions:
    _check_unknown(options)
    stream, topic = _get(options, "stream"), _get(options, "topic")
    if not stream:
        raise FerryOptionError("stream: required (the Ferry stream to write to)")
    if not topic or "," in topic:
        raise FerryOptionError("topic: required, exactly one topic name to write to")
    for name in ("startingOffsets", "endingOffsets", "startingTimestamp", "maxOffsetsPerTrigger",
                 "subscribePattern"):
        if _get(options, name) is not None:
            raise FerryOptionError(f"{name}: only for reads")
    return SinkOptions(conn_options(options), stream, topic)


__all__ = ["Conn", "FerryOptionError", "SinkOptions", "SourceOptions", "source_options", "sink_options"]
