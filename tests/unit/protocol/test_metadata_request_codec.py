"""protocol.metadata_request against kafka-python's encoder, every version."""

from __future__ import annotations

import pytest
from kafka.protocol.metadata import MetadataRequest

from protocol.headers import parse_request_header
from protocol.metadata_request import read_metadata_request_topics
from protocol.primitives import ProtocolError

_T = MetadataRequest.MetadataRequestTopic


def frame(version: int, topics: list[object] | None) -> bytes:
    request = MetadataRequest(version=version, topics=topics)
    request.with_header(correlation_id=7, client_id="c")
    return bytes(request.encode(header=True, framed=True))


@pytest.mark.parametrize("version", range(0, 13))
def test_named_topics_are_read(version: int) -> None:
    raw = frame(version, [_T(topic_id=None, name="orders"), _T(topic_id=None, name="p-1")])
    assert read_metadata_request_topics(raw, parse_request_header(raw)) == ("orders", "p-1")


@pytest.mark.parametrize("version", range(0, 13))
def test_every_topic_is_none(version: int) -> None:
    raw = frame(version, [] if version == 0 else None)
    assert read_metadata_request_topics(raw, parse_request_header(raw)) is None


@pytest.mark.parametrize("version", range(1, 13))
def test_an_empty_list_names_no_topic(version: int) -> None:
    raw = frame(version, [])
    assert read_metadata_request_topics(raw, parse_request_header(raw)) == ()


def test_a_topic_asked_by_id_gives_its_id() -> None:
    import uuid
    raw = frame(12, [_T(topic_id=uuid.UUID(int=5), name=None)])
    assert read_metadata_request_topics(raw, parse_request_header(raw)) == (
        uuid.UUID(int=5).bytes,)


def test_truncated_input_is_a_protocol_error() -> None:
    raw = frame(12, [_T(topic_id=None, name="orders")])
    with pytest.raises(ProtocolError):
        read_metadata_request_topics(raw[:-8], parse_request_header(raw[:-8]))
