"""Metadata response codec: address rewriting and the cluster-view reader,
checked against kafka-python's codec for every version 0-13."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import MetadataResponse

from protocol.addresses import BrokerAddress
from protocol.metadata import (
    MetadataSnapshot,
    PartitionMetadata,
    TopicMetadata,
    read_metadata,
    rewrite_metadata_brokers,
)
from protocol.primitives import ProtocolError
from tests.unit.protocol._codec_checks import (
    check_corruptions,
    check_truncations,
    mapper,
    ok_or_protocol_error,
    with_size,
)

VERSIONS = range(14)
_B = MetadataResponse.MetadataResponseBroker
_T = MetadataResponse.MetadataResponseTopic
_P = _T.MetadataResponsePartition


@dataclass
class Spec:
    """A version-neutral description of a Metadata response."""

    brokers: list[tuple[int, str, int, str | None]]
    topics: list[tuple[int, str | None, bytes, bool, list[tuple[Any, ...]], set[int] | None]]
    cluster_id: str | None = "cluster-1"
    controller_id: int = 2
    throttle: int = 7
    cluster_ops: set[int] | None = field(default_factory=lambda: {3, 4})
    error_code: int = 0


def encode(spec: Spec, version: int, corr: int = 42) -> bytes:
    v = version
    brokers = [_B(version=v, node_id=n, host=h, port=p, rack=r) for n, h, p, r in spec.brokers]
    topics = []
    for err, name, tid, internal, parts, ops in spec.topics:
        partitions = [
            _P(
                version=v,
                error_code=pe,
                partition_index=idx,
                leader_id=leader,
                leader_epoch=epoch,
                replica_nodes=list(reps),
                isr_nodes=list(isr),
                offline_replicas=list(off),
            )
            for pe, idx, leader, epoch, reps, isr, off in parts
        ]
        topics.append(
            _T(
                version=v,
                error_code=err,
                name=name,
                topic_id=uuid.UUID(bytes=tid),
                is_internal=internal,
                partitions=partitions,
                authorized_operations=ops,
            )
        )
    resp = MetadataResponse(
        version=v,
        throttle_time_ms=spec.throttle,
        brokers=brokers,
        cluster_id=spec.cluster_id,
        controller_id=spec.controller_id,
        topics=topics,
        authorized_operations=spec.cluster_ops,
        error_code=spec.error_code,
    )
    resp.with_header(correlation_id=corr)
    return bytes(resp.encode(header=True, framed=True))


def decode(frame: bytes, version: int) -> Any:
    return MetadataResponse.decode(frame, version=version, header=True, framed=True)


def expected_snapshot(spec: Spec, v: int) -> MetadataSnapshot:
    brokers = tuple(BrokerAddress(n, h, p, r if v >= 1 else None) for n, h, p, r in spec.brokers)
    topics = []
    for err, name, tid, internal, parts, _ops in spec.topics:
        partitions = tuple(
            PartitionMetadata(
                idx,
                pe,
                leader,
                epoch if v >= 7 else -1,
                tuple(reps),
                tuple(isr),
                tuple(off) if v >= 5 else (),
            )
            for pe, idx, leader, epoch, reps, isr, off in parts
        )
        topics.append(
            TopicMetadata(
                name, tid if v >= 10 else None, err, internal if v >= 1 else False, partitions
            )
        )
    return MetadataSnapshot(
        brokers=brokers,
        cluster_id=spec.cluster_id if v >= 2 else None,
        controller_id=spec.controller_id if v >= 1 else -1,
        topics=tuple(topics),
        throttle_time_ms=spec.throttle if v >= 3 else 0,
        error_code=spec.error_code if v >= 13 else 0,
    )


def sample_spec() -> Spec:
    parts = [
        (0, 0, 1, 5, [1, 2, 3], [1, 2], []),
        (9, 1, 2, 6, [2, 3, 1], [2], [3]),
        (0, 2, -1, -1, [], [], []),
    ]
    return Spec(
        brokers=[
            (1, "kafka-1.internal.example", 9092, "rack-a"),
            (2, "10.0.0.2", 9093, None),
            (3, "kafka-3", 19092, "r\u00e9ck-\u00fc"),
        ],
        topics=[
            (0, "orders", uuid.uuid4().bytes, False, parts, {3, 4, 5}),
            (0, "__consumer_offsets", uuid.uuid4().bytes, True, parts[:1], None),
            (3, "missing", bytes(16), False, [], None),
        ],
    )


def apply_mapper_to_decoded(resp: Any) -> None:
    for b in resp.brokers:
        b.host, b.port = mapper(b.node_id, b.host, b.port)


@pytest.mark.parametrize("version", VERSIONS)
def test_rewrite_matches_oracle(version: int) -> None:
    spec = sample_spec()
    frame = encode(spec, version)
    out, brokers = rewrite_metadata_brokers(memoryview(frame), version, mapper)
    assert isinstance(out, bytes)
    expected = decode(frame, version)
    apply_mapper_to_decoded(expected)
    got = decode(out, version)
    assert got == expected
    assert got.header.correlation_id == 42
    assert brokers == list(expected_snapshot(spec, version).brokers)
    for _, host, _, _ in spec.brokers:
        assert host.encode() not in out


@pytest.mark.parametrize("version", VERSIONS)
def test_read_matches_what_was_encoded(version: int) -> None:
    spec = sample_spec()
    frame = encode(spec, version)
    assert read_metadata(memoryview(frame), version) == expected_snapshot(spec, version)
    assert read_metadata(bytearray(frame), version) == expected_snapshot(spec, version)


def test_read_v13_error_code_and_null_names() -> None:
    spec = sample_spec()
    spec.error_code = 58
    spec.topics.append((100, None, uuid.uuid4().bytes, False, [], None))
    for v in (12, 13):
        snap = read_metadata(encode(spec, v), v)
        assert snap == expected_snapshot(spec, v)
        assert TopicMetadata(*snap.topics[-1]).name is None


def test_rewrite_preserves_broker_tagged_fields() -> None:
    # v9 broker with an unknown tagged field (tag 7, 2 bytes) after the rack
    body = (
        b"\x00\x00\x00\x00"  # throttle
        + b"\x02"  # 1 broker
        + b"\x00\x00\x00\x05" + b"\x02h" + b"\x00\x00\x00\x09" + b"\x02r"
        + b"\x01\x07\x02\xab\xcd"  # tagged fields
        + b"\x00"  # cluster id null
        + b"\x00\x00\x00\x05"  # controller
        + b"\x01"  # no topics
        + b"\x80\x00\x00\x00"  # cluster authorized ops
        + b"\x00"  # tagged fields
    )
    frame = with_size(b"\x00\x00\x00\x01\x00" + body)
    out, brokers = rewrite_metadata_brokers(frame, 9, mapper)
    assert brokers == [BrokerAddress(5, "h", 9, "r")]
    assert b"\x02r\x01\x07\x02\xab\xcd" in out
    assert out == with_size(b"\x00\x00\x00\x01\x00" + body.replace(
        b"\x02h\x00\x00\x00\x09", b"\x0eproxy-5.local\x00\x00\x75\x35"
    ))
    assert read_metadata(out, 9).brokers == (BrokerAddress(5, "proxy-5.local", 30005, "r"),)


def test_golden_v0() -> None:
    frame = bytes.fromhex(
        "0000003a"  # size: 58
        "00000001"  # correlation id
        "00000001" "00000001" "000168" "00000009"  # brokers: [1, "h", 9]
        "00000001" "0000" "000174"  # topics: [err 0, "t",
        "00000001" "0000" "00000000" "00000001"  # partitions: [err 0, idx 0, leader 1,
        "00000001" "00000001" "00000001" "00000001"  # replicas [1], isr [1]]]
    )
    assert len(frame) == 58 + 4
    out, brokers = rewrite_metadata_brokers(frame, 0, lambda n, h, p: ("p", 7))
    assert brokers == [BrokerAddress(1, "h", 9, None)]
    assert out == frame.replace(bytes.fromhex("00016800000009"), bytes.fromhex("00017000000007"))
    assert read_metadata(frame, 0) == MetadataSnapshot(
        brokers=(BrokerAddress(1, "h", 9, None),),
        cluster_id=None,
        controller_id=-1,
        topics=(
            TopicMetadata("t", None, 0, False, (PartitionMetadata(0, 0, 1, -1, (1,), (1,), ()),)),
        ),
    )
    assert decode(frame, 0).brokers[0].host == "h"


@pytest.mark.parametrize("version", [0, 1, 5, 7, 8, 9, 10, 12, 13])
def test_truncated_frames_raise_protocol_error(version: int) -> None:
    spec = sample_spec()
    spec.topics = spec.topics[:1]
    frame = encode(spec, version)
    check_truncations(lambda b: read_metadata(b, version), frame, strict=True)
    check_truncations(lambda b: rewrite_metadata_brokers(b, version, mapper), frame, strict=False)


@pytest.mark.parametrize("version", [1, 9, 12])
def test_corrupted_bytes_raise_protocol_error_only(version: int) -> None:
    spec = sample_spec()
    spec.topics = spec.topics[:1]
    frame = encode(spec, version)
    check_corruptions(lambda b: read_metadata(b, version), frame)
    check_corruptions(lambda b: rewrite_metadata_brokers(b, version, mapper), frame)


def test_bad_version_and_size() -> None:
    frame = encode(sample_spec(), 12)
    for bad in (-1, 14):
        with pytest.raises(ProtocolError):
            read_metadata(frame, bad)
        with pytest.raises(ProtocolError):
            rewrite_metadata_brokers(frame, bad, mapper)
    with pytest.raises(ProtocolError):
        read_metadata(frame + b"\x00", 12)
    with pytest.raises(ProtocolError):
        read_metadata(with_size(frame[4:] + b"\x00"), 12)  # trailing byte


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 13))
def test_garbage_raises_protocol_error_only(data: bytes, version: int) -> None:
    ok_or_protocol_error(lambda b: read_metadata(b, version), data)
    ok_or_protocol_error(lambda b: rewrite_metadata_brokers(b, version, mapper), data)
    framed = with_size(data)
    ok_or_protocol_error(lambda b: read_metadata(b, version), framed)
    ok_or_protocol_error(lambda b: rewrite_metadata_brokers(b, version, mapper), framed)


_ids = st.integers(-1, 2**31 - 1)
_text = st.text(max_size=12)
_replicas = st.lists(st.integers(0, 2**31 - 1), max_size=5)
_partition = st.tuples(
    st.integers(-1, 120), st.integers(0, 2**31 - 1), _ids, _ids, _replicas, _replicas, _replicas
)
_topic = st.tuples(
    st.integers(0, 120),
    _text,
    st.binary(min_size=16, max_size=16),
    st.booleans(),
    st.lists(_partition, max_size=6),
    st.none(),
)
_broker = st.tuples(st.integers(0, 2**31 - 1), _text, st.integers(0, 65535), st.none() | _text)
_spec = st.builds(
    Spec,
    brokers=st.lists(_broker, max_size=6),
    topics=st.lists(_topic, max_size=5),
    cluster_id=st.none() | _text,
    controller_id=_ids,
    throttle=st.integers(0, 2**31 - 1),
    cluster_ops=st.none(),
    error_code=st.integers(0, 120),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_spec, st.integers(0, 13), st.integers(-(2**31), 2**31 - 1))
def test_roundtrip_random(spec: Spec, version: int, corr: int) -> None:
    if version < 2 and spec.cluster_id is None:
        spec.cluster_id = "x"
    frame = encode(spec, version, corr)
    assert read_metadata(frame, version) == expected_snapshot(spec, version)
    out, brokers = rewrite_metadata_brokers(frame, version, mapper)
    assert brokers == list(expected_snapshot(spec, version).brokers)
    expected = decode(frame, version)
    apply_mapper_to_decoded(expected)
    assert decode(out, version) == expected
    snap = read_metadata(out, version)
    assert [(b.host, b.port) for b in snap.brokers] == [
        mapper(n, h, p) for n, h, p, _ in spec.brokers
    ]


@pytest.mark.parametrize("version", [4, 8, 9, 12])
def test_long_replica_lists_take_the_general_path(version: int) -> None:
    many = list(range(300))
    spec = sample_spec()
    spec.topics = [
        (0, "wide", uuid.uuid4().bytes, False, [
            (0, 0, 1, 1, many[:130], many[:127], many[:126]),
            (0, 1, 1, 1, many, [5], many[:200]),
            (0, 2, 1, 1, many[:130], many[:127], many[:126]),  # same arrays again (cached)
        ], None)
    ]
    frame = encode(spec, version)
    snap = read_metadata(frame, version)
    assert snap == expected_snapshot(spec, version)
    first, _, third = (PartitionMetadata(*row)
                       for row in TopicMetadata(*snap.topics[0]).partitions)
    assert first.replicas is third.replicas  # decoded once per distinct pattern


def test_partition_tagged_fields_are_skipped() -> None:
    partition = (
        b"\x00\x00" + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x02"
        + b"\x02\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x01" + b"\x01"
        + b"\x01\x09\x03abc"  # one unknown tagged field
    )
    body = (
        b"\x00\x00\x00\x01\x00"  # header
        + b"\x00\x00\x00\x00" + b"\x01"  # throttle, no brokers
        + b"\x00" + b"\x00\x00\x00\x01"  # null cluster id, controller 1
        + b"\x02" + b"\x00\x00" + b"\x02t" + b"\x00" + b"\x02" + partition  # 1 topic
        + b"\x80\x00\x00\x00" + b"\x00"  # topic authorized ops, topic tags
        + b"\x80\x00\x00\x00" + b"\x00"  # cluster authorized ops, tags
    )
    snap = read_metadata(with_size(body), 9)
    assert snap.topics == (
        TopicMetadata("t", None, 0, False, (PartitionMetadata(3, 0, 1, 2, (1,), (1,), ()),)),
    )
    assert decode(with_size(body), 9).topics[0].partitions[0].partition_index == 3


def test_big_read_leaves_the_gc_alone_and_gives_rows_it_stops_tracking() -> None:
    import gc

    spec = sample_spec()
    parts = [(0, i, 1, 1, [1, 2, 3], [1, 2], []) for i in range(20000)]
    spec.topics = [(0, "big", uuid.uuid4().bytes, False, parts, None)]
    frame = encode(spec, 12)
    assert len(frame) > 256 * 1024
    assert gc.isenabled()
    topics = read_metadata(frame, 12).topics
    rows = TopicMetadata(*topics[0]).partitions
    assert len(rows) == 20000
    assert gc.isenabled()
    gc.collect()  # a collection leaves rows of atomic values untracked, in any generation
    assert not any(gc.is_tracked(r) for r in rows)
    gc.collect()  # the topic's row, once its partitions' tuple is (a second pass)
    assert not gc.is_tracked(topics[0])
    with pytest.raises(ProtocolError):
        read_metadata(with_size(frame[4:-1]), 12)
    assert gc.isenabled()


@pytest.mark.parametrize("version", [0, 5, 8, 9, 12])
def test_pause_is_called_between_chunks_and_changes_nothing(version: int) -> None:
    spec = sample_spec()
    big = [(0, i, 1 + i % 3, 1, [1 + (i + k) % 3 for k in range(3)], [1 + i % 3], [])
           for i in range(2500)]  # three chunks of partitions in one topic
    spec.topics = spec.topics + [(0, "big", uuid.uuid4().bytes, False, big, None)]
    frame = encode(spec, version)
    calls: list[int] = []
    snap = read_metadata(frame, version, lambda: calls.append(1))
    assert snap == read_metadata(frame, version) == expected_snapshot(spec, version)
    assert len(calls) == len(spec.topics) + 2  # after each topic, and twice within "big"


def test_on_topic_gets_each_topic_as_read_and_the_snapshot_none() -> None:
    spec = sample_spec()
    frame = encode(spec, 12)
    whole = read_metadata(frame, 12)
    given: list[object] = []
    streamed = read_metadata(frame, 12, on_topic=given.append)
    assert given == list(whole.topics) and streamed.topics == ()
    assert streamed.brokers == whole.brokers and streamed.cluster_id == whole.cluster_id
