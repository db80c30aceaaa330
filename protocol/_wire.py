"""Private helpers shared by the response codecs (metadata, find_coordinator,
describe_cluster, api_versions): frame checks, string spans, address encoding.
The primitive readers (integers, lengths, arrays: ``read_array_len`` with one
null rule, chosen by ``nullable``) are :mod:`protocol.primitives`', for every
codec alike.

Invariant: every helper raises :class:`ProtocolError` for bad input and
nothing else; callers wrap their fast paths (which use ``struct`` directly)
with :func:`guard` so that ``struct.error``/``IndexError``/``UnicodeDecodeError``
surface as :class:`ProtocolError` too. No I/O, no asyncio.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from protocol.headers import response_body_offset
from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_string,
    pack_int32,
    read_uvarint,
)

P = ParamSpec("P")
R = TypeVar("R")

I16 = struct.Struct(">h")
_SIZE = struct.Struct(">i")


def as_view(frame: Buffer) -> memoryview:
    """A flat unsigned-byte memoryview over ``frame`` (no copy)."""
    mv = memoryview(frame)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def check_frame(frame: Buffer, api_key: int, version: int, max_version: int) -> int:
    """Validate the size prefix and the version; return the body offset."""
    if not 0 <= version <= max_version:
        raise ProtocolError(f"unsupported version {version} for api key {api_key}")
    n = len(frame)
    if n < 8:
        raise ProtocolError(f"response frame of {n} bytes is too short")
    size = _SIZE.unpack_from(frame, 0)[0]
    if size != n - 4:
        raise ProtocolError(f"size prefix {size} does not match a frame of {n} bytes")
    return response_body_offset(frame, api_key, version)


def finish_frame(parts: list[Buffer]) -> bytes:
    """Join ``parts`` (header and body, without a prefix) behind a new size prefix."""
    body = b"".join(parts)
    return pack_int32(len(body)) + body


def string_span(buf: Buffer, pos: int, compact: bool) -> tuple[int, int, int]:
    """(start, end, new pos) of a (nullable) string's payload; start = -1 for null."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        if pos + 2 > len(buf):
            raise ProtocolError(f"truncated string length at offset {pos}")
        n = I16.unpack_from(buf, pos)[0]
        pos += 2
    if n < 0:
        if n != -1:
            raise ProtocolError(f"negative string length {n} at offset {pos}")
        return -1, -1, pos
    end = pos + n
    if end > len(buf):
        raise ProtocolError(f"truncated string at offset {pos}")
    return pos, end, end


def decode_span(buf: Buffer, start: int, end: int) -> str | None:
    if start < 0:
        return None
    try:
        return str(buf[start:end], "utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"invalid UTF-8 string at offset {start}") from exc


def expect_end(buf: Buffer, pos: int) -> None:
    if pos != len(buf):
        raise ProtocolError(f"{len(buf) - pos} trailing bytes at offset {pos}")


def encode_address(host: str, port: int, compact: bool) -> bytes:
    """Host string followed by the int32 port, as the mapper returned them."""
    if not isinstance(host, str) or not isinstance(port, int) or not 0 <= port <= 0x7FFFFFFF:
        raise ValueError(f"address mapper returned an invalid address {host!r}:{port!r}")
    return encode_string(host, compact) + pack_int32(port)


def guard(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn the low-level exceptions of a fast path into :class:`ProtocolError`."""

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ProtocolError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError, OverflowError) as exc:
            raise ProtocolError(f"malformed response: {exc}") from exc

    wrapper.__name__ = fn.__name__
    wrapper.__qualname__ = fn.__qualname__
    wrapper.__doc__ = fn.__doc__
    return wrapper
