"""Cutting a byte stream into Kafka frames (4-byte big-endian size + body).

Two ways in, one state machine:
- ``feed(data)``: hand over bytes that were already read;
- ``get_buffer()`` / ``buffer_updated(n)``: let the caller read straight into
  memory the splitter chooses (what an ``asyncio.BufferedProtocol`` does).
  While a large frame is pending, that memory is the frame's own buffer, so
  its bytes are copied once (by the kernel), never re-joined; otherwise it is
  the scratch buffer of a :class:`ReadMemory`, which all the splitters of one
  thread may share (``buffer_updated`` copies out what it needs before it
  returns).

Invariants:
- both return only complete frames, each as a read-only memoryview that
  includes the 4-byte size prefix (so a frame can be forwarded as it is),
  over memory nothing writes to while any view of it exists: a ``bytes``
  object, or a ``bytearray`` of that one frame (a pooled one is reused only
  once no view of it is left, see :class:`ReadMemory`);
- a frame's bytes are copied at most once after the socket read: a frame that
  arrives in pieces gets a buffer of its full size as soon as its size prefix
  is known, and later pieces go into it (no re-joining, nothing quadratic);
  above ``EAGER_MAX`` the buffer starts at that size and doubles as bytes
  arrive (memory is bounded by what was received, not by what a size prefix
  claims);
- a negative or oversized length (checked from the 4-byte prefix alone)
  raises :class:`FrameError`; after that the splitter is poisoned and the
  connection must be closed.
- no I/O here: the caller does the reads.
"""

from __future__ import annotations

import struct

from protocol.primitives import ProtocolError

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
# Scratch buffer for reads when no large frame is pending (one per thread is enough).
READ_BUFFER_SIZE = 64 * 1024
# A pending frame with at least this many bytes still to come is read into directly.
DIRECT_READ_MIN = 16 * 1024
# A frame up to this size gets all its memory once its size prefix is known; a larger
# one gets this much, then more as its bytes arrive (a prefix alone claims no more).
EAGER_MAX = 2 * 1024 * 1024
# Frame buffers at least this large come from (and go back to) the pool.
POOL_MIN = 64 * 1024
_POOL_GRAIN = 64 * 1024
_POOL_BYTES = 8 * 1024 * 1024
_SIZE = struct.Struct(">i")


class FrameError(ProtocolError):
    """A frame whose size field cannot be honoured."""


class ReadMemory:
    """The memory the splitters of one thread read into.

    A scratch buffer, and a bounded pool of large frame buffers. A fresh buffer
    of a megabyte costs page faults on every use (the allocator hands freed
    large blocks back to the system), which is most of what copying a large
    frame costs; a pooled one is reused, without zeroing, once no view of it is
    left: no frame, no transport still writing one (see :func:`_unexported`).
    Frames are views of ``[:size]`` of a pooled buffer; nothing outside the
    frame is ever read.
    """

    __slots__ = ("scratch", "_pool", "_pooled_bytes", "_max_bytes")

    def __init__(self, scratch_size: int = READ_BUFFER_SIZE,
                 pool_bytes: int = _POOL_BYTES) -> None:
        self.scratch = memoryview(bytearray(scratch_size))
        self._pool: list[bytearray] = []
        self._pooled_bytes = 0
        self._max_bytes = pool_bytes

    def frame_buffer(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes that nothing else refers to."""
        if size < POOL_MIN:
            return bytearray(size)
        spare: list[bytearray] = []
        for buf in self._pool:
            if _unexported(buf):
                if size <= len(buf) <= size + max(size // 2, _POOL_GRAIN):
                    return buf
                spare.append(buf)
        cap = -(-size // _POOL_GRAIN) * _POOL_GRAIN
        dropped: list[bytearray] = []
        while spare and self._pooled_bytes + cap > self._max_bytes:
            dropped.append(spare.pop())  # free buffers of the wrong size make room
            self._pooled_bytes -= len(dropped[-1])
        if dropped:  # (by identity: == would compare the contents)
            self._pool = [b for b in self._pool if all(b is not d for d in dropped)]
        del spare, dropped
        buf = bytearray(cap)
        if self._pooled_bytes + cap <= self._max_bytes:
            self._pool.append(buf)
            self._pooled_bytes += cap
        return buf


def _unexported(buf: bytearray) -> bool:
    """True when no memoryview of ``buf`` is alive (no frame, no transport writing one).

    A bytearray cannot change size while views of it exist (the language says so:
    BufferError), so growing it by a byte and back tells, without relying on how an
    interpreter counts references. For buffers this large the allocator grows in
    place, and the slack it leaves makes the next check free of reallocation.
    """
    try:
        buf.append(0)
    except BufferError:
        return False
    del buf[-1]
    return True


class FrameSplitter:
    __slots__ = ("_max", "_memory", "_frame_view", "_total", "_have", "_head", "_failed")

    def __init__(
        self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, memory: ReadMemory | None = None
    ) -> None:
        self._max = max_frame_size
        self._memory = memory  # made on first use when not shared
        # The pending frame: memory for its first len(_frame_view) bytes (all of them, but
        # for frames above EAGER_MAX: those get more room as they arrive).
        self._frame_view: memoryview | None = None
        self._total = 0  # the pending frame's size, prefix included
        self._have = 0  # bytes of the pending frame (or of its size prefix) received
        self._head = b""  # 1-3 bytes of a size prefix still incomplete
        self._failed = False

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return self._have

    # ----- reading into the splitter's memory

    def get_buffer(self) -> memoryview:
        """Writable memory for the next read; pass the count read to ``buffer_updated``.

        Never raises (a failed splitter raises from ``buffer_updated``).
        """
        frame = self._frame_view
        if frame is not None and self._total - self._have >= DIRECT_READ_MIN:
            if self._have == len(frame):
                frame = self._grow(self._have + 1)
            return frame[self._have :]
        memory = self._memory
        if memory is None:
            memory = self._memory = ReadMemory(pool_bytes=0)
        return memory.scratch

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """``nbytes`` were written at the start of the memory ``get_buffer`` returned."""
        if self._failed:
            raise FrameError("stream already failed")
        if self._frame_view is not None:
            if self._total - self._have >= DIRECT_READ_MIN:  # as get_buffer decided
                self._have += nbytes
                if self._have < self._total:
                    return []
                return [self._complete()]
        elif not self._head and nbytes >= 4:
            scratch = self._memory.scratch  # type: ignore[union-attr]
            size = _SIZE.unpack_from(scratch, 0)[0]
            if size + 4 == nbytes and 0 <= size <= self._max:  # the usual: one whole frame
                return [memoryview(scratch[:nbytes].tobytes())]
        assert self._memory is not None, "buffer_updated without get_buffer"
        return self._consume(self._memory.scratch[:nbytes], False)

    # ----- bytes read elsewhere

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Frames completed by ``data``; those wholly inside ``bytes`` are views of it."""
        if self._failed:
            raise FrameError("stream already failed")
        return self._consume(memoryview(data), isinstance(data, bytes))

    # ----- the state machine

    def _consume(self, data: memoryview, keep: bool) -> list[memoryview]:
        """Frames completed by ``data``. ``keep``: ``data`` is immutable, so frames may be
        views of it; otherwise (scratch memory) everything needed is copied out."""
        frames: list[memoryview] = []
        pos = 0
        end = len(data)
        while pos < end:
            frame_view = self._frame_view
            if frame_view is not None:  # a frame of known size is pending: fill it
                have = self._have
                take = min(self._total - have, end - pos)
                if have + take > len(frame_view):
                    frame_view = self._grow(have + take)
                frame_view[have : have + take] = data[pos : pos + take]
                pos += take
                self._have = have + take
                if self._have == self._total:
                    frames.append(self._complete())
                continue
            if self._head or end - pos < 4:  # a size prefix arriving in pieces
                take = min(4 - len(self._head), end - pos)
                head = self._head + bytes(data[pos : pos + take])
                pos += take
                if len(head) < 4:
                    self._head = head
                    self._have = len(head)
                    continue
                self._head = b""
                self._start(self._frame_total(head))
                self._frame_view[:4] = head  # type: ignore[index]
                self._have = 4
                if self._total == 4:
                    frames.append(self._complete())
                continue
            total = self._frame_total(data[pos : pos + 4])
            if end - pos >= total:  # a whole frame
                whole = data[pos : pos + total]
                frames.append(whole if keep else memoryview(bytes(whole)))
                pos += total
                continue
            self._start(total)  # the rest of data goes into it on the next turn
        return frames

    def _start(self, total: int) -> None:
        self._total = total
        self._have = 0
        self._frame_view = self._buffer(min(total, EAGER_MAX))

    def _grow(self, need: int) -> memoryview:
        """Room for at least ``need`` bytes (doubling, up to the frame's size); keeps the
        bytes received. Only frames above EAGER_MAX grow: memory follows the bytes that
        arrive, not a size prefix that merely claims them."""
        old = self._frame_view
        assert old is not None
        view = self._buffer(min(self._total, max(need, 2 * len(old))))
        view[: self._have] = old[: self._have]
        self._frame_view = view
        return view

    def _buffer(self, size: int) -> memoryview:
        memory = self._memory
        buf = memory.frame_buffer(size) if memory is not None else bytearray(size)
        return memoryview(buf)[:size]

    def _complete(self) -> memoryview:
        view = self._frame_view.toreadonly()  # type: ignore[union-attr]
        self._frame_view = None
        self._have = 0
        self._total = 0
        return view

    def _frame_total(self, prefix: bytes | memoryview) -> int:
        size = _SIZE.unpack_from(prefix, 0)[0]
        if size < 0:
            self._failed = True
            raise FrameError(f"negative frame size {size}")
        if size > self._max:
            self._failed = True
            raise FrameError(f"frame size {size} exceeds the maximum {self._max}")
        return size + 4


def frame(body: bytes) -> bytes:
    """Prefix a body with its size."""
    return _SIZE.pack(len(body)) + body
