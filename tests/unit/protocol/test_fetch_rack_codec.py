"""protocol.fetch_request and protocol.fetch_response, against kafka-python's codec.

Invariants under test: an empty rack_id (v11-v15) is filled and the result decodes, by
kafka-python, to the very request the client sent but for rack_id; everything before
the field and the tagged fields after it are the client's bytes; a request naming its
own rack is left alone (None); the response walker counts exactly the record bytes and
the preferred-read-replica redirects kafka-python encoded, for v0-v15; malformed input
raises ProtocolError and nothing else.
"""

from __future__ import annotations

import random
import uuid

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse

from protocol.fetch_request import (
    FetchRackFill,
    fill_fetch_rack,
    rack_span,
    read_fetch_rack,
    request_body_offset,
)
from protocol.fetch_response import FetchTraffic, fetch_response_traffic
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError
from tests.unit.protocol._codec_checks import check_corruptions, with_size

_T = FetchRequest.FetchTopic
_P = _T.FetchPartition
_F = FetchRequest.ForgottenTopic
RACK_VERSIONS = range(11, 16)
TOPIC_ID = uuid.UUID(bytes=bytes(range(16)))


def request(version: int, rack: str, partitions: int = 3, cluster_id: str | None = None,
            forgotten: bool = True, names: tuple[str, ...] = ("orders", "é" * 70)
            ) -> FetchRequest:
    topics = [
        _T(topic=name, topic_id=TOPIC_ID, partitions=[
            _P(partition=i, current_leader_epoch=7, fetch_offset=1000 + i,
               last_fetched_epoch=6, log_start_offset=-1, partition_max_bytes=1 << 20)
            for i in range(partitions)])
        for name in names
    ]
    gone = [_F(topic="gone", topic_id=TOPIC_ID, partitions=[1, 2, 3])] if forgotten else []
    kwargs = {"cluster_id": cluster_id} if version >= 12 and cluster_id else {}
    req = FetchRequest(version=version, replica_id=-1, max_wait_ms=500, min_bytes=1,
                       max_bytes=50 << 20, isolation_level=1, session_id=12, session_epoch=3,
                       topics=topics, forgotten_topics_data=gone, rack_id=rack, **kwargs)
    req.with_header(correlation_id=41, client_id="consumer-1")
    return req


def encoded(req: FetchRequest) -> bytes:
    return bytes(req.encode(header=True, framed=True))


def fill(data: bytes, rack: str) -> bytes | None:
    header = parse_request_header(data)
    return fill_fetch_rack(memoryview(data), header.api_version, rack)


@pytest.mark.parametrize("version", RACK_VERSIONS)
@pytest.mark.parametrize("cluster_id", [None, "c" * 200])
@pytest.mark.parametrize("rack", ["eu-west-1a", "ζώνη-" * 40])
def test_empty_rack_is_filled_and_nothing_else_changes(
        version: int, cluster_id: str | None, rack: str) -> None:
    data = encoded(request(version, "", cluster_id=cluster_id))
    filled = fill(data, rack)
    assert filled is not None
    # exactly what kafka-python encodes for the request with that rack
    assert filled == encoded(request(version, rack, cluster_id=cluster_id))
    decoded = FetchRequest.decode(filled, version=version, header=True, framed=True)
    assert decoded.rack_id == rack and decoded.header.correlation_id == 41
    start, _, end = rack_span(data, version, parse_request_header(data).body_offset)
    assert filled[4:start] == data[4:start]  # every byte before rack_id
    assert filled.endswith(data[end:])  # the tagged fields after it
    assert read_fetch_rack(filled) == rack
    assert request_body_offset(data, version) == parse_request_header(data).body_offset
    assert read_fetch_rack(data) == ""


@pytest.mark.parametrize("version", RACK_VERSIONS)
def test_a_clients_own_rack_is_left_alone(version: int) -> None:
    data = encoded(request(version, "us-east-1c"))
    assert fill(data, "eu-west-1a") is None
    assert read_fetch_rack(data) == "us-east-1c"


@pytest.mark.parametrize("version", RACK_VERSIONS)
def test_many_partitions_and_none(version: int) -> None:
    for partitions in (0, 1, 500):
        data = encoded(request(version, "", partitions=partitions))
        filled = fill(data, "r1")
        assert filled is not None
        assert filled == encoded(request(version, "r1", partitions))


def test_versions_without_a_rack_are_not_read() -> None:
    for version in (0, 4, 10, 16):
        with pytest.raises(ProtocolError):
            rack_span(b"\x00" * 64, version, 14)


@pytest.mark.parametrize("version", RACK_VERSIONS)
def test_truncated_and_padded_requests_raise(version: int) -> None:
    data = encoded(request(version, "", partitions=2, cluster_id="c"))
    body = parse_request_header(data).body_offset
    for i in range(body, len(data)):
        with pytest.raises(ProtocolError):
            fill(with_size(data[4:i]), "r")
    with pytest.raises(ProtocolError):
        fill(with_size(data[4:] + b"\x00"), "r")


@pytest.mark.parametrize("version", RACK_VERSIONS)
def test_fuzzed_requests_raise_protocol_error_or_fill(version: int) -> None:
    data = encoded(request(version, "", partitions=2))
    check_corruptions(lambda d: fill(d, "r"), data)
    rng = random.Random(version)
    for _ in range(300):
        junk = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            junk[rng.randrange(22, len(junk))] = rng.randrange(256)
        try:
            fill(bytes(junk), "r")
        except ProtocolError:
            pass


# ----- responses

_RT = FetchResponse.FetchableTopicResponse
_RP = _RT.PartitionData
_AT = _RP.AbortedTransaction


def response(version: int) -> tuple[bytes, FetchTraffic]:
    records = [b"", b"x" * 300, b"y" * 70_000, None]
    parts = []
    for i, rec in enumerate(records):
        preferred = 4 if i == 0 else -1
        aborted = [_AT(producer_id=9, first_offset=i)] * i if i != 2 else None
        parts.append(_RP(partition_index=i, error_code=0, high_watermark=10, last_stable_offset=9,
                         log_start_offset=0, aborted_transactions=aborted,
                         preferred_read_replica=preferred, records=rec))
    topics = [_RT(topic=name, topic_id=TOPIC_ID, partitions=parts) for name in ("a", "b" * 300)]
    resp = FetchResponse(version=version, throttle_time_ms=1, error_code=0, session_id=5,
                         responses=topics)
    resp.with_header(correlation_id=8)
    data = bytes(resp.encode(header=True, framed=True))
    return data, FetchTraffic(2 * (300 + 70_000), 2 if version >= 11 else 0)


@pytest.mark.parametrize("version", range(16))
def test_response_traffic_is_what_kafka_python_encoded(version: int) -> None:
    data, expected = response(version)
    assert fetch_response_traffic(data, version) == expected
    assert fetch_response_traffic(memoryview(bytearray(data)), version) == expected


@pytest.mark.parametrize("version", [0, 4, 11, 12, 15])
def test_malformed_responses_raise(version: int) -> None:
    data, _ = response(version)
    for i in list(range(4, 200)) + list(range(len(data) - 200, len(data))):
        with pytest.raises(ProtocolError):
            fetch_response_traffic(with_size(data[4:i]), version)
    with pytest.raises(ProtocolError):
        fetch_response_traffic(with_size(data[4:] + b"\x00"), version)
    with pytest.raises(ProtocolError):
        fetch_response_traffic(data, 16)
    small = response(version)[0][:4]  # the size prefix alone
    with pytest.raises(ProtocolError):
        fetch_response_traffic(small, version)


def quick_path_frames(version: int) -> list[bytes]:
    """Requests of many shapes, the usual one among them, and each fuzzed 60 times in a
    byte that is a length, a count or a tag, or none of them."""
    frames = [encoded(request(version, rack, partitions, cluster, forgotten, names))
              for rack in ("", "r", "x" * 200) for partitions in (0, 1, 3, 70)
              for cluster in (None, "c") for forgotten in (False, True)
              for names in (("orders",), ("orders", "é" * 70))]
    rng = random.Random(version)
    for data in list(frames):
        for _ in range(60):
            junk = bytearray(data)
            junk[rng.randrange(12, len(junk))] = rng.choice((0, 1, 2, 0x7F, 0x80, 0xFF))
            frames.append(bytes(junk))
    return frames


@pytest.mark.parametrize("version", [12, 13, 14, 15])
def test_the_quick_path_agrees_with_the_walk_or_steps_aside(version: int) -> None:
    """Where the one-pass reader answers, it is the general walk's answer; on anything
    unusual it answers None and the walk decides (so fuzzing compares both). What it
    read is all its answer depends on: another request of that length, equal there,
    gets the same answer."""
    from protocol.fetch_request import _usual_rack_shape

    answered = 0
    for data in quick_path_frames(version):
        found = _usual_rack_shape(data, version)
        if found is None:
            continue
        answered += 1
        start, offsets = found
        end = start + data[start]
        assert (start, start + 1, end) == rack_span(data, version,
                                                    request_body_offset(data, version))
        assert end + 1 == len(data)
        assert offsets == sorted(set(offsets)) and offsets[-1] == len(data) - 1
        alike = bytearray(random.Random(start).randbytes(len(data)))
        for i in offsets:
            alike[i] = data[i]
        assert _usual_rack_shape(bytes(alike), version) == found
    assert answered >= 8  # the unfuzzed frames of the usual shape, at least


@pytest.mark.parametrize("version", [12, 13, 14, 15])
def test_remembered_shapes_fill_as_a_walk_does(version: int, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    """One filler for every request (shapes remembered, the requests of a known shape
    filled without a walk) answers each as a new filler (a walk) does, exceptions too."""
    from protocol import fetch_request

    walks = 0
    walk = fetch_request._usual_rack_shape

    def counted(frame: bytes, version: int) -> tuple[int, list[int]] | None:
        nonlocal walks
        walks += 1
        return walk(frame, version)

    monkeypatch.setattr(fetch_request, "_usual_rack_shape", counted)
    warm = FetchRackFill("eu-west-1a")
    frames = quick_path_frames(version)
    rng = random.Random(version)
    for data in frames[:96]:  # the same shapes again, other offsets
        again = bytearray(data)
        for _ in range(4):
            again[rng.randrange(len(again) - 30, len(again) - 3)] = rng.randrange(256)
        frames.append(bytes(again))
    warm_walks = 0
    for data in frames:
        try:
            expected: bytes | None | type[ProtocolError] = FetchRackFill("eu-west-1a").fill(
                memoryview(data), version)
        except ProtocolError:
            expected = ProtocolError
        before = walks
        try:
            got: bytes | None | type[ProtocolError] = warm.fill(memoryview(data), version)
        except ProtocolError:
            got = ProtocolError
        warm_walks += walks - before
        assert got == expected
    assert warm_walks < len(frames) - 100  # many requests were filled without a walk


def test_two_shapes_of_one_length_are_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two topics whose partitions take turns: requests of one length, two shapes (and a
    third, which displaces the older one): each filled as a walk would, the two known
    ones without a walk."""
    from protocol import fetch_request

    def two_topics(version: int, first: int, second: int, rack: str = "") -> bytes:
        req = request(version, rack, forgotten=False, names=("a", "b"))
        req.topics[0].partitions = req.topics[0].partitions[:first]
        req.topics[1].partitions = req.topics[1].partitions[:second]
        return encoded(req)

    walks: list[int] = []
    walk = fetch_request._usual_rack_shape
    monkeypatch.setattr(fetch_request, "_usual_rack_shape",
                        lambda frame, version: walks.append(1) or walk(frame, version))
    for version in (12, 15):
        fill = FetchRackFill("r")
        shapes = [two_topics(version, 1, 2), two_topics(version, 2, 1),
                  two_topics(version, 3, 0)]
        assert len({len(frame) for frame in shapes}) == 1
        walks.clear()
        for frame in shapes[:2] * 3 + shapes[2:] + shapes[1:] * 2:
            assert fill.fill(memoryview(frame), version) == two_topics(
                version, *[len(t.partitions) for t in FetchRequest.decode(
                    frame, version=version, header=True, framed=True).topics], rack="r")
        assert len(walks) == 3  # each shape once: then the latest two are known


def test_remembered_shapes_are_bounded() -> None:
    fill = FetchRackFill("r")
    lengths = set()
    for name in range(1, 121):
        for partitions in range(1, 9):
            data = encoded(request(12, "", partitions, forgotten=False, names=("t" * name,)))
            lengths.add(len(data))
            assert fill.fill(memoryview(data), 12) is not None
    assert len(lengths) > 256 and 0 < len(fill._shapes) <= 256
    many = encoded(request(12, "", 200, forgotten=False, names=("orders",)))
    assert fill.fill(memoryview(many), 12) == encoded(request(12, "r", 200, forgotten=False,
                                                              names=("orders",)))
    assert len(many) << 4 | 12 not in fill._shapes  # too many bytes to check: walked
