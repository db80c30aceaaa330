"""The poller's control connection to one broker: one request at a time, its bytes counted.

Invariant: a response is matched to its request by correlation id (a mismatch is a
:class:`PollError`); one of 256 KiB and more comes off the socket a buffer at a time
into an anonymous mapping, never copied whole on the event loop. Every frame sent and
received is counted (``count``: api key, ``"sent"`` or ``"received"``, bytes): what the
proxy's own requests cost the cluster's network.
"""

from __future__ import annotations

import asyncio
import mmap
import struct
from collections.abc import Callable
from typing import Any

from protocol.describe_configs import CLIENT_ID
from protocol.primitives import Buffer

LARGE_RESPONSE = 256 * 1024  # read a buffer at a time from here on
_I32 = struct.Struct(">i")


class PollError(Exception):
    pass


ByteCount = Callable[[int, str, int], None]  # (api key, "sent" | "received", bytes)


def no_count(api_key: int, direction: str, size: int) -> None:
    pass


class ControlConn:
    """One request/response connection (no pipelining needed here)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 count: ByteCount = no_count) -> None:
        self.reader = reader
        self.writer = writer
        self._count = count
        self.corr = 0
        self.versions: dict[int, tuple[int, int]] = {}
        self.expires_at = float("inf")  # the SASL session's end (KIP-368), if it has one
        self.lock = asyncio.Lock()  # one exchange at a time: the poller and ``call_broker``

    def next_correlation_id(self) -> int:
        self.corr += 1
        return self.corr

    async def call(self, request: Any, timeout: float) -> Buffer:
        corr = self.next_correlation_id()
        request.with_header(correlation_id=corr, client_id=CLIENT_ID)
        return await self.exchange(bytes(request.encode(header=True, framed=True)), corr,
                                   timeout)

    async def exchange(self, frame: bytes, corr: int, timeout: float) -> Buffer:
        """Send a request frame; return the response frame (size prefix included)."""
        async with self.lock:
            return await self._exchange(frame, corr, timeout)

    async def _exchange(self, frame: bytes, corr: int, timeout: float) -> Buffer:
        self.writer.write(frame)
        api_key = int.from_bytes(frame[4:6], "big")
        self._count(api_key, "sent", len(frame))
        async with asyncio.timeout(timeout):
            head = await self.reader.readexactly(4)
            size = _I32.unpack(head)[0]
            if size < 4:
                raise PollError(f"response frame of {size} bytes")
            if size < LARGE_RESPONSE:
                out: Buffer = head + await self.reader.readexactly(size)
            else:
                out = await self._read_large(head, 4 + size)
        self._count(api_key, "received", len(out))
        got = _I32.unpack_from(out, 4)[0]
        if got != corr:
            raise PollError(f"correlation id {got} != {corr}")
        return out

    async def _read_large(self, head: bytes, size: int) -> memoryview:
        # A buffer at a time into an anonymous mapping: no single step on the loop
        # copies more than one socket read (readexactly and a growing bytearray copy
        # the whole 15 MB, several ms at once), and the mapping's pages start zeroed
        # without a memset. Unmapped (GIL released) when the last view of it goes.
        buf = mmap.mmap(-1, size)
        buf[:4] = head
        pos = 4
        while pos < size:
            chunk = await self.reader.read(size - pos)
            if not chunk:
                raise ConnectionResetError(f"connection closed after {pos} of {size} bytes")
            buf[pos:pos + len(chunk)] = chunk
            pos += len(chunk)
        return memoryview(buf)

    def close(self) -> None:
        self.writer.close()
