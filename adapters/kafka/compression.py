"""The compression codecs of Kafka record batches (the low three bits of a batch's
``attributes``), bounded against decompression bombs.

gzip (stdlib zlib), snappy (``cramjam``; read raw or in the xerial framing the Java
client writes, written xerial), lz4 (``lz4.frame``, written as the Java client does:
64 KiB independent blocks, no checksums beyond the header's) and zstd (``zstandard``).
The codec libraries are imported on first use, so a missing one refuses only its own
batches (UNSUPPORTED_COMPRESSION_TYPE). Decompression stops past a limit
(:data:`MAX_DECOMPRESSED_BYTES` by default) and anything that does not decompress is
CORRUPT_MESSAGE, as adapters/kafka/records.py documents for the whole batch.

Nothing here does I/O or keeps time.
"""

from __future__ import annotations

import importlib
import struct
import zlib

from .errors import ErrorCode, RecordBatchError

COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = range(5)
COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

# Decompression bomb guard. A batch is at most a frame (adapters/kafka/frames.py's
# MAX_FRAME_SIZE, 100 MiB) on the wire, but a few KiB of zstd or gzip can claim gigabytes.
# Real producers stay far below this: the Java producer checks each record against
# max.request.size (1 MiB by default) *before* compression and closes a batch at
# batch.size (16 KiB). The limit sits above the frame limit so a batch that would be
# accepted uncompressed is never refused only because it was compressed.
MAX_DECOMPRESSED_BYTES = 128 * 1024 * 1024

# Xerial snappy framing (snappy-java's SnappyOutputStream, what the Java client writes):
# 8 magic bytes, int32 version 1, int32 minimum compatible version 1, then blocks of
# [int32 compressed length][raw snappy block], each block at most 32 KiB uncompressed.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")

# Levels Kafka's Java client uses by default (gzip: Deflater's default 6; zstd: 3).
_GZIP_LEVEL = 6
_ZSTD_LEVEL = 3
# The smallest slice of zstd input fed at once (see _unzstd): at 32768 output bytes per
# input byte, 64 bytes can overshoot the limit by 2 MiB at most before the bomb is refused.
_ZSTD_MIN_STEP = 64


def _corrupt(message: str) -> RecordBatchError:
    return RecordBatchError(ErrorCode.CORRUPT_MESSAGE, message)


def _uvarint_prefix(block: bytes) -> int:
    """The unsigned LEB128 varint (at most 32 bits) a raw snappy block starts with."""
    result = shift = 0
    for b in block[:5]:
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> 32:
                break
            return result
        shift += 7
    raise _corrupt("snappy block has no valid length preamble")


def _codec_module(name: str, compression: int):
    """The codec's library, imported on first use; a missing one refuses the batch."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise RecordBatchError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"{COMPRESSION_NAMES[compression]} needs the Python package {name.split('.')[0]!r}, "
            "which is not installed") from None


def _too_big(limit: int) -> RecordBatchError:
    return _corrupt(f"records decompress to more than {limit} bytes")


def _gunzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    # Several gzip members back to back read as one stream (Java's GZIPInputStream does).
    try:
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += d.decompress(data, limit + 1 - len(out))
            if len(out) > limit:
                raise _too_big(limit)
            if not d.eof:
                raise _corrupt("gzip data ends early")
            data = d.unused_data
    except zlib.error as exc:
        raise _corrupt(f"gzip data does not decompress: {exc}") from None
    return bytes(out)


def _snappy_raw_length(block: bytes) -> int:
    # A raw snappy block starts with its uncompressed length as an unsigned varint: read it
    # ourselves so a bomb is refused before anything is allocated.
    return _uvarint_prefix(block)


def _unsnappy(payload: bytes, limit: int) -> bytes:
    snappy = _codec_module("cramjam", COMPRESSION_SNAPPY).snappy
    try:
        if not payload.startswith(_XERIAL_MAGIC):
            if _snappy_raw_length(payload) > limit:
                raise _too_big(limit)
            return bytes(snappy.decompress_raw(payload))
        if len(payload) < len(_XERIAL_HEADER):
            raise _corrupt("xerial snappy header is cut short")
        # The version fields are not checked: there has only ever been one block layout,
        # and some writers put them in the wrong byte order (kafka-python issue 2414).
        out = []
        total = 0
        pos = len(_XERIAL_HEADER)
        while pos < len(payload):
            if pos + 4 > len(payload):
                raise _corrupt("xerial snappy block length is cut short")
            (n,) = _INT32.unpack_from(payload, pos)
            pos += 4
            if n < 0 or pos + n > len(payload):
                raise _corrupt(f"xerial snappy block of {n} bytes does not fit")
            block = payload[pos:pos + n]
            pos += n
            total += _snappy_raw_length(block)
            if total > limit:
                raise _too_big(limit)
            out.append(bytes(snappy.decompress_raw(block)))
        return b"".join(out)
    except RecordBatchError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise _corrupt(f"snappy data does not decompress: {exc}") from None


def _unlz4(data: bytes, limit: int) -> bytes:
    frame = _codec_module("lz4.frame", COMPRESSION_LZ4)
    out = bytearray()
    try:
        while data:
            d = frame.LZ4FrameDecompressor()
            out += d.decompress(data, max_length=limit + 1 - len(out))
            if len(out) > limit:
                raise _too_big(limit)
            if not d.eof:
                raise _corrupt("lz4 frame ends early")
            data = d.unused_data
    except RecordBatchError:
        raise
    except RuntimeError as exc:  # lz4.frame's error for a malformed frame
        raise _corrupt(f"lz4 data does not decompress: {exc}") from None
    return bytes(out)


def _unzstd(data: bytes, limit: int) -> bytes:
    zstd = _codec_module("zstandard", COMPRESSION_ZSTD)
    dctx = zstd.ZstdDecompressor()
    out = bytearray()
    try:
        # zstd-jni (the Java client) writes frames without a content size, and neither
        # decompress() nor a decompressobj() call bounds its output; a stream reader does,
        # but takes a cut-short frame for a finished one. So feed a decompressobj slices
        # small enough that one slice cannot overshoot the limit by much: a zstd block
        # yields at most 128 KiB from 4 bytes (an RLE block), 32768 bytes per input byte.
        while data:  # frame after frame, as Java's ZstdInputStream reads them
            d = dctx.decompressobj()
            pos = 0
            while not d.eof:
                if pos >= len(data):
                    raise _corrupt("zstd frame ends early")
                step = max(_ZSTD_MIN_STEP, (limit - len(out)) >> 15)
                out += d.decompress(data[pos:pos + step])
                pos += step
                if len(out) > limit:
                    raise _too_big(limit)
            data = d.unused_data + data[pos:]
    except RecordBatchError:
        raise
    except zstd.ZstdError as exc:
        raise _corrupt(f"zstd data does not decompress: {exc}") from None
    return bytes(out)


def decompress(compression: int, payload: bytes, limit: int) -> bytes:
    if compression == COMPRESSION_GZIP:
        return _gunzip(payload, limit)
    if compression == COMPRESSION_SNAPPY:
        return _unsnappy(payload, limit)
    if compression == COMPRESSION_LZ4:
        return _unlz4(payload, limit)
    return _unzstd(payload, limit)


def compress(compression: int, data: bytes) -> bytes:
    if compression == COMPRESSION_GZIP:
        # zlib's gzip wrapper writes mtime 0: the output is a function of the input alone.
        d = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return d.compress(data) + d.flush()
    if compression == COMPRESSION_SNAPPY:
        snappy = _codec_module("cramjam", compression).snappy
        blocks = [_XERIAL_HEADER]
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(snappy.compress_raw(data[i:i + _XERIAL_BLOCK]))
            blocks.append(_INT32.pack(len(block)))
            blocks.append(block)
        return b"".join(blocks)
    if compression == COMPRESSION_LZ4:
        frame = _codec_module("lz4.frame", compression)
        # As Kafka's Lz4BlockOutputStream writes it: 64 KiB independent blocks, no block or
        # content checksum, no content size.
        return frame.compress(data, block_size=frame.BLOCKSIZE_MAX64KB, block_linked=False,
                              content_checksum=False, block_checksum=False, store_size=False)
    if compression == COMPRESSION_ZSTD:
        zstd = _codec_module("zstandard", compression)
        return zstd.ZstdCompressor(level=_ZSTD_LEVEL).compress(data)
    raise ValueError(f"unknown compression {compression}")


__all__ = ["COMPRESSION_GZIP", "COMPRESSION_LZ4", "COMPRESSION_NAMES", "COMPRESSION_NONE", "COMPRESSION_SNAPPY",
           "COMPRESSION_ZSTD", "MAX_DECOMPRESSED_BYTES", "compress", "decompress"]
