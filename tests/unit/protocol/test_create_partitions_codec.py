"""protocol.create_partitions against kafka-python's generic codec.

A request kafka-python encodes (every version; explicit and null assignments)
parses into its topics and re-encodes to the same bytes; a response parses and
re-encodes to the same bytes, and one built here decodes in kafka-python to the
same values; malformed frames raise ProtocolError.
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import CreatePartitionsRequest as KRequest
from kafka.protocol.admin import CreatePartitionsResponse as KResponse

from protocol.create_partitions import (
    CreatePartitionsResponse,
    TopicResult,
    encode_create_partitions_request,
    encode_create_partitions_response,
    parse_create_partitions_request,
    parse_create_partitions_response,
)
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError

VERSIONS = range(4)
_Topic = KRequest.CreatePartitionsTopic
_Assign = _Topic.CreatePartitionsAssignment


def kafka_request(version: int) -> bytes:
    topics = [
        _Topic(name="orders", count=6,
               assignments=[_Assign(broker_ids=[1, 2, 3]), _Assign(broker_ids=[4, 5])]),
        _Topic(name="logs", count=3, assignments=None),
    ]
    request = KRequest(version=version, topics=topics, timeout_ms=30000, validate_only=True)
    request.with_header(correlation_id=9, client_id="adm")
    return bytes(request.encode(header=True, framed=True))


@pytest.mark.parametrize("version", VERSIONS)
def test_request_parses_and_round_trips(version: int) -> None:
    frame = kafka_request(version)
    header = parse_request_header(frame)
    request = parse_create_partitions_request(frame, header)
    assert [(t.name, t.count, t.assignments) for t in request.topics] == [
        ("orders", 6, ((1, 2, 3), (4, 5))), ("logs", 3, None)]
    assert request.timeout_ms == 30000 and request.validate_only
    assert encode_create_partitions_request(frame, header, request) == frame


def kafka_response(version: int) -> bytes:
    result = KResponse.CreatePartitionsTopicResult
    response = KResponse(version=version, throttle_time_ms=7, results=[
        result(name="orders", error_code=0, error_message=None),
        result(name="logs", error_code=39, error_message="no"),
    ])
    response.with_header(correlation_id=9)
    return bytes(response.encode(header=True, framed=True))


@pytest.mark.parametrize("version", VERSIONS)
def test_response_round_trips_and_builds_what_kafka_python_reads(version: int) -> None:
    frame = kafka_response(version)
    response = parse_create_partitions_response(frame, version)
    assert response.throttle_time_ms == 7
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        ("orders", 0, None), ("logs", 39, "no")]
    assert encode_create_partitions_response(version, 9, response) == frame
    built = encode_create_partitions_response(version, 9, CreatePartitionsResponse(
        7, (TopicResult("orders", 0), TopicResult("logs", 39, "no"))))
    assert built == frame


@pytest.mark.parametrize("version", VERSIONS)
def test_malformed_frames_raise_protocol_error(version: int) -> None:
    frame = kafka_request(version)
    header = parse_request_header(frame)
    with pytest.raises(ProtocolError):
        parse_create_partitions_request(frame[:-3], header)
    with pytest.raises(ProtocolError):
        parse_create_partitions_request(frame + b"\x00", header)
    with pytest.raises(ProtocolError):
        parse_create_partitions_response(kafka_response(version)[:-2], version)
