"""The ledger's queue: compact buffers the event loop appends requests to, the writer takes.

A recorded request is appended whole, in one call (:meth:`RowBuffer.add`), when it
is complete (the broker answered, or the proxy answered every partition itself):
its fixed-size record of numbers (``HEAD`` packed when it was decided, ``TAIL``
when it was answered), its partitions (four int32 each: topic number, partition,
records, bytes), their outcome codes (one byte each) and the broker's answer as
it came, each a ``bytes`` appended to a list, and its strings (client id and
address, topic names, topic ids) to three more lists, by reference. Nothing is
built per partition and nothing is decoded: the writer thread joins a taken
chunk's bytes and turns them into Arrow columns by reinterpreting them
(:mod:`proxy.ledger.tables`).

The hand-off takes no lock and no queue operation per request: the loop only
appends at the ends and then counts the request (``done``); the writer
(:meth:`RowBuffer.take`) copies and deletes the leading items of the requests
counted so far, which a request being appended never touches. Each append and
each copy-and-delete is one call into C on a ``list``, so under the GIL the two
threads never see one half done, and nothing here ever rebinds a list. Should an
append fail half way (out of memory), the buffer is ``torn``: the loop stops
adding and the writer empties it (:meth:`RowBuffer.reset`).

Invariant: the first ``done - taken`` requests of every buffer are complete and in
the same order; the writer reads nothing beyond them.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from protocol.produce import PARTITION_ROW

HEAD = struct.Struct("=dqqqh2xiiii4x")
"""Packed when a request is decided: wall time, request number, view and rule sequence
numbers, API version, partitions, topics, topic ids (0: named by name), the error code
the proxy gives a NOT_ENOUGH_RACKS refusal (its dedicated code, or 19)."""
TAIL = struct.Struct("=fi")
"""Packed when it is answered: the upstream latency in ms (NaN: no broker answer) and
the answer's length (0: none)."""
ROW = HEAD.size + TAIL.size  # bytes per request, a multiple of 8
PART = PARTITION_ROW
"""Per partition: topic number (into the request's topics), partition, records, bytes (the
rows :func:`protocol.produce_partitions.partition_rows` packs, kept as they are)."""

# Positions of the fields in a request's row, in units of their own width, each typed
# as its column is (the writer reinterprets, never casts): array("d", rows)[F_WALL::ROW
# // 8] is the wall times, array("h", rows)[F_API_VERSION::ROW // 2] the API versions.
F_WALL, F_REQ, F_VIEW_SEQ, F_RULE_SEQ = 0, 1, 2, 3  # float64, int64
F_API_VERSION = 16  # int16
F_ROWS, F_TOPICS, F_IDS, F_RACKS_CODE = 9, 10, 11, 12  # int32
F_LATENCY = HEAD.size // 4  # float32
F_ANSWER_LEN = HEAD.size // 4 + 1  # int32


Fields = tuple[bytes, bytes, bytes, tuple["str | None", str], tuple[str, ...],
               "tuple[bytes, ...] | None"]
"""A request as recorded when it was decided: HEAD, its partitions (PART each), their
outcome codes, (client id, client address), its topic names, its topic ids (None: it
names its topics by name)."""

PER_ROW, PER_REQUEST = 32, 200
"""What a queued request is counted as against ``queue_bytes``: its answer, and this much
per partition and per request (the loop and the writer count alike)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """Requests taken by the writer: ``count`` rows of ``ROW`` bytes and what they own."""

    count: int
    rows: bytes  # count * ROW
    partitions: int  # in all
    parts: bytes  # partitions * PART.size
    codes: bytes  # one outcome code per partition
    answers: bytes  # the answers, one after the other
    who: Sequence[str | None]  # client id, client address, per request
    topics: Sequence[str]
    topic_ids: Sequence[bytes]

    @property
    def held(self) -> int:
        return PER_ROW * self.partitions + len(self.answers) + PER_REQUEST * self.count


class RowBuffer:
    """Written by the event loop (:meth:`add`), read by the writer thread (:meth:`take`,
    then :meth:`release`); bounded to ``most_rows`` partition-writes and ``most_bytes``
    held."""

    __slots__ = ("_rows", "_parts", "_codes", "_answers", "_who", "_topics", "_ids",
                 "_most_rows", "_most_bytes", "done", "taken", "rows_in", "rows_out",
                 "bytes_in", "bytes_out", "torn")

    def __init__(self, most_rows: int = 1 << 62, most_bytes: int = 1 << 62) -> None:
        # lists of references: two records, one partitions' and one outcomes' bytes and
        # one answer (b"": none) per request. The bytes objects come from the
        # interpreter's allocator, which reuses the memory of those the writer freed;
        # growing one long bytearray instead faulted in fresh pages after every flush
        # (about one page fault per 50-partition request)
        self._rows: list[bytes] = []
        self._parts: list[bytes] = []
        self._codes: list[bytes] = []
        self._answers: list[bytes] = []
        self._who: list[str | None] = []
        self._topics: list[str] = []
        self._ids: list[bytes] = []
        self._most_rows, self._most_bytes = most_rows, most_bytes
        self.done = self.rows_in = self.bytes_in = 0  # appended (the loop's)
        self.taken = self.rows_out = self.bytes_out = 0  # taken, then released (the writer's)
        self.torn = False

    def add(self, fields: Fields, tail: bytes, answer: memoryview | None, rows: int) -> int:
        """Append one complete request if the bounds let it in (the loop; ``tail`` packed
        beforehand, so nothing that can fail on a value runs once the first item is
        appended); returns the partition-writes queued with it, or -1 when it was refused
        (the bounds, or a torn buffer)."""
        queued = self.rows_in - self.rows_out + rows
        if (queued > self._most_rows or self.bytes_in - self.bytes_out > self._most_bytes
                or self.torn):
            return -1
        try:
            fixed = self._rows
            head, parts, codes, who, names, topic_ids = fields
            fixed.append(head)
            fixed.append(tail)
            self._parts.append(parts)
            self._codes.append(codes)
            self._answers.append(bytes(answer) if answer is not None else b"")
            self._who.extend(who)
            self._topics.extend(names)
            if topic_ids is not None:
                self._ids.extend(topic_ids)
        except BaseException:
            self.torn = True
            raise
        self.done += 1
        self.rows_in += rows
        self.bytes_in += PER_ROW * rows + (len(answer) if answer is not None else 0) + PER_REQUEST
        return queued

    def release(self, rows: int, held: int) -> None:
        """Taken requests written or dropped (the writer): room for as many again."""
        self.rows_out += rows
        self.bytes_out += held

    def depth(self) -> int:
        """Partition-writes queued and not released."""
        return self.rows_in - self.rows_out

    def ready(self) -> int:
        """Requests appended and not taken yet."""
        return self.done - self.taken

    def take(self, most: int) -> Chunk | None:
        """The first ``most`` complete requests (fewer if fewer are there), removed."""
        count = min(self.done - self.taken, most)
        if count <= 0:
            return None
        rows = b"".join(self._rows[:2 * count])
        del self._rows[:2 * count]
        parts = b"".join(self._parts[:count])
        del self._parts[:count]
        codes = b"".join(self._codes[:count])
        del self._codes[:count]
        answers = b"".join(self._answers[:count])
        del self._answers[:count]
        ints = memoryview(rows).cast("i")
        stride = ROW // 4
        topics = sum(ints[F_TOPICS::stride])
        ids = sum(ints[F_IDS::stride])
        ints.release()
        who = self._who[:2 * count]
        del self._who[:2 * count]
        names = self._topics[:topics]
        del self._topics[:topics]
        topic_ids = self._ids[:ids]
        del self._ids[:ids]
        self.taken += count
        return Chunk(count, rows, len(codes), parts, codes, answers, who, names, topic_ids)

    def reset(self) -> int:
        """Empty a torn buffer (the writer, while the loop adds nothing); returns the
        partition-writes dropped."""
        dropped = self.depth()
        for items in (self._rows, self._parts, self._codes, self._answers):
            items.clear()
        self._who.clear()
        self._topics.clear()
        self._ids.clear()
        self.taken = self.done
        self.rows_out, self.bytes_out = self.rows_in, self.bytes_in
        self.torn = False
        return dropped
