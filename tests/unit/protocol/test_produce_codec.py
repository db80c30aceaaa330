"""Produce codec (protocol.produce) against kafka-python's codec, for every version 3-13.

Invariant under test: the walker reads exactly what Kafka's schema says, the
rewriter keeps every byte it does not drop, the builder/parser agree with
kafka-python, and merge answers in request order.
"""

from __future__ import annotations

import uuid

import pytest

from benchmarks.produce_frames import (
    VERSIONS,
    TopicSpec,
    kp_decode_request,
    kp_decode_response,
    kp_request,
    kp_request_topics,
    kp_response,
    kp_topic_key,
    make_batch,
    tid,
)
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError
from protocol.produce import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionResult,
    ProduceResponse,
    RecordError,
    TopicKey,
    TopicResult,
    build_produce_response,
    drop_partitions,
    iter_batches,
    merge_produce_responses,
    parse_produce_response,
    peek_produce_acks,
    produce_response_endpoints,
    producer_info,
    record_count,
    record_counts,
    rewrite_produce_response_endpoints,
    rewrite_produce_response_endpoints_seen,
    walk_produce_request,
)


def key_for(version: int, name: str, n: int) -> TopicKey:
    return tid(n) if version >= 13 else name


def sample_topics(version: int) -> list[TopicSpec]:
    b1 = make_batch(3, producer_id=77, producer_epoch=2, base_sequence=10)
    b2 = make_batch(2, producer_id=77, producer_epoch=2, base_sequence=13)
    return [
        (key_for(version, "orders", 1), [(0, b1), (1, b1 + b2), (2, None), (5, b"")]),
        (key_for(version, "payments", 2), [(3, b2)]),
        (key_for(version, "ünï-cødé", 3), [(0, make_batch(1)), (1, make_batch(4))]),
    ]


def walk(frame: bytes):  # type: ignore[no-untyped-def]
    mv = memoryview(frame)
    header = parse_request_header(mv)
    return mv, header, walk_produce_request(mv, header)


# --- walker ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("txn", [None, "txn-1"])
def test_walk_reads_what_kafka_python_encoded(version: int, txn: str | None) -> None:
    topics = sample_topics(version)
    frame = kp_request(version, topics, acks=-1, timeout_ms=1234, transactional_id=txn)
    mv, header, req = walk(frame)
    assert header.api_version == version and header.correlation_id == 42
    assert req.version == version
    assert req.acks == -1 and req.timeout_ms == 1234 and req.transactional_id == txn
    assert [t.key for t in req.topics] == [k for k, _ in topics]
    for t, (key, parts) in zip(req.topics, topics, strict=True):
        if version >= 13:
            assert t.topic_id == key and t.name is None
        else:
            assert t.name == key and t.topic_id is None
        assert [p.index for p in t.partitions] == [i for i, _ in parts]
        for p, (_, records) in zip(t.partitions, parts, strict=True):
            if records is None:
                assert p.records is None
            else:
                assert p.records is not None
                assert bytes(mv[p.records[0] : p.records[1]]) == records
        assert t.span[0] < t.partitions_span[0] < t.partitions_span[1] <= t.span[1]
    assert req.partition_count == 7
    assert list(req.partition_keys())[:2] == [(topics[0][0], 0), (topics[0][0], 1)]
    assert req.topics_span[1] <= len(frame)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("acks", [-1, 0, 1])
@pytest.mark.parametrize("txn", [None, "", "tx-123"])
def test_walk_and_peek_acks(version: int, acks: int, txn: str | None) -> None:
    frame = kp_request(version, [("t" if version < 13 else tid(1), [(0, make_batch(1))])],
                       acks=acks, transactional_id=txn)
    mv, header, req = walk(frame)
    assert req.acks == acks and req.transactional_id == txn
    assert peek_produce_acks(mv, header) == acks
    with pytest.raises(ProtocolError):
        peek_produce_acks(mv[: header.body_offset + 1], header)


def test_walk_null_client_id_and_empty_topics() -> None:
    for version in VERSIONS:
        _, header, req = walk(kp_request(version, [], client_id=None))
        assert header.client_id is None and req.topics == ()


def test_record_set_helpers() -> None:
    b1 = make_batch(3, producer_id=77, producer_epoch=2, base_sequence=10)
    b2 = make_batch(2, producer_id=77, producer_epoch=2, base_sequence=13)
    frame = kp_request(9, [("t", [(0, b1 + b2), (1, None), (2, b""), (3, make_batch(5))])])
    mv, _, req = walk(frame)
    p = req.topics[0].partitions
    assert record_count(mv, p[0].records) == 5
    assert producer_info(mv, p[0].records) == (77, 2, 10)
    batches = list(iter_batches(mv, p[0].records))
    assert [b.record_count for b in batches] == [3, 2]
    assert [b.base_sequence for b in batches] == [10, 13]
    assert sum(b.size for b in batches) == len(b1) + len(b2)
    assert not batches[0].is_transactional and batches[0].compression == 0
    assert record_count(mv, p[1].records) == 0 and producer_info(mv, p[1].records) is None
    assert record_count(mv, p[2].records) == 0 and producer_info(mv, p[2].records) is None
    assert record_count(mv, p[3].records) == 5
    assert producer_info(mv, p[3].records) == (-1, -1, -1)


def test_record_counts_reads_each_set_and_marks_unreadable_ones() -> None:
    b = make_batch(2)
    frame = kp_request(9, [("t", [(0, make_batch(3) + b), (1, None), (2, b""), (3, b),
                                  (4, b[:-1] + b"")])])
    mv, _, req = walk(frame)
    spans = [p.records for p in req.topics[0].partitions]
    bad = bytearray(b)
    bad[16] = 1  # magic 1: not a v2 batch
    assert record_counts(mv, spans) == [5, 0, 0, 2, -1]
    assert record_counts(bytes(bad), [(0, len(bad))]) == [-1]
    assert record_counts(mv, [(0, len(mv) + 1)]) == [-1]


def test_record_set_helpers_reject_bad_batches() -> None:
    b = bytearray(make_batch(2))
    for bad in (b[:-1], b[:30], b + b"\x00"):
        with pytest.raises(ProtocolError):
            record_count(bytes(bad), (0, len(bad)))
    magic1 = bytearray(b)
    magic1[16] = 1
    with pytest.raises(ProtocolError):
        record_count(bytes(magic1), (0, len(magic1)))
    short = bytearray(b)
    short[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(ProtocolError):
        list(iter_batches(bytes(short), (0, len(short))))
    with pytest.raises(ProtocolError):
        producer_info(bytes(b), (0, len(b) + 1))


def test_walk_rejects_wrong_api_or_version() -> None:
    frame = bytearray(kp_request(9, [("t", [(0, b"")])]))
    mv = memoryview(bytes(frame))
    header = parse_request_header(mv)
    for field, value in (("api_key", 1), ("api_version", 2), ("api_version", 14)):
        bad = type(header)(**{**{s: getattr(header, s) for s in header.__slots__}, field: value})
        with pytest.raises(ProtocolError):
            walk_produce_request(mv, bad)


# --- golden bytes ----------------------------------------------------------------------

# Produce v3, correlation id 7, client id "c", transactional id null, acks -1,
# timeout 1000, one topic "t", partition 0 with the 3 bytes "abc" as records.
GOLDEN_V3 = bytes.fromhex(
    "00000029"  # size 41
    "0000" "0003" "00000007" "0001" "63"  # api key 0, version 3, corr 7, client id "c"
    "ffff"  # transactional id null
    "ffff" "000003e8"  # acks -1, timeout 1000
    "00000001" "0001" "74"  # 1 topic, name "t"
    "00000001" "00000000" "00000003" "616263"  # 1 partition, index 0, records "abc"
)

# Same at v9 (flexible: compact lengths + empty tagged fields; header v2).
GOLDEN_V9 = bytes.fromhex(
    "00000022" "0000" "0009" "00000007" "0001" "63" "00"  # header v2, no tags
    "00" "ffff" "000003e8"  # compact null txn id, acks, timeout
    "02" "02" "74"  # 1 topic, name "t"
    "02" "00000000" "04" "616263" "00"  # 1 partition, index 0, records "abc", tags
    "00" "00"  # topic tags, request tags
)


@pytest.mark.parametrize(
    ("version", "golden", "part_span", "topic_span"),
    [(3, GOLDEN_V3, (34, 45), (27, 45)), (9, GOLDEN_V9, (27, 36), (24, 37))],
)
def test_golden_request(
    version: int, golden: bytes, part_span: tuple[int, int], topic_span: tuple[int, int]
) -> None:
    assert kp_request(version, [("t", [(0, b"abc")])], timeout_ms=1000, correlation_id=7,
                      client_id="c") == golden
    mv, header, req = walk(golden)
    assert req.acks == -1 and req.timeout_ms == 1000 and req.transactional_id is None
    (t,) = req.topics
    (p,) = t.partitions
    assert t.name == "t" and p.index == 0
    assert p.records is not None and bytes(mv[p.records[0] : p.records[1]]) == b"abc"
    assert p.span == part_span and t.span == topic_span


def test_golden_response_v9() -> None:
    frame = build_produce_response(
        9, 7, [TopicResult("t", (PartitionResult(0, 19, error_message="x"),))], 5
    )
    assert frame == bytes.fromhex(
        "00000031" "00000007" "00"  # size 49, corr 7, header tags
        "02" "02" "74"  # 1 topic "t"
        "02" "00000000" "0013"  # 1 partition, index 0, error 19
        "ffffffffffffffff" "ffffffffffffffff" "ffffffffffffffff"  # base, append, start
        "01" "02" "78" "00"  # no record errors, message "x", partition tags
        "00" "00000005" "00"  # topic tags, throttle 5, response tags
    )


# --- rewriter --------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_partitions_every_version(version: int) -> None:
    topics = sample_topics(version)
    frame = kp_request(version, topics, transactional_id="tx")
    mv, header, req = walk(frame)
    k0, k1, k2 = (k for k, _ in topics)
    drop = {(k0, 1), (k0, 2), (k1, 3), (k2, 99), ("nope", 0)}
    out = drop_partitions(mv, header, req, drop)
    assert out[4 : header.body_offset] == frame[4 : header.body_offset]
    expected = [
        (k0, [p for p in topics[0][1] if p[0] not in (1, 2)]),
        topics[2],
    ]
    decoded = kp_decode_request(out, version)
    assert decoded.header.correlation_id == 42
    assert decoded.transactional_id == "tx" and decoded.acks == -1
    assert kp_request_topics(decoded, version) == expected
    assert out == kp_request(version, expected, transactional_id="tx")
    # and it walks again
    _, _, req2 = walk(out)
    assert [(t.key, [p.index for p in t.partitions]) for t in req2.topics] == [
        (k, [i for i, _ in ps]) for k, ps in expected
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_drop_nothing_is_identity_and_drop_all_is_empty(version: int) -> None:
    topics = sample_topics(version)
    frame = kp_request(version, topics)
    mv, header, req = walk(frame)
    assert drop_partitions(mv, header, req, set()) == frame
    everything = set(req.partition_keys())
    out = drop_partitions(mv, header, req, everything)
    assert out == kp_request(version, [])


def test_drop_keeps_unknown_tagged_fields() -> None:
    # v9 frame with tagged fields in the header, partition, topic and request
    body = bytes.fromhex(
        "00" "ffff" "000003e8"
        "03"
        "02" "61" "03" "00000000" "02" "41" "01" "07" "01" "ee"  # topic a, p0 with tag 7
        "00000001" "02" "42" "00"  # p1
        "01" "05" "02" "abcd"  # topic tag 5
        "02" "62" "02" "00000000" "02" "43" "00" "00"  # topic b
        "01" "09" "00"  # request tag 9, empty
    )
    head = bytes.fromhex("0000" "0009" "00000001" "0001" "63" "01" "03" "01" "ff")
    frame = len(head + body).to_bytes(4, "big") + head + body
    mv, header, req = walk(frame)
    assert [(t.name, [p.index for p in t.partitions]) for t in req.topics] == [
        ("a", [0, 1]), ("b", [0])
    ]
    out = drop_partitions(mv, header, req, {("a", 1), ("b", 0)})
    expected_body = bytes.fromhex(
        "00" "ffff" "000003e8"
        "02"
        "02" "61" "02" "00000000" "02" "41" "01" "07" "01" "ee"
        "01" "05" "02" "abcd"
        "01" "09" "00"
    )
    assert out == len(head + expected_body).to_bytes(4, "big") + head + expected_body


# --- response builder / parser ---------------------------------------------------------


def rich_results(version: int) -> list[TopicResult]:
    leader = LeaderIdAndEpoch(3, 17)
    return [
        TopicResult(
            key_for(version, "orders", 1),
            (
                PartitionResult(0, 0, 100, 1_700_000_000_000, 50),
                PartitionResult(
                    2, 87, -1, -1, -1, (RecordError(0, "bad"), RecordError(4, None)), "invalid"
                ),
                PartitionResult(1, 6, current_leader=leader),
            ),
        ),
        TopicResult(key_for(version, "payments", 2), (PartitionResult(7, 19, error_message=
                                                                      "NOT_ENOUGH_RACKS: x"),)),
    ]


def expected_fields(p: PartitionResult, version: int) -> dict[str, object]:
    return {
        "index": p.index,
        "error_code": p.error_code,
        "base_offset": p.base_offset,
        "log_append_time_ms": p.log_append_time_ms,
        "log_start_offset": p.log_start_offset if version >= 5 else -1,
        "record_errors": [(e.batch_index, e.message) for e in p.record_errors]
        if version >= 8 else [],
        "error_message": p.error_message if version >= 8 else None,
        "current_leader": (p.current_leader.leader_id, p.current_leader.leader_epoch)
        if version >= 10 and p.current_leader is not None else None,
    }


def kp_fields(p: object) -> dict[str, object]:
    cl = p.current_leader  # type: ignore[attr-defined]
    return {
        "index": p.index,  # type: ignore[attr-defined]
        "error_code": p.error_code,  # type: ignore[attr-defined]
        "base_offset": p.base_offset,  # type: ignore[attr-defined]
        "log_append_time_ms": p.log_append_time_ms,  # type: ignore[attr-defined]
        "log_start_offset": p.log_start_offset,  # type: ignore[attr-defined]
        "record_errors": [
            (e.batch_index, e.batch_index_error_message)
            for e in p.record_errors  # type: ignore[attr-defined]
        ],
        "error_message": p.error_message,  # type: ignore[attr-defined]
        "current_leader": None if cl is None else (cl.leader_id, cl.leader_epoch),
    }


def kp_key(t: object, version: int) -> TopicKey:
    return kp_topic_key(t, version)


ENDPOINTS = (NodeEndpoint(3, "broker-3.internal", 9093, "az-b"), NodeEndpoint(4, "b4", 19092))


@pytest.mark.parametrize("version", VERSIONS)
def test_build_response_decodes_with_kafka_python(version: int) -> None:
    topics = rich_results(version)
    frame = build_produce_response(version, 99, topics, 250, ENDPOINTS)
    d = kp_decode_response(frame, version)
    assert d.header.correlation_id == 99
    assert d.throttle_time_ms == 250
    assert [kp_key(t, version) for t in d.responses] == [t.key for t in topics]
    for kt, t in zip(d.responses, topics, strict=True):
        assert [kp_fields(p) for p in kt.partition_responses] == [
            expected_fields(p, version) for p in t.partitions
        ]
    if version >= 10:
        assert [(e.node_id, e.host, e.port, e.rack) for e in d.node_endpoints] == [
            (e.node_id, e.host, e.port, e.rack) for e in ENDPOINTS
        ]
    # and our parser reads it back (modulo fields the version lacks)
    parsed = parse_produce_response(memoryview(frame), version)
    assert parsed.throttle_time_ms == 250
    assert parsed.node_endpoints == (ENDPOINTS if version >= 10 else ())
    for pt, t in zip(parsed.topics, topics, strict=True):
        assert pt.key == t.key
        assert [expected_fields(p, version) for p in pt.partitions] == [
            expected_fields(p, version) for p in t.partitions
        ]


def test_build_rejects_wrong_key_type() -> None:
    with pytest.raises(ValueError):
        build_produce_response(13, 1, [TopicResult("name", (PartitionResult(0),))])
    with pytest.raises(ValueError):
        build_produce_response(12, 1, [TopicResult(tid(1), (PartitionResult(0),))])
    with pytest.raises(ValueError):
        build_produce_response(2, 1, [])


def kp_parts_spec(version: int) -> list[tuple[TopicKey, list[dict[str, object]]]]:
    parts: list[dict[str, object]] = [
        {"index": 0, "error_code": 0, "base_offset": 10, "log_append_time_ms": 5,
         "log_start_offset": 2},
        {"index": 3, "error_code": 6, "base_offset": -1},
    ]
    if version >= 8:
        parts.append({"index": 1, "error_code": 87, "base_offset": -1,
                      "record_errors": [(0, "m0"), (2, None)], "error_message": "boom"})
    if version >= 10:
        parts[1]["current_leader"] = (5, 9)
    return [(key_for(version, "orders", 1), parts), (key_for(version, "x", 2), [])]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("with_endpoints", [False, True])
def test_parse_reads_kafka_python(version: int, with_endpoints: bool) -> None:
    spec = kp_parts_spec(version)
    eps = [{"node_id": 5, "host": "10.0.0.5", "port": 9092, "rack": "az-a"},
           {"node_id": 6, "host": "h6", "port": 9094, "rack": None}]
    frame = kp_response(version, spec, throttle_time_ms=33,
                        node_endpoints=eps if with_endpoints and version >= 10 else None)
    resp = parse_produce_response(memoryview(frame), version)
    assert resp.throttle_time_ms == 33
    assert [t.key for t in resp.topics] == [k for k, _ in spec]
    d = kp_decode_response(frame, version)
    for pt, kt in zip(resp.topics, d.responses, strict=True):
        assert [expected_fields(p, version) for p in pt.partitions] == [
            kp_fields(p) for p in kt.partition_responses
        ]
    if with_endpoints and version >= 10:
        assert resp.node_endpoints == (
            NodeEndpoint(5, "10.0.0.5", 9092, "az-a"), NodeEndpoint(6, "h6", 9094, None)
        )
        assert resp.topics[0].partitions[1].current_leader == LeaderIdAndEpoch(5, 9)
    else:
        assert resp.node_endpoints == ()
    # rebuilding what we parsed gives kafka-python's bytes back
    assert build_produce_response(
        version, 42, resp.topics, resp.throttle_time_ms, resp.node_endpoints, resp.unknown_tags
    ) == frame


def test_parse_keeps_unknown_tags_and_rebuilds_them() -> None:
    base = build_produce_response(
        10, 1, [TopicResult("t", (PartitionResult(0, unknown_tags=((3, b"\x01\x02"),)),),
                            ((8, b""),))], unknown_tags=((2, b"zz"),)
    )
    resp = parse_produce_response(base, 10)
    assert resp.unknown_tags == ((2, b"zz"),)
    assert resp.topics[0].unknown_tags == ((8, b""),)
    assert resp.topics[0].partitions[0].unknown_tags == ((3, b"\x01\x02"),)
    assert build_produce_response(10, 1, resp.topics, unknown_tags=resp.unknown_tags) == base
    # tag 0 in a v9 partition is not CurrentLeader (that is v10+): kept raw
    v9 = build_produce_response(9, 1, [TopicResult("t", (PartitionResult(
        0, unknown_tags=((0, b"\x00\x00\x00\x01\x00\x00\x00\x02\x00"),)),))])
    p = parse_produce_response(v9, 9).topics[0].partitions[0]
    assert p.current_leader is None and p.unknown_tags[0][0] == 0


# --- merge -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_merge_in_request_order(version: int) -> None:
    topics = sample_topics(version)
    frame = kp_request(version, topics)
    mv, header, req = walk(frame)
    k0, k1, k2 = (k for k, _ in topics)
    rejected = PartitionResult(0, 19, error_message="NOT_ENOUGH_RACKS: seen [a], need 2")
    synthetic = {(k0, 1): rejected, (k1, 3): rejected, (k2, 1): rejected}
    # upstream answers the forwarded ones, in a scrambled order
    upstream = ProduceResponse(
        (
            TopicResult(k2, (PartitionResult(0, 0, 500, 1, 2),)),
            TopicResult(k0, (
                PartitionResult(5, 0, 70),
                PartitionResult(2, 0, 60),
                PartitionResult(0, 6, current_leader=LeaderIdAndEpoch(4, 1)),
            )),
        ),
        throttle_time_ms=12,
        node_endpoints=(NodeEndpoint(4, "b4", 9092, "r2"),),
    )
    out = merge_produce_responses(version, 42, req, upstream, synthetic)
    d = kp_decode_response(out, version)
    assert d.header.correlation_id == 42 and d.throttle_time_ms == 12
    got = [(kp_key(t, version), [(p.index, p.error_code, p.base_offset)
                                 for p in t.partition_responses]) for t in d.responses]
    assert got == [
        (k0, [(0, 6, -1), (1, 19, -1), (2, 0, 60), (5, 0, 70)]),
        (k1, [(3, 19, -1)]),
        (k2, [(0, 0, 500), (1, 19, -1)]),
    ]
    if version >= 8:
        assert d.responses[1].partition_responses[0].error_message.startswith(
            "NOT_ENOUGH_RACKS:")
    if version >= 10:
        assert d.responses[0].partition_responses[0].current_leader.leader_id == 4
        assert [e.host for e in d.node_endpoints] == ["b4"]


def test_merge_without_upstream_and_with_missing_partitions() -> None:
    frame = kp_request(9, [("a", [(0, b""), (1, b"")]), ("b", [(2, b"")])])
    _, _, req = walk(frame)
    rej = PartitionResult(99, 19)
    out = merge_produce_responses(9, 5, req, None, {("a", 0): rej, ("a", 1): rej, ("b", 2): rej})
    resp = parse_produce_response(out, 9)
    assert [(t.key, [(p.index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
        ("a", [(0, 19), (1, 19)]), ("b", [(2, 19)])
    ]
    up = ProduceResponse((TopicResult("a", (PartitionResult(1, 0, 9),)),), 3)
    out = merge_produce_responses(9, 5, req, up, {("a", 0): rej})
    resp = parse_produce_response(out, 9)
    assert [(t.key, [(p.index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
        ("a", [(0, 19), (1, 0)]), ("b", [(2, 13)])  # b/2 unanswered: NETWORK_EXCEPTION
    ]
    assert resp.throttle_time_ms == 3


# --- NodeEndpoints ---------------------------------------------------------------------


@pytest.mark.parametrize("version", range(10, 14))
def test_rewrite_endpoints(version: int) -> None:
    eps = [{"node_id": 5, "host": "10.0.0.5", "port": 9092, "rack": "az-a"},
           {"node_id": 6, "host": "h6", "port": 9094, "rack": None}]
    spec = kp_parts_spec(version)
    frame = kp_response(version, spec, throttle_time_ms=4, node_endpoints=eps,
                        correlation_id=77)
    calls = []

    def mapper(node_id: int, host: str, port: int) -> tuple[str, int]:
        calls.append((node_id, host, port))
        return f"proxy.local-{node_id}", 30000 + node_id

    out, seen = rewrite_produce_response_endpoints_seen(memoryview(frame), version, mapper)
    assert out is not None
    assert calls == [(5, "10.0.0.5", 9092), (6, "h6", 9094)]
    assert seen == (NodeEndpoint(5, "10.0.0.5", 9092, "az-a"), NodeEndpoint(6, "h6", 9094, None))
    assert produce_response_endpoints(frame, version) == seen
    expected = kp_response(version, spec, throttle_time_ms=4, correlation_id=77, node_endpoints=[
        {"node_id": 5, "host": "proxy.local-5", "port": 30005, "rack": "az-a"},
        {"node_id": 6, "host": "proxy.local-6", "port": 30006, "rack": None},
    ])
    assert out == expected
    d = kp_decode_response(out, version)
    assert [(e.host, e.port) for e in d.node_endpoints] == [
        ("proxy.local-5", 30005), ("proxy.local-6", 30006)
    ]
    assert rewrite_produce_response_endpoints(frame, version, lambda n, h, p: (h, p)) == frame


@pytest.mark.parametrize("version", VERSIONS)
def test_rewrite_endpoints_none_when_absent(version: int) -> None:
    frame = kp_response(version, kp_parts_spec(version))

    def mapper(node_id: int, host: str, port: int) -> tuple[str, int]:
        raise AssertionError("not called")

    assert rewrite_produce_response_endpoints(frame, version, mapper) is None
    assert produce_response_endpoints(frame, version) == ()


def test_rewrite_endpoints_keeps_other_top_level_tags() -> None:
    frame = build_produce_response(
        12, 3, [TopicResult("t", (PartitionResult(0, 6, current_leader=LeaderIdAndEpoch(1, 2)),))],
        node_endpoints=(NodeEndpoint(1, "a", 1, "r"),), unknown_tags=((1, b"x"), (7, b"yy")),
    )
    out = rewrite_produce_response_endpoints(frame, 12, lambda n, h, p: ("longer-host", 2))
    assert out is not None
    resp = parse_produce_response(out, 12)
    assert resp.node_endpoints == (NodeEndpoint(1, "longer-host", 2, "r"),)
    assert resp.unknown_tags == ((1, b"x"), (7, b"yy"))
    assert resp.topics[0].partitions[0].current_leader == LeaderIdAndEpoch(1, 2)


def test_uuid_helper() -> None:
    assert tid(5) == uuid.UUID(int=5).bytes


@pytest.mark.parametrize("version", range(3, 14))
@pytest.mark.parametrize("acks", [-1, 0, 1])
@pytest.mark.parametrize("txn", [None, "txn-1"])
def test_peek_acks_agrees_with_the_header_based_peek(version: int, acks: int,
                                                      txn: str | None) -> None:
    from protocol.produce import peek_acks

    key: TopicKey = tid(1) if version >= 13 else "t"
    frame = kp_request(version, [(key, [(0, make_batch(1))])], acks=acks, transactional_id=txn)
    assert peek_acks(frame) == acks == peek_produce_acks(frame, parse_request_header(frame))
    for cut in range(len(frame)):  # a cut frame gives the right acks or ProtocolError
        try:
            assert peek_acks(frame[:cut]) == acks
        except ProtocolError:
            pass
