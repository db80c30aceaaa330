"""Produce codec properties: random round trips against kafka-python, and malformed input.

Invariant under test: for any request kafka-python can encode, walking then dropping
any set of partitions yields exactly kafka-python's encoding of the kept partitions;
any response kafka-python can encode parses and rebuilds byte for byte, and the
ledger's light reader (produce_results) agrees with the full parser; and no input,
however broken, makes the codec raise anything but ProtocolError.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.produce_frames import (
    VERSIONS,
    TopicSpec,
    kp_decode_request,
    kp_decode_response,
    kp_request,
    kp_request_topics,
    make_batch,
    tid,
)
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError
from protocol.produce import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionResult,
    RecordError,
    TopicKey,
    TopicResult,
    build_produce_response,
    drop_partitions,
    iter_batches,
    parse_produce_response,
    produce_response_endpoints,
    record_count,
    rewrite_produce_response_endpoints,
    walk_produce_request,
)
from protocol.produce_results import produce_results

versions = st.integers(min_value=3, max_value=13)
names = st.text(min_size=1, max_size=12)
records = st.one_of(st.none(), st.binary(max_size=64))
partitions = st.lists(
    st.tuples(st.integers(min_value=-(2**31), max_value=2**31 - 1), records), max_size=5
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, list[TopicSpec], str | None, int]:
    version = draw(versions)
    n = draw(st.integers(min_value=0, max_value=4))
    topics: list[TopicSpec] = []
    for i in range(n):
        key: TopicKey = tid(draw(st.integers(0, 2**128 - 1))) if version >= 13 else draw(names)
        topics.append((key, draw(partitions)))
        del i
    txn = draw(st.one_of(st.none(), names))
    acks = draw(st.sampled_from([-1, 0, 1]))
    return version, topics, txn, acks


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(req=requests(), data=st.data())
def test_walk_and_drop_round_trip(
    req: tuple[int, list[TopicSpec], str | None, int], data: st.DataObject
) -> None:
    version, topics, txn, acks = req
    frame = kp_request(version, topics, transactional_id=txn, acks=acks)
    mv = memoryview(frame)
    header = parse_request_header(mv)
    walked = walk_produce_request(mv, header)
    assert walked.acks == acks and walked.transactional_id == txn
    got = [
        (t.key, [(p.index, None if p.records is None else bytes(mv[p.records[0]:p.records[1]]))
                 for p in t.partitions])
        for t in walked.topics
    ]
    assert got == [(k, list(ps)) for k, ps in topics]
    # drop a random subset of the (topic position, partition position) pairs
    flat = [(ti, pi) for ti, (_, ps) in enumerate(topics) for pi in range(len(ps))]
    chosen = data.draw(st.sets(st.sampled_from(flat)) if flat else st.just(set()))
    drop = {(topics[ti][0], topics[ti][1][pi][0]) for ti, pi in chosen}
    out = drop_partitions(mv, header, walked, drop)
    expected = [(k, [p for p in ps if (k, p[0]) not in drop]) for k, ps in topics]
    expected = [(k, ps) for k, ps in expected if ps]
    assert out == kp_request(version, expected, transactional_id=txn, acks=acks)
    assert kp_request_topics(kp_decode_request(out, version), version) == expected


results = st.builds(
    PartitionResult,
    index=st.integers(-(2**31), 2**31 - 1),
    error_code=st.integers(-(2**15), 2**15 - 1),
    base_offset=st.integers(-(2**63), 2**63 - 1),
    log_append_time_ms=st.integers(-(2**63), 2**63 - 1),
    log_start_offset=st.integers(-(2**63), 2**63 - 1),
    record_errors=st.lists(
        st.builds(RecordError, st.integers(-(2**31), 2**31 - 1), st.one_of(st.none(), names)),
        max_size=3,
    ).map(tuple),
    error_message=st.one_of(st.none(), st.text(max_size=30)),
    current_leader=st.one_of(
        st.none(), st.builds(LeaderIdAndEpoch, st.integers(-1, 9), st.integers(-1, 99))
    ),
)
endpoints = st.lists(
    st.builds(NodeEndpoint, st.integers(0, 99), names, st.integers(0, 65535),
              st.one_of(st.none(), names)),
    max_size=3,
).map(tuple)


def normalise(p: PartitionResult, version: int) -> PartitionResult:
    """What survives encoding at ``version``."""
    return PartitionResult(
        p.index, p.error_code, p.base_offset, p.log_append_time_ms,
        p.log_start_offset if version >= 5 else -1,
        p.record_errors if version >= 8 else (),
        p.error_message if version >= 8 else None,
        p.current_leader if version >= 10 else None,
    )


@settings(max_examples=300, deadline=None)
@given(
    version=versions,
    raw=st.lists(st.tuples(st.integers(0, 2**128 - 1), names,
                           st.lists(results, max_size=4)), max_size=3),
    throttle=st.integers(0, 2**31 - 1),
    eps=endpoints,
)
def test_response_build_parse_round_trip(
    version: int, raw: list[tuple[int, str, list[PartitionResult]]], throttle: int,
    eps: tuple[NodeEndpoint, ...],
) -> None:
    topics = [TopicResult(tid(i) if version >= 13 else n, tuple(ps)) for i, n, ps in raw]
    frame = build_produce_response(version, 5, topics, throttle, eps)
    parsed = parse_produce_response(frame, version)
    assert parsed.throttle_time_ms == throttle
    assert parsed.node_endpoints == (eps if version >= 10 else ())
    assert [t.key for t in parsed.topics] == [t.key for t in topics]
    for pt, t in zip(parsed.topics, topics, strict=True):
        assert pt.partitions == tuple(normalise(p, version) for p in t.partitions)
    # the ledger's light reader agrees with the full parser (the last duplicate wins)
    assert produce_results(frame, version) == {
        (t.key, p.index): (p.error_code, p.base_offset)
        for t in parsed.topics for p in t.partitions}
    # kafka-python agrees on the frame
    d = kp_decode_response(frame, version)
    assert d.throttle_time_ms == throttle
    assert [len(t.partition_responses) for t in d.responses] == [len(t.partitions) for t in topics]
    assert build_produce_response(
        version, 5, parsed.topics, parsed.throttle_time_ms, parsed.node_endpoints
    ) == frame
    # endpoint rewrite keeps everything else
    out = rewrite_produce_response_endpoints(frame, version, lambda n, h, p: (f"x{n}", p + 1))
    if version < 10 or not eps:
        assert out is None
    else:
        assert out is not None
        again = parse_produce_response(out, version)
        assert again.topics == parsed.topics
        assert again.node_endpoints == tuple(
            NodeEndpoint(e.node_id, f"x{e.node_id}", e.port + 1, e.rack) for e in eps
        )


# --- malformed input -------------------------------------------------------------------


def sample_request(version: int) -> bytes:
    key: Any = tid(9) if version >= 13 else "topic"
    return kp_request(
        version,
        [(key, [(0, make_batch(2)), (1, None), (2, b"")]),
         (tid(8) if version >= 13 else "t2", [(7, make_batch(1))])],
        transactional_id="tx",
    )


def sample_response(version: int) -> bytes:
    key: Any = tid(9) if version >= 13 else "topic"
    return build_produce_response(
        version, 1,
        [TopicResult(key, (
            PartitionResult(0, 6, 1, 2, 3, (RecordError(1, "e"),), "m", LeaderIdAndEpoch(1, 2)),
            PartitionResult(1),
        ))],
        7, (NodeEndpoint(1, "h", 9, "r"), NodeEndpoint(2, "h2", 10)),
    )


def walk_frame(frame: bytes) -> None:
    mv = memoryview(frame)
    header = parse_request_header(mv)
    req = walk_produce_request(mv, header)
    for t in req.topics:
        for p in t.partitions:
            record_count(mv, p.records)
            list(iter_batches(mv, p.records))


def all_response_readers(frame: bytes, version: int) -> None:
    parse_produce_response(frame, version)
    produce_results(frame, version)
    produce_response_endpoints(frame, version)
    rewrite_produce_response_endpoints(frame, version, lambda n, h, p: (h, p))


def refix(frame: bytes) -> bytes:
    """The same bytes with a size prefix that matches them."""
    body = frame[4:]
    return len(body).to_bytes(4, "big", signed=True) + body


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_of_a_request_raises_protocol_error(version: int) -> None:
    frame = sample_request(version)
    walk_frame(frame)
    for cut in range(len(frame)):
        for bad in (frame[:cut], refix(frame[:cut]) if cut >= 4 else frame[:cut]):
            with pytest.raises(ProtocolError):
                walk_frame(bad)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_of_a_response_raises_protocol_error(version: int) -> None:
    frame = sample_response(version)
    all_response_readers(frame, version)
    for cut in range(len(frame)):
        for bad in (frame[:cut], refix(frame[:cut]) if cut >= 4 else frame[:cut]):
            with pytest.raises(ProtocolError):
                parse_produce_response(bad, version)
            with pytest.raises(ProtocolError):
                produce_results(bad, version)
            if version >= 10:
                with pytest.raises(ProtocolError):
                    rewrite_produce_response_endpoints(bad, version, lambda n, h, p: (h, p))


@pytest.mark.parametrize("version", VERSIONS)
def test_trailing_bytes_raise(version: int) -> None:
    with pytest.raises(ProtocolError):
        walk_frame(refix(sample_request(version) + b"\x00"))
    with pytest.raises(ProtocolError):
        parse_produce_response(refix(sample_response(version) + b"\x00"), version)
    with pytest.raises(ProtocolError):
        produce_results(refix(sample_response(version) + b"\x00"), version)


@settings(max_examples=400, deadline=None)
@given(version=versions, data=st.data())
def test_mutated_frames_raise_only_protocol_error(version: int, data: st.DataObject) -> None:
    for frame, reader in (
        (sample_request(version), walk_frame),
        (sample_response(version), lambda f: all_response_readers(f, version)),
    ):
        buf = bytearray(frame)
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(4, len(buf) - 1))
            buf[i] = data.draw(st.integers(0, 255))
        try:
            reader(refix(bytes(buf)))
        except ProtocolError:
            pass


@settings(max_examples=400, deadline=None)
@given(version=versions, garbage=st.binary(max_size=200))
def test_garbage_raises_only_protocol_error(version: int, garbage: bytes) -> None:
    head = sample_request(version)[4:]
    header_len = parse_request_header(memoryview(sample_request(version))).body_offset - 4
    for frame in (garbage, refix(b"\x00" * 4 + garbage),
                  refix(b"\x00" * 4 + head[:header_len] + garbage)):
        try:
            walk_frame(frame)
        except ProtocolError:
            pass
        try:
            all_response_readers(frame, version)
        except ProtocolError:
            pass
