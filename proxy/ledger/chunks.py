"""Encoded ledger rows in reusable buffers: filled on the event loop, written by the writer.

The C encoder writes each request's rows straight into the open chunk (a
bytearray of ``CHUNK_BYTES``); a chunk is sealed, handed to the writer thread,
when it is full, when its first row is ``seal_after`` seconds old (checked as
rows arrive, and by a timer on the running event loop so an idle proxy's last
rows are not held), or when the owner asks (:meth:`RowChunks.seal`). Written
chunks come back to a small pool. A fresh bytes object per request instead,
freed on the other thread in batches, made the allocator return memory to the
system and fault it back in: a measurable share of the ledger's cost.

With a ``sink`` (``proxy.ledger._ledger_native.Sink``), the open chunk is also
published as ``sink.chunk`` while adds may bypass :meth:`RowChunks.add`: the C
completion path then adds a usual entry's line to it directly, and leaves
everything else (a full or old chunk, a declined entry) to ``add``.

Invariants: the open chunk is touched by the thread that adds rows only (the
event loop); a sealed chunk belongs to the writer until it calls
:meth:`RowChunks.release`, and is never ``sink.chunk``; the bytes of a chunk
past ``end`` mean nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

CHUNK_BYTES = 1 << 20
_POOLED_CHUNKS = 8

Encode = Callable[[Any, bytearray, int], "int | None"]
"""Write an entry's rows into the buffer from the offset: the new end, -1 when they do not
fit, or None when the encoder declines (nothing is added)."""


class PyChunk:
    """A chunk's fields; ``proxy.ledger._ledger_native.Chunk`` has the same, in
    C, where it was built (the C completion path updates ``end`` and ``rows`` in place)."""

    __slots__ = ("buf", "end", "rows", "opened")

    def __init__(self, buf: bytearray, opened: float) -> None:
        self.buf = buf
        self.end = 0
        self.rows = 0
        self.opened = opened


if TYPE_CHECKING:
    Chunk = PyChunk
else:
    try:
        from proxy.ledger._ledger_native import Chunk
    except ImportError:
        Chunk = PyChunk


class RowChunks:
    """The open chunk and the pool; ``sealed`` receives each sealed chunk (the queue)."""

    def __init__(self, encode: Encode, sealed: Callable[[Chunk], None], seal_after: float,
                 clock: Callable[[], float], chunk_bytes: int = CHUNK_BYTES,
                 sink: Any = None) -> None:
        self._encode = encode
        self._sink = sink
        self._sealed = sealed
        self._seal_after = seal_after
        self._clock = clock
        self._chunk_bytes = chunk_bytes
        self._pool: list[bytearray] = []
        self._open: Chunk | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._without_loop = False  # added to outside any loop: sealed by age or by hand

    def add(self, entry: Any, rows: int) -> int | None:
        """Encode the entry's ``rows`` rows into the open chunk; the bytes added, or None
        if the encoder declined."""
        encode = self._encode
        timer = self._timer
        if timer is not None and self._timer_loop is not None and self._timer_loop.is_closed():
            timer = self._timer = None  # armed on a loop that is gone: it will not fire
        chunk = self._open
        if chunk is None:
            chunk = self._open = self._new_chunk()
        elif timer is None and self._clock() - chunk.opened >= self._seal_after:
            if chunk.rows:  # (with a timer, the timer seals by age)
                self.seal()
                chunk = self._open = self._new_chunk()
            else:
                chunk.opened = self._clock()
        start = chunk.end
        end = encode(entry, chunk.buf, start)
        if end == -1 and chunk.rows:  # full: seal it, and start the next chunk with these rows
            self.seal()
            chunk = self._open = self._new_chunk()
            start = 0
            end = encode(entry, chunk.buf, 0)
        while end == -1:  # larger than a whole chunk: a buffer of its own (not pooled)
            self._pool_buffer(chunk.buf)
            chunk.buf = bytearray(len(chunk.buf) * 4)
            end = encode(entry, chunk.buf, 0)
        if end is None:
            self._publish()
            return None
        chunk.end = end
        chunk.rows += rows
        if timer is None and not self._without_loop:
            self._arm()
        self._publish()
        return end - start

    def seal(self) -> None:
        """Hand the open chunk to the writer, if it holds rows (the adding thread only)."""
        chunk = self._open
        if chunk is not None and chunk.rows:
            self._open = None
            self._publish()
            self._sealed(chunk)

    def release(self, chunk: Chunk) -> None:
        """A written chunk's buffer, back to the pool (the writer thread)."""
        self._pool_buffer(chunk.buf)

    def _publish(self) -> None:
        """The open chunk to the sink, while a timer (or, without a loop, the adds
        themselves) will seal it by age."""
        if self._sink is not None:
            self._sink.chunk = (self._open if self._timer is not None or self._without_loop
                                else None)

    def _pool_buffer(self, buf: bytearray) -> None:
        if len(buf) == self._chunk_bytes and len(self._pool) < _POOLED_CHUNKS:
            self._pool.append(buf)  # list.append and pop are atomic

    def _new_chunk(self) -> Chunk:
        buf = self._pool.pop() if self._pool else bytearray(self._chunk_bytes)
        return Chunk(buf, self._clock())

    def _arm(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (tests, benchmarks): sealed by age or by hand
            self._without_loop = True
            return
        self._timer_loop = loop
        self._timer = loop.call_later(self._seal_after, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.seal()
        self._publish()  # (an empty chunk stays open, but has no timer now)
