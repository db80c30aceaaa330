"""Kafka wire primitives: read from a buffer at an offset, write to bytes.

Invariant: every reader takes ``(buf, pos)`` and returns ``(value, new_pos)``;
it never copies more than the value it returns, and a buffer that ends early
raises :class:`ProtocolError` (never ``struct.error`` or ``IndexError``), so
callers have exactly one exception to handle for bad input. No I/O here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

Buffer = bytes | bytearray | memoryview

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

pack_int8 = _I8.pack
pack_int16 = _I16.pack
pack_int32 = _I32.pack
pack_int64 = _I64.pack


class ProtocolError(ValueError):
    """Bytes that do not form a valid Kafka message of the expected shape."""


def need(buf: Buffer, pos: int, n: int) -> None:
    """Raise ProtocolError unless ``n`` (>= 0) bytes are left at ``pos``."""
    if n < 0 or pos + n > len(buf):
        raise ProtocolError(f"truncated: need {n} bytes at offset {pos}, have {len(buf) - pos}")


def read_int8(buf: Buffer, pos: int) -> tuple[int, int]:
    need(buf, pos, 1)
    return _I8.unpack_from(buf, pos)[0], pos + 1


def read_int16(buf: Buffer, pos: int) -> tuple[int, int]:
    need(buf, pos, 2)
    return _I16.unpack_from(buf, pos)[0], pos + 2


def read_int32(buf: Buffer, pos: int) -> tuple[int, int]:
    need(buf, pos, 4)
    return _I32.unpack_from(buf, pos)[0], pos + 4


def read_int64(buf: Buffer, pos: int) -> tuple[int, int]:
    need(buf, pos, 8)
    return _I64.unpack_from(buf, pos)[0], pos + 8


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint (Kafka's UNSIGNED_VARINT), at most 5 bytes."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ProtocolError(f"truncated varint at offset {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ProtocolError(f"varint longer than 5 bytes at offset {pos}")


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Zig-zag signed varint (used inside record batches)."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_uuid(buf: Buffer, pos: int) -> tuple[bytes, int]:
    need(buf, pos, 16)
    return bytes(buf[pos : pos + 16]), pos + 16


def read_string(buf: Buffer, pos: int, compact: bool) -> tuple[str | None, int]:
    """STRING / NULLABLE_STRING (int16 length) or their compact forms."""
    if compact and pos < len(buf) and buf[pos] < 0x80:  # a one-byte length: the usual case
        n = buf[pos] - 1
        pos += 1
    elif compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n, pos = read_int16(buf, pos)
    if n < 0:
        return None, pos
    need(buf, pos, n)
    try:
        return str(buf[pos : pos + n], "utf-8"), pos + n  # decoded in place, not copied first
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"invalid UTF-8 string at offset {pos}") from exc


def skip_string(buf: Buffer, pos: int, compact: bool) -> int:
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n, pos = read_int16(buf, pos)
    if n > 0:
        need(buf, pos, n)
        pos += n
    return pos


def read_bytes_span(buf: Buffer, pos: int, compact: bool) -> tuple[tuple[int, int] | None, int]:
    """BYTES / RECORDS: returns the (start, end) span of the payload, not a copy."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n, pos = read_int32(buf, pos)
    if n < 0:
        return None, pos
    need(buf, pos, n)
    return (pos, pos + n), pos + n


def read_array_len(buf: Buffer, pos: int, compact: bool, nullable: bool = True
                   ) -> tuple[int, int]:
    """Array length; -1 for a null array where ``nullable`` (else a null array is an
    error). Rejects absurd lengths early."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n, pos = read_int32(buf, pos)
    if n < -1 or (n == -1 and not nullable):
        raise ProtocolError(f"{'null' if n == -1 else 'negative'} array length {n} at "
                            f"offset {pos}")
    if n > len(buf) - pos:
        # every element takes at least one byte
        raise ProtocolError(f"array length {n} exceeds remaining {len(buf) - pos} bytes")
    return n, pos


def skip_tagged_fields(buf: Buffer, pos: int) -> int:
    if pos < len(buf) and buf[pos] == 0:  # no tagged fields: the usual case
        return pos + 1
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        need(buf, pos, size)
        pos += size
    return pos


def read_tagged_fields(buf: Buffer, pos: int) -> tuple[list[tuple[int, int, int]], int]:
    """Tagged fields as ``(tag, start, end)`` spans of their payloads."""
    count, pos = read_uvarint(buf, pos)
    fields = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        need(buf, pos, size)
        fields.append((tag, pos, pos + size))
        pos += size
    return fields, pos


def encode_uvarint(n: int) -> bytes:
    if n < 0:
        raise ValueError("uvarint must be >= 0")
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_string(s: str | None, compact: bool) -> bytes:
    if s is None:
        return encode_uvarint(0) if compact else pack_int16(-1)
    raw = s.encode("utf-8")
    if compact:
        return encode_uvarint(len(raw) + 1) + raw
    return pack_int16(len(raw)) + raw


def encode_array_len(n: int | None, compact: bool) -> bytes:
    if n is None:
        return encode_uvarint(0) if compact else pack_int32(-1)
    return encode_uvarint(n + 1) if compact else pack_int32(n)


def encode_tagged_fields(fields: Iterable[tuple[int, bytes]]) -> bytes:
    """Tagged fields, which must be given in ascending tag order."""
    items = list(fields)
    out = [encode_uvarint(len(items))]
    for tag, payload in items:
        out.append(encode_uvarint(tag))
        out.append(encode_uvarint(len(payload)))
        out.append(payload)
    return b"".join(out)


EMPTY_TAGGED_FIELDS = b"\x00"
