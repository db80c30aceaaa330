"""protocol.create_topics against kafka-python's generic codec.

Invariants under test: a request kafka-python encodes (every version, explicit
assignments, configs with null values) parses into its topics and re-encodes to
the same bytes, and without an entry is what kafka-python encodes for the smaller
request; a response (errors, configs, topic ids) parses and re-encodes to the same
bytes, and with a config added is what kafka-python encodes; malformed frames
raise ProtocolError.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest as KRequest
from kafka.protocol.admin import CreateTopicsResponse as KResponse

from protocol.create_topics import (
    CreatedConfig,
    TopicResult,
    encode_create_topics_request,
    encode_create_topics_response,
    merge_create_topics_responses,
    parse_create_topics_request,
    parse_create_topics_response,
)
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError

VERSIONS = range(8)
_Topic = KRequest.CreatableTopic
_Assign = _Topic.CreatableReplicaAssignment
_Cfg = _Topic.CreatableTopicConfig
_Result = KResponse.CreatableTopicResult
_RCfg = _Result.CreatableTopicConfigs
TID = uuid.UUID(bytes=bytes(range(16)))


def kafka_request(version: int, with_racks: bool) -> bytes:
    configs = [_Cfg(name="cleanup.policy", value="compact"), _Cfg(name="x", value=None)]
    if with_racks:
        configs.insert(1, _Cfg(name="min.insync.racks", value="2"))
    topics = [
        _Topic(name="orders", num_partitions=3, replication_factor=3, assignments=[],
               configs=configs),
        _Topic(name="t" * 200, num_partitions=-1, replication_factor=-1,
               assignments=[_Assign(partition_index=0, broker_ids=[1, 2, 3]),
                            _Assign(partition_index=1, broker_ids=[2, 3, 1])], configs=[]),
    ]
    request = KRequest(version=version, topics=topics, timeout_ms=30000,
                       validate_only=version >= 1)
    request.with_header(correlation_id=5, client_id="adm")
    return bytes(request.encode(header=True, framed=True))


@pytest.mark.parametrize("version", VERSIONS)
def test_request(version: int) -> None:
    frame = kafka_request(version, True)
    header = parse_request_header(frame)
    request = parse_create_topics_request(frame, header)
    assert request.validate_only is (version >= 1) and request.timeout_ms == 30000
    orders, second = request.topics
    assert (orders.name, orders.num_partitions, orders.replication_factor) == ("orders", 3, 3)
    assert [(c.name, c.value) for c in orders.configs] == [
        ("cleanup.policy", "compact"), ("min.insync.racks", "2"), ("x", None)]
    assert [(a.partition_index, a.broker_ids) for a in second.assignments] == [
        (0, (1, 2, 3)), (1, (2, 3, 1))]
    assert encode_create_topics_request(frame, header, request) == frame
    smaller = replace(request, topics=(replace(orders, configs=tuple(
        c for c in orders.configs if c.name != "min.insync.racks")), second))
    assert encode_create_topics_request(frame, header, smaller) == kafka_request(version, False)
    for bad in (frame[:-1], frame + b"\x00"):
        with pytest.raises(ProtocolError):
            parse_create_topics_request(bad, header)


def kafka_response(version: int, extra: bool) -> bytes:
    configs = [_RCfg(name="cleanup.policy", value="compact", read_only=False,
                     config_source=1, is_sensitive=False)]
    if extra:
        configs.append(_RCfg(name="min.insync.racks", value="2", read_only=False,
                             config_source=1, is_sensitive=False))
    response = KResponse(version=version, throttle_time_ms=3, topics=[
        _Result(name="orders", topic_id=TID, error_code=0, error_message=None,
                num_partitions=3, replication_factor=3, configs=configs),
        _Result(name="gone", topic_id=uuid.UUID(int=0), error_code=36, error_message="exists",
                num_partitions=-1, replication_factor=-1, configs=None)])
    response.with_header(correlation_id=5)
    return bytes(response.encode(header=True, framed=True))


@pytest.mark.parametrize("version", VERSIONS)
def test_response(version: int) -> None:
    frame = kafka_response(version, False)
    parsed = parse_create_topics_response(frame, version)
    assert encode_create_topics_response(version, 5, parsed) == frame
    assert [(t.name, t.error_code) for t in parsed.topics] == [("orders", 0), ("gone", 36)]
    if version >= 5:
        first = parsed.topics[0]
        assert first.configs is not None and parsed.topics[1].configs is None
        grown = replace(parsed, topics=(replace(first, configs=(
            *first.configs, CreatedConfig("min.insync.racks", "2", False, 1, False))),
            parsed.topics[1]))
        assert encode_create_topics_response(version, 5, grown) == kafka_response(version, True)
    for i in range(len(frame)):
        with pytest.raises(ProtocolError):
            parse_create_topics_response(frame[:i], version)
    for i in range(8, len(frame)):
        for value in (0x00, 0x7F, 0x80, 0xFF):
            data: Any = bytearray(frame)
            data[i] = value
            try:
                parse_create_topics_response(bytes(data), version)
            except ProtocolError:
                pass


@pytest.mark.parametrize("version", VERSIONS)
def test_merge_in_request_order(version: int) -> None:
    frame = kafka_request(version, True)
    request = parse_create_topics_request(frame, parse_request_header(frame))
    long_name = request.topics[1].name
    upstream = parse_create_topics_response(kafka_response(version, False), version)
    upstream = replace(upstream, topics=(replace(upstream.topics[0], name=long_name),))
    local = {"orders": TopicResult("orders", 40, "min.insync.racks must be an integer")}
    merged = parse_create_topics_response(
        merge_create_topics_responses(request, 5, upstream, local), version)
    assert [(t.name, t.error_code) for t in merged.topics] == [("orders", 40), (long_name, 0)]
    alone = parse_create_topics_response(merge_create_topics_responses(
        request, 5, None, {t.name: TopicResult(t.name, 40, "no") for t in request.topics}),
        version)
    assert [t.error_code for t in alone.topics] == [40, 40]
    with pytest.raises(ValueError):
        merge_create_topics_responses(request, 5, None, local)
