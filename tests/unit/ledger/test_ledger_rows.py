"""proxy.ledger.rows: the JSON lines assembled from fragments equal the plain encoding.

Invariant under test: every line the formatter writes is valid JSON and equal to
the row built field by field with json (strings that need escaping, a client
without an id, topic ids the view cannot name, infinite metadata age, several
batches in one record set, an unreadable batch); cached fragments never outlive
the view they were read from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from benchmarks.produce_frames import kp_request, kp_response, make_batch
from protocol.headers import parse_request_header
from protocol.produce import walk_produce_request
from proxy.cluster.view import ClusterViewStore
from proxy.enforce.policy import RackRule, decide
from proxy.ledger.rows import (
    FORWARDED,
    NATIVE_ROWS,
    OBSERVED,
    REJECTED,
    NativeRows,
    ProduceEntry,
    RowFormatter,
)
from tests.unit._views import Clock, broker, part, snap, tid, topic
from tests.unit.ledger._ledger_lines import partition_rows

CLUSTER = (broker(1, "rack-a"), broker(2, "rack-b"), broker(3, "rack-a"))
RULE = RackRule(default_min_racks=2, max_metadata_age_s=10.0)


def store_with(isr_of_p0: tuple[int, ...]) -> ClusterViewStore:
    store = ClusterViewStore(Clock(100.0))
    store.apply_metadata(snap([topic("t\"ö", [part(0, isr_of_p0), part(1, (1, 3))], tid(7))],
                              brokers=CLUSTER), full=True)
    return store


def entry_for(
    store: ClusterViewStore,
    frame: bytes,
    now: float,
    client_id: str | None = 'cl"i\\ent\n',
    observe: bool = False,
) -> ProduceEntry:
    mv = memoryview(frame)
    request = walk_produce_request(mv, parse_request_header(mv))
    decisions = decide(request, store.view, RULE, now)
    return ProduceEntry(1_700_000_000.25, 42, client_id, "10.0.0.1:5000", request, mv,
                        decisions, store.view, observe, None)


def expected(e: ProduceEntry, records: Sequence[int], results: dict[int, tuple[int, int]],
             latency: float | None) -> list[dict[str, Any]]:
    rows = []
    for d, n in zip(e.decisions, records, strict=True):
        rejects = d.verdict.rejects and not e.observe
        decision = REJECTED if rejects else (OBSERVED if d.verdict.rejects else FORWARDED)
        span = next(p.records for t in e.request.topics for p in t.partitions
                    if p.index == d.partition)
        code, offset = results.get(d.partition, (None, None))
        if rejects:
            code, offset = 19, None
        rows.append({
            "v": 2, "kind": "produce", "instance": "i/1 \"x\"", "ts": e.wall, "req": e.req,
            "client_id": e.client_id, "client_addr": e.peer,
            "topic": d.topic if d.topic is not None else d.topic_key.hex(),  # type: ignore[union-attr]
            "partition": d.partition, "leader": d.leader, "isr": list(d.isr),
            "isr_racks": list(d.isr_racks), "required_racks": d.required_racks,
            "min_isr": d.min_insync_replicas, "decision": decision,
            "reason": "" if d.verdict.value == "pass" else d.verdict.value,
            "wire_error": code, "broker_error": None if rejects else code,
            "base_offset": offset, "records": n,
            "bytes": 0 if span is None else span[1] - span[0],
            "latency_ms": latency,
            "metadata_age_ms": (None if d.metadata_age_s == float("inf")
                                else pytest.approx(d.metadata_age_s * 1000)),
        })
    return rows


@pytest.fixture(params=["native", "python"])
def encoder(request: pytest.FixtureRequest) -> NativeRows | None:
    """Each test runs with the C encoder (the usual entries) and with Python alone."""
    if request.param == "python":
        return None
    if NATIVE_ROWS is None:
        pytest.skip("proxy.ledger._ledger_native is not built "
                    "(see test_the_c_encoder_is_built)")
    return NATIVE_ROWS


def one_batch_request(batch: bytes) -> tuple[bytearray, tuple[int, int]]:
    """A v9 request (one partition of topic 't"ö') to corrupt, and its record-set span."""
    frame = bytearray(kp_request(9, [("t\"ö", [(0, batch)])]))
    mv = memoryview(bytes(frame))
    span = walk_produce_request(mv, parse_request_header(mv)).topics[0].partitions[0].records
    assert span is not None
    return frame, span


def lines_of(formatter: RowFormatter, e: ProduceEntry) -> tuple[list[dict[str, Any]], bool]:
    out: list[bytes] = []
    readable = formatter.lines(e, out)
    text = b"".join(out).decode("ascii")
    assert text == "" or text.endswith("\n")
    return partition_rows(text), readable


@pytest.mark.parametrize("version", [3, 9, 13])
def test_lines_equal_the_plain_json_encoding(version: int, encoder: NativeRows | None) -> None:
    store = store_with((1, 2))  # p0 spans two racks, p1 one
    key: Any = tid(7) if version >= 13 else "t\"ö"
    two_batches = make_batch(2) + make_batch(3)
    frame = kp_request(version, [(key, [(0, two_batches), (1, make_batch(4))])])
    e = entry_for(store, frame, now=101.5, observe=True)
    answer = kp_response(version, [(key, [{"index": 0, "error_code": 0, "base_offset": 7},
                                          {"index": 1, "error_code": 6, "base_offset": -1}])])
    e.answer, e.version, e.latency_ms = memoryview(answer), version, 1.25
    formatter = RowFormatter('i/1 "x"', encoder)
    rows, readable = lines_of(formatter, e)
    assert readable
    assert rows == expected(e, [5, 4], {0: (0, 7), 1: (6, -1)}, 1.25)
    assert rows[1]["decision"] == OBSERVED
    again, _ = lines_of(formatter, e)  # from the cached fragments
    assert again == rows


def test_an_entry_is_one_line_and_an_entry_without_partitions_writes_nothing(
    encoder: NativeRows | None,
) -> None:
    store = store_with((1, 2))
    frame = kp_request(9, [("t\"ö", [(0, make_batch(1)), (1, make_batch(2))])])
    e = entry_for(store, frame, now=100.0)
    out: list[bytes] = []
    assert RowFormatter("x", encoder).lines(e, out)
    assert b"".join(out).count(b"\n") == 1 and len(partition_rows(b"".join(out).decode())) == 2
    e.decisions = []
    out = []
    assert RowFormatter("x", encoder).lines(e, out)
    assert b"".join(out) == b""


def test_rejected_rows_unknown_topic_ids_and_null_client(encoder: NativeRows | None) -> None:
    store = store_with((1, 3))  # both partitions on rack-a only
    frame = kp_request(13, [(tid(7), [(0, make_batch(1))]), (tid(99), [(3, make_batch(2))])])
    e = entry_for(store, frame, now=101.0, client_id=None)
    rows, _ = lines_of(RowFormatter('i/1 "x"', encoder), e)
    assert rows[0]["decision"] == REJECTED and rows[0]["wire_error"] == 19
    # an id the view cannot name is written as its hex; the broker decides it
    assert rows[1]["topic"] == tid(99).hex() and rows[1]["decision"] == FORWARDED
    assert rows[0]["client_id"] is None
    assert rows == expected(e, [1, 2], {}, None)


def test_unreadable_batches_and_answers_give_nulls_not_errors(
    encoder: NativeRows | None,
) -> None:
    store = store_with((1, 2))
    frame, span = one_batch_request(make_batch(1))
    start = span[0]
    frame[start + 8:start + 12] = b"\x7f\xff\xff\xff"  # a batch length past the record set
    e = entry_for(store, bytes(frame), now=100.0)
    e.answer, e.version, e.latency_ms = memoryview(b"\x00\x00\x00\x02\x00\x01"), 9, 3.0
    rows, readable = lines_of(RowFormatter("x", encoder), e)
    assert not readable
    assert (rows[0]["records"], rows[0]["broker_error"], rows[0]["base_offset"]) == (
        -1, None, None)
    assert rows[0]["latency_ms"] == 3.0


def test_a_batch_the_codec_refuses_counts_minus_one_even_with_a_consistent_length(
    encoder: NativeRows | None,
) -> None:
    store = store_with((1, 2))
    frame, span = one_batch_request(make_batch(3))
    frame[span[0] + 16] = 1  # magic 1: its length still covers the record set exactly
    rows, _ = lines_of(RowFormatter("x", encoder), entry_for(store, bytes(frame), now=100.0))
    assert (rows[0]["records"], rows[0]["bytes"]) == (-1, span[1] - span[0])


def test_infinite_metadata_age_is_null(encoder: NativeRows | None) -> None:
    store = ClusterViewStore(Clock(100.0))  # never refreshed: age is infinite
    frame = kp_request(9, [("t", [(0, make_batch(1))])])
    e = entry_for(store, frame, now=100.0)
    rows, _ = lines_of(RowFormatter('i/1 "x"', encoder), e)
    assert rows[0]["metadata_age_ms"] is None and rows[0]["reason"] == "unknown"
    assert rows == expected(e, [1], {}, None)


def test_cached_context_is_dropped_when_the_view_changes(encoder: NativeRows | None) -> None:
    formatter = RowFormatter("x", encoder)
    frame = kp_request(9, [("t\"ö", [(0, make_batch(1))])])
    first, _ = lines_of(formatter, entry_for(store_with((1, 2)), frame, now=100.0))
    later, _ = lines_of(formatter, entry_for(store_with((1, 3)), frame, now=100.0))
    assert (first[0]["isr"], first[0]["decision"]) == ([1, 2], FORWARDED)
    assert (later[0]["isr"], later[0]["isr_racks"], later[0]["decision"]) == (
        [1, 3], ["rack-a"], REJECTED)
