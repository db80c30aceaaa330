"""Frames and headers on the simulator's wire (a TEST DOUBLE's plumbing).

Invariant: a request frame is header + body; the request header is v1
(int16 key, int16 version, int32 correlation id, nullable int16-length client
id) plus tagged fields (v2) when the API version is flexible. A response is
int32 size + correlation id + (one empty tagged-field byte when flexible,
except ApiVersions whose response header is always v0) + body. Bodies are
encoded and decoded by kafka-python's schema-driven classes elsewhere.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

API_VERSIONS_KEY = 18
FETCH_KEY = 1
MAX_FRAME = 100 * 1024 * 1024


class FrameError(ValueError):
    """Bytes that cannot be a request: the connection is closed."""


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes) -> RequestHeader:
    """Key, version, correlation id and client id: the non-flexible part."""
    if len(frame) < 10:
        raise FrameError(f"request of {len(frame)} bytes is too short for a header")
    api_key, api_version, correlation_id, id_len = struct.unpack_from(">hhih", frame, 0)
    if id_len < -1 or 10 + max(id_len, 0) > len(frame):
        raise FrameError("bad client id length")
    client_id = None if id_len < 0 else frame[10 : 10 + id_len].decode("utf-8", "replace")
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if pos >= len(data):
            raise FrameError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise FrameError("varint too long")


def body_offset(frame: bytes, flexible: bool) -> int:
    """Where the request body starts (after tagged header fields if flexible)."""
    id_len = int(struct.unpack_from(">h", frame, 8)[0])
    pos = 10 + max(id_len, 0)
    if flexible:
        count, pos = _read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _read_uvarint(frame, pos)
            size, pos = _read_uvarint(frame, pos)
            pos += size
        if pos > len(frame):
            raise FrameError("truncated tagged fields in request header")
    return pos


def response_frame(correlation_id: int, body: bytes, flexible_header: bool) -> bytes:
    header = struct.pack(">i", correlation_id) + (b"\x00" if flexible_header else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def frame_size(prefix: bytes) -> int:
    size = int(struct.unpack(">i", prefix)[0])
    if size < 0 or size > MAX_FRAME:
        raise FrameError(f"bad frame size {size}")
    return size
