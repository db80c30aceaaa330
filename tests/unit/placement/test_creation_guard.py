"""The creation guard: CreateTopics and CreatePartitions with explicit assignments that
cannot span min.insync.racks are refused per topic (frames from kafka-python)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import CreatePartitionsRequest as KPartitions
from kafka.protocol.admin import CreatePartitionsResponse as KPartitionsResponse
from kafka.protocol.admin import CreateTopicsRequest as KTopics
from kafka.protocol.admin import CreateTopicsResponse as KTopicsResponse

from protocol.create_partitions import parse_create_partitions_request
from protocol.create_topics import parse_create_topics_request
from protocol.headers import parse_request_header
from proxy.cluster.view import ClusterViewStore
from proxy.placement.creation_hook import CreationGuard, GuardSettings
from proxy.placement.guard import refusal, requested_min_racks
from proxy.relay.actions import ClientInfo, Forward, Reply
from tests.unit._views import Clock, broker, part, snap, topic

SIX = (broker(1, "rack-a"), broker(2, "rack-b"), broker(3, "rack-c"),
       broker(4, "rack-a"), broker(5, "rack-b"), broker(6, "rack-c"))
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a", 5: "rack-b", 6: "rack-c"}
CLIENT = ClientInfo("127.0.0.1:5555", "bootstrap")
_T = KTopics.CreatableTopic
_A = _T.CreatableReplicaAssignment
_C = _T.CreatableTopicConfig
_P = KPartitions.CreatePartitionsTopic


def test_refusal_names_partitions_and_racks() -> None:
    assert refusal("t", 2, [(0, (1, 2)), (1, (2, 5))], RACKS) == (
        "topic 't' has min.insync.racks 2, but 1 of its 2 new partition(s) cannot span 2 "
        "racks: partition 1 replicas [2, 5] span 1 rack(s) (rack-b)")
    assert refusal("t", 2, [(0, (1, 2))], RACKS) is None
    assert refusal("t", 1, [(0, (1, 4))], RACKS) is None
    assert "span 0 rack(s)" in (refusal("t", 2, [(0, (8, 9))], RACKS) or "")


def test_requested_min_racks_from_the_topic_config() -> None:
    assert requested_min_racks({"min.insync.racks": "3"}, 2) == 3
    assert requested_min_racks({}, 2) == 2
    assert requested_min_racks({"min.insync.racks": "x"}, 2) == 2


class Harness:
    def __init__(self, observe: bool = False, required: int = 2) -> None:
        self.store = ClusterViewStore(Clock())
        self.store.apply_metadata(snap([topic("orders", [part(i, (1, 2, 3)) for i in range(3)])],
                                       brokers=SIX), full=True)
        self.records: list[tuple[str, str]] = []
        settings = GuardSettings(lambda _t: required, observe)
        self.guard = CreationGuard(lambda: self.store.view, lambda: settings,
                                   lambda api, decision: self.records.append((api, decision)))

    def call(self, frame: bytes, key: int) -> Any:
        header = parse_request_header(frame)
        return self.guard(CLIENT, memoryview(frame), key, header.api_version,
                          header.correlation_id)


def topics_frame(version: int, validate_only: bool = False) -> bytes:
    topics = [
        _T(name="bad", num_partitions=-1, replication_factor=-1, configs=[],
           assignments=[_A(partition_index=0, broker_ids=[1, 2]),
                        _A(partition_index=1, broker_ids=[1, 4])]),
        _T(name="good", num_partitions=-1, replication_factor=-1, configs=[],
           assignments=[_A(partition_index=0, broker_ids=[1, 2])]),
        _T(name="auto", num_partitions=3, replication_factor=2, assignments=[], configs=[]),
    ]
    request = KTopics(version=version, topics=topics, timeout_ms=1000,
                      validate_only=validate_only)
    request.with_header(correlation_id=42, client_id="adm")
    return bytes(request.encode(header=True, framed=True))


def kafka_topics_answer(version: int, names: list[str]) -> bytes:
    result = KTopicsResponse.CreatableTopicResult
    response = KTopicsResponse(version=version, throttle_time_ms=0, topics=[
        result(name=n, topic_id=None, error_code=0, error_message=None, num_partitions=1,
               replication_factor=2, configs=[]) for n in names])
    response.with_header(correlation_id=42)
    return bytes(response.encode(header=True, framed=True))


@pytest.mark.parametrize("version", range(7))
def test_create_topics_mixed_request_is_split_and_merged(version: int) -> None:
    h = Harness()
    action = h.call(topics_frame(version), 19)
    assert isinstance(action, Forward) and action.transform is not None
    forwarded = bytes(action.frame)
    sent = parse_create_topics_request(forwarded, parse_request_header(forwarded))
    assert [t.name for t in sent.topics] == ["good", "auto"]
    merged = action.transform(memoryview(kafka_topics_answer(version, ["good", "auto"])), version)
    answer = KTopicsResponse.decode(bytes(merged)[8 + (version >= 5):], version=version)
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("bad", 39), ("good", 0), ("auto", 0)]
    if version >= 1:
        message = answer.topics[0].error_message
        assert "partition 1 replicas [1, 4] span 1 rack(s) (rack-a)" in message
    assert h.records == [("CreateTopics", "passed"), ("CreateTopics", "refused")]


@pytest.mark.parametrize("version", [1, 5, 7])
def test_create_topics_all_refused_is_answered_by_the_proxy(version: int) -> None:
    h = Harness()
    request = KTopics(version=version, validate_only=True, timeout_ms=1000, topics=[
        _T(name="bad", num_partitions=-1, replication_factor=-1, configs=[],
           assignments=[_A(partition_index=0, broker_ids=[2, 5])])])
    request.with_header(correlation_id=42, client_id="adm")
    action = h.call(bytes(request.encode(header=True, framed=True)), 19)
    assert isinstance(action, Reply)
    answer = KTopicsResponse.decode(action.frame[8 + (version >= 5):], version=version)
    assert [(t.name, t.error_code) for t in answer.topics] == [("bad", 39)]


def test_topic_config_raises_the_requirement_and_one_rack_passes_untouched() -> None:
    h = Harness(required=1)
    frame = topics_frame(5)
    action = h.call(frame, 19)
    assert isinstance(action, Forward) and bytes(action.frame) == frame
    assert h.records == []
    request = KTopics(version=5, validate_only=False, timeout_ms=1000, topics=[
        _T(name="three", num_partitions=-1, replication_factor=-1,
           configs=[_C(name="min.insync.racks", value="3")],
           assignments=[_A(partition_index=0, broker_ids=[1, 2])])])
    request.with_header(correlation_id=42, client_id="adm")
    assert isinstance(h.call(bytes(request.encode(header=True, framed=True)), 19), Reply)


def test_observe_mode_counts_and_forwards_unchanged() -> None:
    h = Harness(observe=True)
    frame = topics_frame(4)
    action = h.call(frame, 19)
    assert isinstance(action, Forward) and bytes(action.frame) == frame
    assert action.transform is None
    assert ("CreateTopics", "observed_refusal") in h.records


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_numbers_new_partitions_after_the_existing_ones(version: int) -> None:
    h = Harness()
    request = KPartitions(version=version, timeout_ms=1000, validate_only=False, topics=[
        _P(name="orders", count=5, assignments=[_P.CreatePartitionsAssignment(broker_ids=[1, 2]),
                                                _P.CreatePartitionsAssignment(broker_ids=[3, 6])]),
        _P(name="other", count=4, assignments=None)])
    request.with_header(correlation_id=42, client_id="adm")
    frame = bytes(request.encode(header=True, framed=True))
    action = h.call(frame, 37)
    assert isinstance(action, Forward) and action.transform is not None
    sent = parse_create_partitions_request(bytes(action.frame),
                                           parse_request_header(bytes(action.frame)))
    assert [t.name for t in sent.topics] == ["other"]
    result = KPartitionsResponse.CreatePartitionsTopicResult
    answer = KPartitionsResponse(version=version, throttle_time_ms=0, results=[
        result(name="other", error_code=0, error_message=None)])
    answer.with_header(correlation_id=42)
    merged = action.transform(memoryview(bytes(answer.encode(header=True, framed=True))), version)
    decoded = KPartitionsResponse.decode(bytes(merged)[8 + (version >= 2):], version=version)
    assert [(r.name, r.error_code) for r in decoded.results] == [("orders", 39), ("other", 0)]
    assert "partition 4 replicas [3, 6] span 1 rack(s) (rack-c)" in decoded.results[0].error_message


def test_malformed_requests_raise_protocol_error_for_the_connection_to_close() -> None:
    from protocol.primitives import ProtocolError

    h = Harness()
    frame = topics_frame(5)
    short = (len(frame) - 7).to_bytes(4, "big") + frame[4:-3]
    with pytest.raises(ProtocolError):
        h.call(short, 19)
    assert h.records == []


def test_nothing_is_checked_before_the_view_knows_a_broker() -> None:
    h = Harness()
    h.store = ClusterViewStore(Clock())
    frame = topics_frame(5)
    action = h.call(frame, 19)
    assert isinstance(action, Forward) and bytes(action.frame) == frame
