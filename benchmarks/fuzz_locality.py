"""Fuzz targets for the rack-locality decoders (benchmarks/fuzz.py runs them).

Every decoding entry point of protocol/fetch_request.py (the rack_id fill and read,
Fetch v11-15), protocol/fetch_response.py (the response walk, v4-15),
protocol/join_group.py (v0-9), protocol/consumer_subscription.py (v0-3) and
protocol/consumer_group_heartbeat.py (v0-1), called the way proxy/locality/hooks.py
calls them. Seeds: kafka-python's requests and responses for every version; the
ConsumerGroupHeartbeat, which kafka-python lacks, written out field by field from
Kafka's ConsumerGroupHeartbeatRequest.json (as tests/unit/protocol does).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable

from benchmarks.fuzz_admin import Spec, framed
from protocol.consumer_group_heartbeat import fill_heartbeat_rack
from protocol.consumer_subscription import parse_subscription, with_rack
from protocol.fetch_request import fill_fetch_rack, read_fetch_rack
from protocol.fetch_response import fetch_response_traffic
from protocol.headers import parse_request_header
from protocol.join_group import fill_join_group_rack
from protocol.primitives import encode_array_len, encode_string, pack_int32
from proxy.locality.rules import subscription_choice

RACK = "europe-west1-b"
TOPIC_ID = uuid.UUID(bytes=bytes(range(16)))


def _versioned(fn: Callable[[bytes, int], object], version: int) -> Callable[[bytes], object]:
    return lambda data: fn(data, version)


def _fill_fetch(data: bytes, version: int) -> object:
    return fill_fetch_rack(memoryview(data), version, RACK)


def _join(data: bytes, version: int) -> object:
    header = parse_request_header(data)
    return fill_join_group_rack(memoryview(data), version, header.body_offset, RACK,
                                subscription_choice)


def _with_rack(data: bytes, upgrade: int) -> object:
    return with_rack(data, RACK, bool(upgrade))


def _heartbeat(data: bytes, version: int) -> object:
    return fill_heartbeat_rack(memoryview(data), version, RACK)


def _fetch() -> list[Spec]:
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    topic = FetchRequest.FetchTopic
    part = topic.FetchPartition
    gone = FetchRequest.ForgottenTopic
    rtopic = FetchResponse.FetchableTopicResponse
    rpart = rtopic.PartitionData
    aborted = rpart.AbortedTransaction

    def request(version: int, rack: str, forgotten: bool) -> bytes:
        return framed(FetchRequest(
            version=version, replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20,
            isolation_level=1, session_id=12, session_epoch=3, rack_id=rack,
            topics=[topic(topic=name, topic_id=TOPIC_ID, partitions=[
                part(partition=i, current_leader_epoch=7, fetch_offset=1000 + i,
                     last_fetched_epoch=6, log_start_offset=-1, partition_max_bytes=1 << 20)
                for i in range(3)]) for name in ("orders", "events")],
            forgotten_topics_data=[gone(topic="gone", topic_id=TOPIC_ID, partitions=[1, 2])]
            if forgotten else []))

    def response(version: int) -> bytes:
        parts = [rpart(partition_index=i, error_code=0, high_watermark=10,
                       last_stable_offset=9, log_start_offset=0,
                       aborted_transactions=[aborted(producer_id=9, first_offset=i)] * i
                       if i != 2 else None,
                       preferred_read_replica=4 if i == 0 else -1, records=rec)
                 for i, rec in enumerate((b"", b"x" * 100, None))]
        return framed(FetchResponse(version=version, throttle_time_ms=1, error_code=0,
                                    session_id=5, responses=[
                                        rtopic(topic=name, topic_id=TOPIC_ID, partitions=parts)
                                        for name in ("a", "orders")]))

    out: list[Spec] = []
    for v in range(11, 16):
        seeds = [request(v, "", False), request(v, "", True), request(v, "rack-a", False)]
        out.append((f"fetch rack fill v{v}", _versioned(_fill_fetch, v), seeds))
        out.append((f"fetch rack read v{v}", read_fetch_rack, seeds))
    for v in range(4, 16):
        out.append((f"fetch response v{v}", _versioned(fetch_response_traffic, v),
                    [response(v)]))
    return out


def _subscriptions() -> list[bytes]:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Sub

    owned = [Sub.TopicPartition(topic="orders", partitions=[0, 3])]
    return [bytes(Sub(version=v, topics=["orders", "events"], user_data=b"\x00\x07",
                      owned_partitions=owned if v >= 1 else [],
                      generation_id=9 if v >= 2 else -1, rack_id=rack).encode())
            for v in range(4) for rack in ((None, "") if v == 3 else (None,))]


def _join_group(subscriptions: list[bytes]) -> list[Spec]:
    from kafka.protocol.consumer import JoinGroupRequest

    proto = JoinGroupRequest.JoinGroupRequestProtocol
    names = ("range", "cooperative-sticky", "custom", "roundrobin", "sticky")
    out: list[Spec] = []
    for v in range(10):
        request = JoinGroupRequest(
            version=v, group_id="group", session_timeout_ms=10_000,
            rebalance_timeout_ms=30_000, member_id="m-1", group_instance_id="static-1",
            protocol_type="consumer", reason="joining",
            protocols=[proto(name=n, metadata=m)
                       for n, m in zip(names, subscriptions, strict=True)])
        out.append((f"join group v{v}", _versioned(_join, v), [framed(request)]))
    return out


def heartbeat(version: int, epoch: int, rack: str | None) -> bytes:
    """A ConsumerGroupHeartbeat request frame (Kafka's schema, v0-v1; header v2)."""
    body = b"".join((
        encode_string("group", True), encode_string("member-1", True), pack_int32(epoch),
        encode_string("i-1", True), encode_string(rack, True), pack_int32(45_000),
        encode_array_len(1, True), encode_string("orders", True),
        *((encode_string(None, True),) if version >= 1 else ()),  # SubscribedTopicRegex
        encode_string("uniform", True), encode_array_len(None, True), b"\x00"))
    head = struct.pack(">hhih", 68, version, 11, 1) + b"c" + b"\x00"
    return pack_int32(len(head) + len(body)) + head + body


def locality_targets() -> list[Spec]:
    """(name, decoder, seeds) for every rack-locality decoder and version."""
    subscriptions = _subscriptions()
    out = _fetch() + _join_group(subscriptions)
    out.append(("consumer subscription parse", parse_subscription, subscriptions))
    for upgrade in (False, True):
        out.append((f"consumer subscription rack upgrade={upgrade}",
                     _versioned(_with_rack, upgrade), subscriptions))
    for v in (0, 1):
        out.append((f"consumer group heartbeat v{v}", _versioned(_heartbeat, v),
                    [heartbeat(v, 0, None), heartbeat(v, 0, ""), heartbeat(v, 3, None)]))
    return out
