"""Shared checks for the response codec tests: malformed input must raise
:class:`ProtocolError` and nothing else."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest

from protocol.primitives import ProtocolError


def mapper(node_id: int, host: str, port: int) -> tuple[str, int]:
    """A deterministic mapper whose output is easy to recognise."""
    return f"proxy-{node_id}.local", 30000 + node_id % 10000


def ok_or_protocol_error(fn: Callable[[bytes], Any], data: bytes) -> None:
    try:
        fn(data)
    except ProtocolError:
        pass


def check_truncations(fn: Callable[[bytes], Any], frame: bytes, strict: bool) -> None:
    """Every proper prefix raises ProtocolError; with the size prefix fixed up
    to match, ``strict`` parsers must still raise, lenient ones may succeed."""
    for i in range(len(frame)):
        with pytest.raises(ProtocolError):
            fn(frame[:i])
        if i >= 4:
            fixed = struct.pack(">i", i - 4) + frame[4:i]
            if strict:
                with pytest.raises(ProtocolError):
                    fn(fixed)
            else:
                ok_or_protocol_error(fn, fixed)


def check_corruptions(fn: Callable[[bytes], Any], frame: bytes) -> None:
    """Every single-byte corruption of the body either parses or raises ProtocolError."""
    for i in range(4, len(frame)):
        for value in (0x00, 0x7F, 0x80, 0xFF):
            data = bytearray(frame)
            data[i] = value
            ok_or_protocol_error(fn, bytes(data))


def with_size(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body
