"""proxy.ledger.chunks.RowChunks: encoded rows in reusable chunks.

Invariant under test: every row the encoder accepts reaches ``sealed`` exactly
once, in order, in a chunk whose ``buf[:end]`` holds just those rows and whose
``rows`` counts them; a chunk is sealed when the next entry does not fit, when
its first row is ``seal_after`` old (at add, on the injected clock), by a timer
on the running event loop, or on ``seal()``; a declined entry changes nothing;
an entry larger than a chunk gets a buffer of its own, never pooled; released
standard buffers are reused, and the pool is bounded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from proxy.ledger.chunks import _POOLED_CHUNKS, Chunk, RowChunks
from proxy.ledger.recorder import REJECTED
from proxy.ledger.rows import NATIVE_ROWS
from tests.unit.enforce.test_enforcement_hook import Playbook, produce
from tests.unit.ledger.test_ledger import ledger_for, rows_in

SIZE = 32  # "row-0\n" is 6 bytes: five such rows fill a chunk


@dataclass
class Big:
    n: int
    size: int  # one row of this many bytes


class Decline:
    """The encoder scribbles past ``pos``, then declines."""


def encode(entry: int | Big | Decline, buf: bytearray, pos: int) -> int | None:
    if isinstance(entry, Decline):
        buf[pos:pos + 4] = b"XXXX"
        return None
    line = (b"B%d" % entry.n).ljust(entry.size - 1, b".") + b"\n" if isinstance(
        entry, Big) else b"row-%d\n" % entry
    if len(buf) - pos < len(line):
        return -1
    buf[pos:pos + len(line)] = line
    return pos + len(line)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Sink:
    """The ``sealed`` callback: each chunk, and a copy of its content at seal time."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.contents: list[bytes] = []

    def __call__(self, chunk: Chunk) -> None:
        self.chunks.append(chunk)
        self.contents.append(bytes(chunk.buf[:chunk.end]))


def rows_of(*ns: int) -> bytes:
    return b"".join(b"row-%d\n" % n for n in ns)


def make(seal_after: float = 10.0, clock: Callable[[], float] | None = None
         ) -> tuple[RowChunks, Sink, Clock]:
    sink, fake = Sink(), Clock()
    return RowChunks(encode, sink, seal_after, clock or fake, chunk_bytes=SIZE), sink, fake


def test_rows_accumulate_and_seal_hands_exactly_that_chunk() -> None:
    chunks, sink, _ = make()
    chunks.seal()  # nothing open
    assert sink.chunks == []
    assert [chunks.add(n, 1) for n in range(3)] == [6, 6, 6]
    assert sink.chunks == []
    chunks.seal()
    assert sink.contents == [rows_of(0, 1, 2)]
    assert (sink.chunks[0].rows, sink.chunks[0].end) == (3, 18)
    chunks.seal()  # sealed already: nothing more
    assert len(sink.chunks) == 1


def test_a_full_chunk_is_sealed_and_the_entry_starts_the_next() -> None:
    chunks, sink, _ = make()
    for n in range(5):
        chunks.add(n, 1)
    assert sink.chunks == []  # 30 of 32 bytes
    assert chunks.add(5, 1) == 6  # does not fit: sealed first
    assert sink.contents == [rows_of(0, 1, 2, 3, 4)] and sink.chunks[0].rows == 5
    for n in range(6, 23):
        chunks.add(n, 2)  # the count is the caller's
    chunks.seal()
    assert b"".join(sink.contents) == rows_of(*range(23))
    assert all(len(c) <= SIZE for c in sink.contents) and len(sink.chunks) > 3
    assert sum(c.rows for c in sink.chunks) == 5 + 1 + 17 * 2


def test_an_entry_larger_than_a_chunk_gets_its_own_buffer_never_pooled() -> None:
    chunks, sink, _ = make()
    chunks.add(0, 1)
    assert chunks.add(Big(1, 3 * SIZE), 4) == 3 * SIZE
    chunks.seal()
    assert sink.contents[0] == rows_of(0)
    big = sink.chunks[1]
    assert len(big.buf) > SIZE and big.rows == 4
    assert sink.contents[1] == b"B1".ljust(3 * SIZE - 1, b".") + b"\n"
    chunks.release(big)
    chunks.add(2, 1)
    chunks.seal()
    assert sink.chunks[2].buf is not big.buf and len(sink.chunks[2].buf) == SIZE
    assert sink.contents[2] == rows_of(2)


def test_an_add_after_seal_after_seals_the_open_chunk_first() -> None:
    chunks, sink, clock = make(seal_after=1.0)
    chunks.add(0, 1)
    clock.t = 0.5
    chunks.add(1, 1)
    clock.t = 0.99
    chunks.add(2, 1)
    assert sink.chunks == []  # the first row is 0.99 s old
    clock.t = 1.0
    chunks.add(3, 1)
    assert sink.contents == [rows_of(0, 1, 2)]
    clock.t = 1.9  # the new chunk's age counts from its own first row (1.0)
    chunks.add(4, 1)
    assert len(sink.chunks) == 1
    chunks.seal()
    assert sink.contents[1] == rows_of(3, 4) and sink.chunks[1].rows == 2


def test_a_declined_entry_adds_nothing() -> None:
    chunks, sink, _ = make()
    assert chunks.add(Decline(), 3) is None  # first add: nothing open yet
    chunks.add(0, 1)
    assert chunks.add(Decline(), 3) is None
    chunks.add(1, 1)  # written over the scribble
    assert chunks.add(Decline(), 3) is None  # scribbled past the end, then sealed
    chunks.seal()
    assert chunks.add(Decline(), 3) is None
    chunks.seal()  # the open chunk holds no rows: nothing sealed
    assert sink.contents == [rows_of(0, 1)]
    assert (sink.chunks[0].rows, sink.chunks[0].end) == (2, 12)


def test_released_buffers_are_reused_and_the_pool_is_bounded() -> None:
    chunks, sink, _ = make()
    chunks.add(0, 1)
    chunks.seal()
    first = sink.chunks[0]
    chunks.release(first)
    chunks.add(1, 1)
    chunks.seal()
    assert sink.chunks[1].buf is first.buf and sink.contents[1] == rows_of(1)
    sink.chunks.clear()
    for n in range(_POOLED_CHUNKS + 3):  # that many buffers in use at once
        chunks.add(n, 1)
        chunks.seal()
    released = [c.buf for c in sink.chunks]  # held: an id is not reused while they live
    assert len({id(b) for b in released}) == _POOLED_CHUNKS + 3
    for chunk in sink.chunks:
        chunks.release(chunk)
    sink.chunks.clear()
    for n in range(_POOLED_CHUNKS + 3):  # again: only the pooled ones come back
        chunks.add(n, 1)
        chunks.seal()
    assert sum(any(c.buf is b for b in released) for c in sink.chunks) == _POOLED_CHUNKS


async def test_a_running_loop_seals_idle_rows_by_timer() -> None:
    chunks, sink, _ = make(0.05, time.monotonic)
    start = time.monotonic()
    chunks.add(0, 1)
    chunks.add(1, 1)
    await asyncio.sleep(0.03)
    if time.monotonic() - start < 0.045:  # (unless this host stalled the test)
        assert sink.chunks == []  # not yet due
    await asyncio.sleep(0.15)
    assert sink.contents == [rows_of(0, 1)]
    chunks.add(2, 1)  # a new chunk, a new timer
    await asyncio.sleep(0.15)
    assert sink.contents == [rows_of(0, 1), rows_of(2)]
    await asyncio.sleep(0.1)
    assert len(sink.chunks) == 2  # nothing open, nothing more


async def test_ledger_writes_rows_on_a_running_loop_without_seal(tmp_path: Path) -> None:
    if NATIVE_ROWS is None:
        pytest.skip("the C row encoder (proxy.ledger._ledger_native) is not built: "
                    "no chunks")
    play = Playbook()
    ledger, _ = ledger_for(play, tmp_path, flush_interval_s=0.05, snapshot_interval_s=3600)
    ledger.start()
    try:
        play(produce(12, [("audit", [0, 1])]), 12)  # both rejected: offered at once
        deadline = time.monotonic() + 5
        while len(rows_in(ledger.decision_files)) < 2:
            assert time.monotonic() < deadline, "rows not written without seal()"
            await asyncio.sleep(0.02)
        rows = rows_in(ledger.decision_files)
        assert sorted((r["topic"], r["partition"], r["decision"]) for r in rows) == [
            ("audit", 0, REJECTED), ("audit", 1, REJECTED)]
    finally:
        ledger.stop()


def test_a_timer_left_on_a_closed_loop_does_not_stop_sealing() -> None:
    chunks, sink, clock = make(seal_after=0.05)

    async def add(n: int, wait: float) -> None:
        chunks.add(n, 1)
        await asyncio.sleep(wait)

    asyncio.run(add(0, 0))  # this loop closes before its timer fires
    clock.t = 5.0
    asyncio.run(add(1, 0.15))  # [0] sealed by age at the add, [1] by this loop's timer
    assert sink.contents == [rows_of(0), rows_of(1)]
