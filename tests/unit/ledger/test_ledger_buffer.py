"""proxy.ledger.buffer: the loop appends whole requests, the writer takes complete ones.

Invariants under test: what the writer takes is exactly the requests appended before,
in order, each with its own partitions, codes, answer and strings, however the takes
fall between the appends; a request whose append fails half way tears the buffer:
the ledger then counts its rows and the queued ones as dropped, empties the buffer,
and the requests after it are written again; the client's request is untouched.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from proxy.ledger.buffer import HEAD, PART, ROW, TAIL, Fields, RowBuffer
from proxy.ledger.entry import OUTCOMES, RACKS_CODE
from proxy.ledger.recorder import DecisionLedger, LedgerConfig
from proxy.ledger.tables import decision_batch

REFUSED = OUTCOMES.index(("rejected", "NOT_ENOUGH_RACKS", RACKS_CODE))


def entry(req: int, partitions: int, ids: bool = False) -> Fields:
    """A request of ``partitions`` partitions, all but the first refused for racks (the
    request's dedicated code 42)."""
    parts = b"".join(PART.pack(i % 2, 10 * req + i, i + 1, 100 + i) for i in range(partitions))
    topics = ("a", "b") if partitions > 1 else ("a",)
    return (HEAD.pack(1000.0 + req, req, 7, 3, 9, partitions, len(topics),
                      len(topics) if ids else 0, 42),
            parts, bytes([0] + [REFUSED] * (partitions - 1)),
            (f"client-{req}", f"10.0.0.{req}:1"), topics,
            tuple(bytes([req]) * 16 for _ in topics) if ids else None)


def broker_answers(ledger: DecisionLedger, fields: Fields, frame: memoryview) -> None:
    """The broker's answer reaches the transform :meth:`DecisionLedger.record` names."""
    assert ledger._answered(fields, len(fields[1]) // PART.size, 0.0,
                            lambda f, v: f, frame, 9) is frame


def test_takes_between_appends_give_every_request_once_in_order() -> None:
    buffer = RowBuffer()
    taken = []
    for req in range(1, 8):
        buffer.add(entry(req, req % 3 + 1, ids=req == 5),
                   TAIL.pack(float(req), 4 + req), memoryview(bytes([req]) * (4 + req)),
                   req % 3 + 1)
        if req in (2, 3, 6):
            chunk = buffer.take(2)
            assert chunk is not None
            taken.append(chunk)
    while (chunk := buffer.take(100)) is not None:
        taken.append(chunk)
    assert buffer.ready() == 0 and [c.count for c in taken] == [2, 1, 2, 2]
    table = [row for c in taken for row in decision_batch(c, "i", 1).to_pylist()]
    assert [r["req"] for r in table] == list(range(1, 8))
    for r in table:
        req, n = r["req"], r["req"] % 3 + 1
        assert r["partition"] == [10 * req + i for i in range(n)]
        assert r["records"] == list(range(1, n + 1)) and r["topic_no"] == [i % 2 for i in range(n)]
        assert r["answer"] == bytes([req]) * (4 + req)
        assert r["latency_ms"] == float(req) and r["client_id"] == f"client-{req}"
        assert r["topic_ids"] == ([bytes([req]) * 16] * 2 if req == 5 else None)
        assert r["np_index"] == (list(range(1, n)) or None)
        assert r["np_decision"] == (["rejected"] * (n - 1) or None)
        assert r["np_reason"] == (["NOT_ENOUGH_RACKS"] * (n - 1) or None)
        assert r["np_code"] == ([42] * (n - 1) or None)


def test_a_request_without_answer_has_null_answer_and_latency() -> None:
    buffer = RowBuffer()
    buffer.add(entry(1, 1), TAIL.pack(math.nan, 0), None, 1)
    chunk = buffer.take(10)
    assert chunk is not None and len(chunk.rows) == ROW
    (row,) = decision_batch(chunk, "i", 1).to_pylist()
    assert row["answer"] is None and row["latency_ms"] is None


class Exploding(tuple):  # type: ignore[type-arg]
    """A topic tuple whose append fails (as an out-of-memory error would)."""

    def __iter__(self) -> Any:
        raise MemoryError


def test_a_torn_append_drops_what_is_queued_and_recovers(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    ledger = DecisionLedger(LedgerConfig(tmp_path, "p"), registry)
    ledger.flush()
    frame = memoryview(b"\x00\x00\x00\x04abcd")
    broker_answers(ledger, entry(1, 2), frame)  # queued
    head, parts, codes, who, _, ids = entry(2, 1)
    broker_answers(ledger, (head, parts, codes, who, Exploding(("a",)), ids),
             frame)  # half appended: the buffer is torn
    broker_answers(ledger, entry(3, 1), frame)  # refused while torn

    def dropped() -> float:
        return registry.get_sample_value("rackguard_ledger_dropped_rows_total",
                                         {"reason": "record_error"}) or 0.0

    assert dropped() == 2  # the torn request, the one refused
    assert ledger.flush() == 0 and dropped() == 4  # emptied: the queued request too
    assert registry.get_sample_value("rackguard_ledger_queue_depth") == 0
    broker_answers(ledger, entry(4, 3), frame)
    assert ledger.flush() == 3
    ledger.stop()


@pytest.mark.parametrize("most", [1, 3])
def test_take_never_reads_past_the_requests_counted(most: int) -> None:
    buffer = RowBuffer()
    buffer.add(entry(1, 2), TAIL.pack(1.0, 1), memoryview(b"x"), 2)
    buffer.done -= 1  # as if the loop were still appending this request
    assert buffer.take(most) is None
    buffer.done += 1
    chunk = buffer.take(most)
    assert chunk is not None and chunk.count == 1 and chunk.partitions == 2



# One request of a chunk: its partitions' outcome codes, whether the broker answered,
# whether it names its topics by id, its code for a rack refusal.
Shape = tuple[list[int], bool, bool, int]
_codes = st.sampled_from(range(len(OUTCOMES)))


@st.composite
def chunks(draw: st.DrawFn) -> list[Shape]:
    """Requests shaped as batches usually are (one outcome everywhere, every request of
    the same size, answered, by name, one code), and as they may be (none of that)."""
    alike = draw(st.booleans())
    size = draw(st.integers(0, 3))
    code = draw(_codes)
    requests = []
    for _ in range(draw(st.integers(1, 5))):
        n = size if draw(st.booleans()) else draw(st.integers(0, 4))
        codes = [code] * n if alike else draw(st.lists(_codes, min_size=n, max_size=n))
        requests.append((codes, draw(st.booleans()) or alike, draw(st.booleans()) and not alike,
                         42 if alike or draw(st.booleans()) else 19))
    return requests


@settings(max_examples=300, deadline=None)
@given(chunks())
def test_a_batch_holds_what_each_request_recorded_whatever_its_shape(
        shapes: list[Shape]) -> None:
    """The batch builder's short cuts for usual batches (one outcome, one size, all
    answered, one topic) give what its general case gives: each checked against the
    requests as recorded."""
    buffer = RowBuffer()
    for req, (codes, answered, ids, racks) in enumerate(shapes, 1):
        n = len(codes)
        topics = ("a", "b") if ids else ("a",)
        parts = b"".join(PART.pack(i % len(topics), i, i + 1, 100 + i) for i in range(n))
        head = HEAD.pack(1000.0 + req, req, 7, 3, 13 if ids else 9, n, len(topics),
                         len(topics) if ids else 0, racks)
        recorded = (head, parts, bytes(codes), (f"client-{req}", "10.0.0.1:1"), topics,
                    tuple(bytes([req]) * 16 for _ in topics) if ids else None)
        buffer.add(recorded, TAIL.pack(float(req), 3) if answered else TAIL.pack(math.nan, 0),
                   memoryview(b"abc") if answered else None, n)
    chunk = buffer.take(100)
    assert chunk is not None
    rows = decision_batch(chunk, "i", 1).to_pylist()
    for req, (row, (codes, answered, ids, racks)) in enumerate(zip(rows, shapes, strict=True), 1):
        n = len(codes)
        listed = [i for i, c in enumerate(codes) if c]
        assert row["req"] == req and row["partition"] == list(range(n))
        assert row["topic_no"] == [i % (2 if ids else 1) for i in range(n)]
        assert row["topics"] == (["a", "b"] if ids else ["a"])
        assert row["topic_ids"] == ([bytes([req]) * 16] * 2 if ids else None)
        assert (row["answer"], row["latency_ms"]) == ((b"abc", float(req)) if answered
                                                      else (None, None))
        assert row["np_index"] == (listed or None)
        assert row["np_decision"] == ([OUTCOMES[codes[i]][0] for i in listed] or None)
        assert row["np_reason"] == ([OUTCOMES[codes[i]][1] for i in listed] or None)
        assert row["np_code"] == ([racks if OUTCOMES[codes[i]][2] == RACKS_CODE
                                   else OUTCOMES[codes[i]][2] for i in listed] or None)
