"""Kafka framing and headers, sans-I/O: bytes in, frames and decoded requests out; responses to bytes.

Theory of operation
-------------------
On a Kafka connection every message is a *frame*: an int32 size, then that
many bytes. :class:`FrameSplitter` takes bytes as they arrive, in any
pieces, and hands back each whole frame's payload (the bytes after the
size). A negative size, or one above its limit (:data:`MAX_FRAME_SIZE`), is
refused as soon as the four size bytes are in, before any payload is
buffered.

A request payload is a request header, then the body:

* header v1: ``api_key int16, api_version int16, correlation_id int32,
  client_id`` (an int16-length nullable string); header v2 adds a tagged-field
  section after it. The client id keeps its int16 length in v2 too;
* an API's flexible versions use header v2, the others v1
  (:func:`request_header_version`);
* the body is the API's request message in that version
  (:mod:`adapters.kafka.messages`); bytes after it are ignored, as Kafka's
  broker ignores them (a response, the client side, must end exactly).

A response payload is ``correlation_id int32`` (header v0), plus a
tagged-field section in header v1 (flexible versions), then the body. The
exception: ApiVersions responses use header v0 in every version, flexible
ones too, since a client reads the answer before it knows what the broker
supports (:func:`response_header_version`; kafka.md section 3, a trap other
brokers fell into).

:func:`decode_request` reads the first eight bytes before anything else, so
a request Ferry cannot serve is reported with its correlation id: an unknown
API key raises :class:`UnknownApiKey`, a version outside Ferry's range
:class:`UnsupportedVersion` (both :class:`UnsupportedRequest`, a
:class:`~adapters.kafka.types.KafkaDecodeError`). Kafka answers one of them:
an ApiVersions request of a version it does not serve gets an ApiVersions v0
response with error 35 (UNSUPPORTED_VERSION) and the supported ranges, so
the client can retry with a version both sides know
(:meth:`UnsupportedRequest.reply`); for every other case it closes the
connection. Any other malformed request is a plain ``KafkaDecodeError``.
"""

from __future__ import annotations

import struct

from .errors import ErrorCode
from .messages import API, api_versions
from .table import Api, F, KafkaStruct
from .types import INT16, INT32, NULLABLE_STRING, KafkaDecodeError

SIZE = struct.Struct(">i")  # the frame's size prefix
_PEEK = struct.Struct(">hhi")  # api_key, api_version, correlation_id: the start of every request header
# Kafka's default socket.request.max.bytes: a broker refuses a larger request, and a client
# never sends one, so a larger size prefix is garbage or an attack, not a frame to buffer.
MAX_FRAME_SIZE = 100 * 1024 * 1024
API_VERSIONS_KEY = 18

# Request header v1-v2 (v0, without the client id, only ever served ControlledShutdown v0).
REQUEST_HEADER = KafkaStruct("RequestHeader", (
    F("RequestApiKey", INT16),
    F("RequestApiVersion", INT16),
    F("CorrelationId", INT32),
    # Never compact, not even in header v2 (the spec says flexibleVersions "none" for it).
    F("ClientId", NULLABLE_STRING, "1+", nullable="1+", default=""),
), versions="1-2", flexible="2+")
RESPONSE_HEADER = KafkaStruct("ResponseHeader", (F("CorrelationId", INT32),), versions="0-1", flexible="1+")
RequestHeader = REQUEST_HEADER.cls
ResponseHeader = RESPONSE_HEADER.cls


class UnsupportedRequest(KafkaDecodeError):
    """A well-framed request Ferry does not serve: its key, version and correlation id."""

    def __init__(self, reason: str, correlation_id: int, api_key: int, api_version: int) -> None:
        super().__init__(reason)
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version

    def reply(self) -> bytes | None:
        """The frame Kafka answers with, or ``None`` when it closes the connection instead
        (module docstring): only an ApiVersions request of an unserved version is answered."""
        if self.api_key == API_VERSIONS_KEY:
            return unsupported_version_response(self.correlation_id)
        return None


class UnknownApiKey(UnsupportedRequest):
    """The API key is not one Ferry serves (not in :data:`adapters.kafka.messages.API`)."""


class UnsupportedVersion(UnsupportedRequest):
    """The API is served, but not in this version."""


class FrameSplitter:
    """Splits a byte stream into frame payloads (module docstring). After it raises, the
    stream is out of step: close the connection."""

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet whole."""
        return len(self._buf)

    def feed(self, data) -> list[bytes]:
        """Take ``data`` (any bytes-like piece of the stream); return the payloads of the
        frames it completes, in order. Raises ``KafkaDecodeError`` on a bad size prefix."""
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        while len(buf) - pos >= SIZE.size:
            (size,) = SIZE.unpack_from(buf, pos)
            if size < 0:
                raise KafkaDecodeError(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise KafkaDecodeError(f"frame size {size} exceeds {self.max_frame_size}")
            start = pos + SIZE.size
            if len(buf) - start < size:
                break
            with memoryview(buf) as view:  # one copy (a bytearray slice would be a second)
                frames.append(bytes(view[start : start + size]))
            pos = start + size
        if pos:
            del buf[:pos]
        return frames


def request_header_version(api: Api, version: int) -> int:
    return 2 if api.flexible(version) else 1


def response_header_version(api: Api, version: int) -> int:
    if api.key == API_VERSIONS_KEY:
        return 0  # always, even in flexible versions (module docstring)
    return 1 if api.flexible(version) else 0


def _served(api_key: int, api_version: int, correlation_id: int) -> Api:
    api = API.get(api_key)
    if api is None:
        raise UnknownApiKey(f"unknown API key {api_key}", correlation_id, api_key, api_version)
    if api_version not in api.versions:
        raise UnsupportedVersion(f"{api.name} v{api_version} is not served (v{api.min}-{api.max})",
                                 correlation_id, api_key, api_version)
    return api


def decode_request(frame) -> tuple:
    """A request frame's payload -> ``(header, body)``: the :data:`RequestHeader` value and
    the request message's dataclass value. Raises :class:`UnknownApiKey`,
    :class:`UnsupportedVersion` or ``KafkaDecodeError`` (module docstring)."""
    if len(frame) < _PEEK.size:
        raise KafkaDecodeError(f"request header cut short: {len(frame)} bytes")
    api_key, api_version, correlation_id = _PEEK.unpack_from(frame)
    api = _served(api_key, api_version, correlation_id)
    header, pos = REQUEST_HEADER.decode(request_header_version(api, api_version), frame, 0, exact=False)
    # Bytes after the body are ignored, as Kafka's broker ignores them
    # (AbstractRequest.parseRequest reads the body and never checks what remains):
    # librdkafka 2.16's Metadata v12 carries three more bytes than the spec's layout.
    return header, api.request.decode(api_version, frame, pos, exact=False)[0]


def encode_response(api_key: int, version: int, correlation_id: int, value) -> bytes:
    """The whole response frame (size prefix, header, body) for the request with this key,
    version and correlation id; ``value`` is the response message's dataclass value."""
    api = API[api_key]
    if not isinstance(value, api.response.cls):
        raise TypeError(f"{api.name} v{version} response expects {api.response.cls.__name__}, got {value!r}")
    out: list[bytes] = [b""]  # the size prefix, filled in below
    RESPONSE_HEADER.write(response_header_version(api, version), out, ResponseHeader(correlation_id=correlation_id))
    api.response.write(version, out, value)
    out[0] = SIZE.pack(sum(len(b) for b in out))
    return b"".join(out)


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, value) -> bytes:
    """The whole request frame a client sends (tests, and any peer Ferry talks Kafka to)."""
    api = _served(api_key, version, correlation_id)
    if not isinstance(value, api.request.cls):
        raise TypeError(f"{api.name} v{version} request expects {api.request.cls.__name__}, got {value!r}")
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                           client_id=client_id)
    out: list[bytes] = [b""]
    REQUEST_HEADER.write(request_header_version(api, version), out, header)
    api.request.write(version, out, value)
    out[0] = SIZE.pack(sum(len(b) for b in out))
    return b"".join(out)


def decode_response(api_key: int, version: int, frame) -> tuple[int, object]:
    """A response frame's payload -> ``(correlation_id, body)`` (the client side)."""
    api = API[api_key]
    header, pos = RESPONSE_HEADER.decode(response_header_version(api, version), frame, 0, exact=False)
    return header.correlation_id, api.response.decode(version, frame, pos)


def unsupported_version_response(correlation_id: int) -> bytes:
    """ApiVersions' answer to a version Ferry does not serve: v0, UNSUPPORTED_VERSION, the ranges."""
    body = api_versions(error_code=int(ErrorCode.UNSUPPORTED_VERSION))
    return encode_response(API_VERSIONS_KEY, 0, correlation_id, body)


__all__ = [
    "API_VERSIONS_KEY", "FrameSplitter", "MAX_FRAME_SIZE", "REQUEST_HEADER", "RESPONSE_HEADER", "RequestHeader",
    "ResponseHeader", "SIZE", "UnknownApiKey", "UnsupportedRequest", "UnsupportedVersion", "decode_request",
    "decode_response", "encode_request", "encode_response", "request_header_version", "response_header_version",
    "unsupported_version_response",
]
