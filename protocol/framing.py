"""Cutting a byte stream into Kafka frames (4-byte big-endian size + body).

Invariant: ``FrameSplitter.feed`` returns only complete frames, each as a
memoryview over an immutable ``bytes`` object that includes the 4-byte size
prefix, so a frame can be forwarded as it is. Bytes of a frame that has not
fully arrived are kept in a list of chunks and joined once, when the frame is
complete (no quadratic re-copying of large produce requests). A negative or
oversized length raises :class:`FrameError`; after that the splitter is
poisoned and the connection must be closed.
"""

from __future__ import annotations

import struct

from protocol.primitives import ProtocolError

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")


class FrameError(ProtocolError):
    """A frame whose size field cannot be honoured."""


class FrameSplitter:
    __slots__ = ("_max", "_chunks", "_have", "_need", "_failed")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._max = max_frame_size
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = 0  # total bytes of the pending frame incl. prefix; 0 = unknown
        self._failed = False

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return self._have

    def feed(self, data: bytes) -> list[memoryview]:
        if self._failed:
            raise FrameError("stream already failed")
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._need == 0 and self._have >= 4:
                self._need = self._frame_total(b"".join(self._chunks)[:4])
            if self._need == 0 or self._have < self._need:
                return []
            data = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
            self._need = 0
        return self._split(data)

    def _frame_total(self, prefix: bytes | memoryview) -> int:
        size = _SIZE.unpack_from(prefix, 0)[0]
        if size < 0:
            self._failed = True
            raise FrameError(f"negative frame size {size}")
        if size > self._max:
            self._failed = True
            raise FrameError(f"frame size {size} exceeds the maximum {self._max}")
        return size + 4

    def _split(self, data: bytes) -> list[memoryview]:
        view = memoryview(data)
        end = len(data)
        pos = 0
        frames = []
        while end - pos >= 4:
            total = self._frame_total(view[pos : pos + 4])
            if end - pos < total:
                break
            frames.append(view[pos : pos + total])
            pos += total
        if pos < end:
            rest = bytes(view[pos:])
            self._chunks = [rest]
            self._have = len(rest)
            self._need = self._frame_total(rest) if len(rest) >= 4 else 0
        return frames


def frame(body: bytes) -> bytes:
    """Prefix a body with its size."""
    return _SIZE.pack(len(body)) + body
