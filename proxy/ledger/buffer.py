"""The ledger's queue: compact buffers the event loop appends requests to, the writer takes.

A recorded request is appended whole, in one call (:meth:`RowBuffer.add`), when it
is complete (the broker answered, or the proxy answered every partition itself):
its fixed-size record of numbers (``HEAD`` packed when it was decided, ``TAIL``
when it was answered) to one ``bytearray``, its partitions (four int32 each:
topic number, partition, records, bytes) and their outcome codes (one byte each)
to two more, the broker's answer as it came to a fourth, and its strings (client
id and address, topic names, topic ids) to three lists, by reference. Nothing is
built per partition and nothing is decoded: the writer thread turns a taken chunk
into Arrow columns by reinterpreting the bytes (:mod:`proxy.ledger.tables`).

The hand-off takes no lock and no queue operation per request: the loop only
appends at the ends and then counts the request (``done``); the writer
(:meth:`RowBuffer.take`) copies and deletes the leading bytes and items of the
requests counted so far, which a request being appended never touches. Each append
and each copy-and-delete is one call into C on a ``bytearray`` or a ``list``, so
under the GIL the two threads never see one half done, and nothing here ever
rebinds a buffer. Should an append fail half way (out of memory), the buffer is
``torn``: the loop stops adding and the writer empties it (:meth:`RowBuffer.reset`).

Invariant: the first ``done - taken`` requests of every buffer are complete and in
the same order; the writer reads nothing beyond them.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proxy.ledger.entry import Entry

HEAD = struct.Struct("=dqqqiiiii4x")
"""Packed when a request is decided: wall time, request number, view and rule sequence
numbers, API version, partitions, topics, topic ids (0: named by name), the error code
the proxy gives a NOT_ENOUGH_RACKS refusal (its dedicated code, or 19)."""
TAIL = struct.Struct("=di4x")
"""Packed when it is answered: the upstream latency in ms (NaN: no broker answer) and
the answer's length (0: none)."""
ROW = HEAD.size + TAIL.size  # bytes per request, a multiple of 8
PART = struct.Struct("=4i")
"""Per partition: topic number (into the request's topics), partition, records, bytes."""

# Positions of the fields in a request's row, in units of 8 bytes (floats, int64s) and
# of 4 bytes (int32s): memoryview(rows).cast("d")[F_WALL::ROW // 8] is the wall times.
F_WALL, F_REQ, F_VIEW_SEQ, F_RULE_SEQ = 0, 1, 2, 3
F_API_VERSION, F_ROWS, F_TOPICS, F_IDS, F_RACKS_CODE = 8, 9, 10, 11, 12
F_LATENCY = HEAD.size // 8  # 7
F_ANSWER_LEN = HEAD.size // 4 + 2  # 16


def held_bytes(rows: int, answer_len: int) -> int:
    """What a queued request is counted as against ``queue_bytes``: its answer, its
    partitions and a fixed part (the loop and the writer count alike)."""
    return 32 * rows + answer_len + 200


@dataclass(frozen=True, slots=True)
class Chunk:
    """Requests taken by the writer: ``count`` rows of ``ROW`` bytes and what they own."""

    count: int
    rows: bytearray  # count * ROW
    partitions: int  # in all
    parts: bytearray  # partitions * PART.size
    codes: bytearray  # one outcome code per partition
    answers: bytearray  # the answers, one after the other
    who: Sequence[str | None]  # client id, client address, per request
    topics: Sequence[str]
    topic_ids: Sequence[bytes]

    @property
    def held(self) -> int:
        return 32 * self.partitions + len(self.answers) + 200 * self.count


class RowBuffer:
    """Written by the event loop (:meth:`add`), read by the writer thread (:meth:`take`)."""

    __slots__ = ("_rows", "_parts", "_codes", "_answers", "_who", "_topics", "_ids", "done",
                 "taken", "torn")

    def __init__(self) -> None:
        self._rows = bytearray()
        self._parts = bytearray()
        self._codes = bytearray()
        self._answers = bytearray()
        self._who: list[str | None] = []
        self._topics: list[str] = []
        self._ids: list[bytes] = []
        self.done = 0  # requests appended (the loop's)
        self.taken = 0  # requests taken (the writer's)
        self.torn = False

    def add(self, entry: Entry, tail: bytes, answer: memoryview | None) -> None:
        """Append one complete request (the loop; ``tail`` packed beforehand, so nothing
        that can fail on a value runs once the first byte is appended)."""
        try:
            rows = self._rows
            rows += entry.head
            rows += tail
            parts = self._parts
            parts += entry.parts
            codes = self._codes
            codes += entry.codes
            if answer is not None:
                answers = self._answers
                answers += answer
            who = self._who
            who += entry.who
            topics = self._topics
            topics += entry.topics
            if entry.topic_ids is not None:
                ids = self._ids
                ids += entry.topic_ids
        except BaseException:
            self.torn = True
            raise
        self.done += 1

    def ready(self) -> int:
        """Requests appended and not taken yet."""
        return self.done - self.taken

    def take(self, most: int) -> Chunk | None:
        """The first ``most`` complete requests (fewer if fewer are there), removed."""
        count = min(self.done - self.taken, most)
        if count <= 0:
            return None
        size = count * ROW
        rows = self._rows[:size]  # a copy (a slice of a bytearray), owned by the writer
        del self._rows[:size]
        ints = memoryview(rows).cast("i")
        stride = ROW // 4
        partitions = sum(ints[F_ROWS::stride])
        topics = sum(ints[F_TOPICS::stride])
        ids = sum(ints[F_IDS::stride])
        answer_bytes = sum(ints[F_ANSWER_LEN::stride])
        ints.release()
        parts = self._parts[:partitions * PART.size]
        del self._parts[:partitions * PART.size]
        codes = self._codes[:partitions]
        del self._codes[:partitions]
        answers = self._answers[:answer_bytes]
        del self._answers[:answer_bytes]
        who = self._who[:2 * count]
        del self._who[:2 * count]
        names = self._topics[:topics]
        del self._topics[:topics]
        topic_ids = self._ids[:ids]
        del self._ids[:ids]
        self.taken += count
        return Chunk(count, rows, partitions, parts, codes, answers, who, names, topic_ids)

    def reset(self) -> int:
        """Empty a torn buffer (the writer, while the loop adds nothing); returns the
        requests dropped."""
        dropped = self.done - self.taken
        for buffer in (self._rows, self._parts, self._codes, self._answers):
            buffer.clear()
        self._who.clear()
        self._topics.clear()
        self._ids.clear()
        self.taken = self.done
        self.torn = False
        return dropped
