"""Named limits of the HTTP adapter, each with its reason (STYLE.md section 2)."""

from __future__ import annotations

from dataclasses import dataclass

# Iggy's HTTP body limit is 2 MB (iggy.md section 8); a bigger body gets 413.
MAX_BODY_BYTES = 2 * 1000 * 1000
# h11's default max_incomplete_event_size is 16 KiB and nginx's
# large_client_header_buffers total 32 KiB; 16 KiB of request head is plenty
# for bearer tokens and never lets a client park megabytes of headers.
MAX_HEADER_BYTES = 16 * 1024
# RFC 9113 section 6.5.2 recommends at least 100 concurrent streams; each one
# may hold a buffered body, so streams x body bounds a connection's memory.
MAX_CONCURRENT_STREAMS = 100
# Bytes read from the socket per receive_some (trio's own default chunk is 64 KiB).
RECV_CHUNK = 64 * 1024
# A keep-alive connection with no request in flight is closed after this long
# (nginx keepalive_timeout defaults to 75 s; hypercorn uses 5 s; a long poll
# is "in flight", so this only ever cuts truly idle sockets).
IDLE_TIMEOUT_S = 60.0
# A request head and body must arrive within this long of its first byte
# (slowloris guard; nginx client_header_timeout/client_body_timeout are 60 s).
REQUEST_TIMEOUT_S = 60.0
# Long-poll: the most a `wait_ms=` poll may park. Proxies cut idle upstream
# reads at 60 s by default (nginx proxy_read_timeout), so stay below that.
MAX_WAIT_MS = 55_000
# Most messages one poll may return (Iggy bounds nothing; one JSON response
# of 10 000 messages is already several MB of base64).
MAX_POLL_COUNT = 10_000
# Stored bytes one poll may read before JSON encoding (base64 adds a third).
MAX_POLL_BYTES = 8 * 1024 * 1024
# Messages in one send request (the body limit bounds it anyway; this keeps a
# body of tiny messages from turning into a huge batch of Python objects).
MAX_SEND_COUNT = 100_000


# Open connections per HTTP listener; past it new ones are closed at once.
# Each costs a task and two small buffers, so 10 000 is far below memory
# trouble yet far above what one gateway serves in practice.
MAX_CONNECTIONS = 10_000


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_body_bytes: int = MAX_BODY_BYTES
    max_header_bytes: int = MAX_HEADER_BYTES
    max_concurrent_streams: int = MAX_CONCURRENT_STREAMS
    idle_timeout_s: float = IDLE_TIMEOUT_S
    request_timeout_s: float = REQUEST_TIMEOUT_S
    max_wait_ms: int = MAX_WAIT_MS
    max_connections: int = MAX_CONNECTIONS


__all__ = [
    "HttpLimits",
    "IDLE_TIMEOUT_S",
    "MAX_BODY_BYTES",
    "MAX_CONCURRENT_STREAMS",
    "MAX_CONNECTIONS",
    "MAX_HEADER_BYTES",
    "MAX_POLL_BYTES",
    "MAX_POLL_COUNT",
    "MAX_SEND_COUNT",
    "MAX_WAIT_MS",
    "RECV_CHUNK",
    "REQUEST_TIMEOUT_S",
]
