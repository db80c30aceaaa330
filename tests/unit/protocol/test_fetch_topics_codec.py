"""protocol.fetch_topics against kafka-python's encoder, every version the proxy reads."""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.consumer import FetchRequest

from protocol.fetch_topics import read_fetch_topics
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError

_T = FetchRequest.FetchTopic
_P = _T.FetchPartition
_F = FetchRequest.ForgottenTopic
IDS = (uuid.UUID(int=1), uuid.UUID(int=2))


def encoded(version: int, names: tuple[str, ...], partitions: int = 3) -> bytes:
    topics = [_T(topic=name, topic_id=topic_id, partitions=[
        _P(partition=i, current_leader_epoch=7, fetch_offset=1000 + i, last_fetched_epoch=6,
           log_start_offset=-1, partition_max_bytes=1 << 20) for i in range(partitions)])
        for name, topic_id in zip(names, IDS, strict=False)]
    req = FetchRequest(version=version, replica_id=-1, max_wait_ms=500, min_bytes=1,
                       max_bytes=50 << 20, isolation_level=1, session_id=12, session_epoch=3,
                       topics=topics, forgotten_topics_data=[
                           _F(topic="gone", topic_id=IDS[0], partitions=[1])],
                       rack_id="r")
    req.with_header(correlation_id=41, client_id="consumer-1")
    return bytes(req.encode(header=True, framed=True))


@pytest.mark.parametrize("version", range(4, 16))
def test_the_named_topics_are_read(version: int) -> None:
    data = encoded(version, ("orders", "é" * 70))
    got = read_fetch_topics(data, parse_request_header(data))
    if version >= 13:
        assert got == (IDS[0].bytes, IDS[1].bytes)
    else:
        assert got == ("orders", "é" * 70)


@pytest.mark.parametrize("version", [7, 12, 15])
def test_an_incremental_fetch_naming_nothing_gives_nothing(version: int) -> None:
    data = encoded(version, ())
    assert read_fetch_topics(data, parse_request_header(data)) == ()


@pytest.mark.parametrize("version", [11, 12, 13])
def test_truncation_is_a_protocol_error(version: int) -> None:
    data = encoded(version, ("orders",), partitions=2)
    cut = data[:parse_request_header(data).body_offset + 40]
    with pytest.raises(ProtocolError):
        read_fetch_topics(cut, parse_request_header(cut))
