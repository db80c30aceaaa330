"""A cursor reader and a writer for the small admin messages the proxy decodes whole
(DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, CreateTopics).

These messages are rare and small, so they are decoded into values and encoded
again rather than walked in place as Produce is. Tagged fields the proxy does not
know are kept as their raw bytes (the count included) and written back unchanged.

Invariant: every read raises :class:`~protocol.primitives.ProtocolError` for bad
input and nothing else; ``Writer`` output for a value read by ``Reader`` is the
same bytes. No I/O.
"""

from __future__ import annotations

import struct

from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_array_len,
    encode_string,
    need,
    pack_int8,
    pack_int16,
    pack_int32,
    read_array_len,
    read_int8,
    read_int16,
    read_int32,
    read_string,
    skip_tagged_fields,
)

NO_TAGS = b"\x00"
_BOOL = struct.Struct(">?")


class Reader:
    """Reads one message's fields in order; ``flexible`` selects the compact forms."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: Buffer, pos: int, flexible: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def int8(self) -> int:
        value, self.pos = read_int8(self.buf, self.pos)
        return value

    def int16(self) -> int:
        value, self.pos = read_int16(self.buf, self.pos)
        return value

    def int32(self) -> int:
        value, self.pos = read_int32(self.buf, self.pos)
        return value

    def boolean(self) -> bool:
        return self.int8() != 0

    def uuid(self) -> bytes:
        need(self.buf, self.pos, 16)
        value = bytes(self.buf[self.pos:self.pos + 16])
        self.pos += 16
        return value

    def nullable_string(self) -> str | None:
        value, self.pos = read_string(self.buf, self.pos, self.flexible)
        return value

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise ProtocolError(f"null where a string is required, before offset {self.pos}")
        return value

    def array(self, nullable: bool = False) -> int:
        """An array's length; -1 for a null array where ``nullable``."""
        n, self.pos = read_array_len(self.buf, self.pos, self.flexible, nullable)
        return n

    def tags(self) -> bytes:
        """The raw tagged-field section (empty before flexible versions)."""
        if not self.flexible:
            return b""
        start = self.pos
        self.pos = skip_tagged_fields(self.buf, start)
        return bytes(self.buf[start:self.pos])

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise ProtocolError(f"{len(self.buf) - self.pos} trailing bytes at offset {self.pos}")


class Writer:
    """Builds a message body from fields in order, the mirror of :class:`Reader`."""

    __slots__ = ("parts", "flexible")

    def __init__(self, flexible: bool) -> None:
        self.parts: list[bytes] = []
        self.flexible = flexible

    def int8(self, value: int) -> None:
        self.parts.append(pack_int8(value))

    def int16(self, value: int) -> None:
        self.parts.append(pack_int16(value))

    def int32(self, value: int) -> None:
        self.parts.append(pack_int32(value))

    def boolean(self, value: bool) -> None:
        self.parts.append(_BOOL.pack(value))

    def raw(self, data: bytes) -> None:
        self.parts.append(data)

    def string(self, value: str | None) -> None:
        self.parts.append(encode_string(value, self.flexible))

    def array(self, n: int | None) -> None:
        self.parts.append(encode_array_len(n, self.flexible))

    def tags(self, raw: bytes = NO_TAGS) -> None:
        """A tagged-field section as read (default: none); nothing before flexible versions."""
        if self.flexible:
            self.parts.append(raw or NO_TAGS)

    def body(self) -> bytes:
        return b"".join(self.parts)



def request_frame(frame: Buffer, body_offset: int, body: bytes) -> bytes:
    """A request frame with the original header bytes of ``frame`` and a new ``body``."""
    head = bytes(frame[4:body_offset])
    return pack_int32(len(head) + len(body)) + head + body
