"""Produce frames made by kafka-python (the oracle, Kafka's own message schemas): for the
codec tests and the benchmarks that drive the proxy's produce path.

Invariant: only tests and benchmarks import this (the product never does);
kafka-python is never imported by ``protocol``.
Topics are given as ``(key, [(index, records or None), ...])`` with key a name
(str) for v3-v12 and a 16-byte id for v13.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kafka.protocol.producer import ProduceRequest as KPRequest
from kafka.protocol.producer import ProduceResponse as KPResponse
from kafka.record.memory_records import MemoryRecordsBuilder

from protocol.produce import TopicKey

TopicSpec = tuple[TopicKey, Sequence[tuple[int, bytes | None]]]
VERSIONS = range(3, 14)


def make_batch(
    n_records: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    value: bytes = b"v",
) -> bytes:
    """One magic-v2 record batch built by kafka-python."""
    b = MemoryRecordsBuilder(
        magic=2,
        compression_type=0,
        batch_size=1 << 20,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for i in range(n_records):
        b.append(timestamp=1_700_000_000_000 + i, key=None, value=value + bytes([i % 256]))
    b.close()
    return bytes(b.buffer())


def tid(n: int) -> bytes:
    return uuid.UUID(int=n).bytes


def _key_kwargs(key: TopicKey, version: int) -> dict[str, Any]:
    if version >= 13:
        assert isinstance(key, bytes)
        return {"topic_id": uuid.UUID(bytes=key)}
    return {"name": key}


def kp_request(
    version: int,
    topics: Sequence[TopicSpec],
    *,
    acks: int = -1,
    timeout_ms: int = 30_000,
    transactional_id: str | None = None,
    correlation_id: int = 42,
    client_id: str | None = "rackguard-test",
) -> bytes:
    """A complete request frame (size prefix + header + body) encoded by kafka-python."""
    cls = KPRequest[version]
    tcls = cls.TopicProduceData
    pcls = tcls.PartitionProduceData
    topic_data = []
    for key, parts in topics:
        kw = _key_kwargs(key, version)
        topic_data.append(
            tcls(partition_data=[pcls(index=i, records=r) for i, r in parts], **kw)
        )
    req = cls(
        transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=topic_data
    )
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(req.encode(header=True, framed=True))


def kp_topic_key(t: Any, version: int) -> TopicKey:
    """A decoded topic's key; kafka-python decodes the all-zero topic id as None."""
    if version < 13:
        return str(t.name)
    return bytes(16) if t.topic_id is None else bytes(t.topic_id.bytes)


def kp_decode_request(frame: bytes, version: int) -> Any:
    return KPRequest.decode(frame, version=version, header=True, framed=True)


def kp_request_topics(decoded: Any, version: int) -> list[TopicSpec]:
    out: list[TopicSpec] = []
    for t in decoded.topic_data:
        key = kp_topic_key(t, version)
        out.append(
            (key, [(p.index, None if p.records is None else bytes(p.records))
                   for p in t.partition_data])
        )
    return out


def kp_response(
    version: int,
    topics: Sequence[tuple[TopicKey, Sequence[dict[str, Any]]]],
    *,
    throttle_time_ms: int = 0,
    node_endpoints: Sequence[dict[str, Any]] | None = None,
    correlation_id: int = 42,
) -> bytes:
    """A complete response frame encoded by kafka-python; partitions as field dicts."""
    cls = KPResponse[version]
    tcls = cls.TopicProduceResponse
    pcls = tcls.PartitionProduceResponse
    responses = []
    for key, parts in topics:
        kw = _key_kwargs(key, version)
        prs = []
        for p in parts:
            p = dict(p)
            if "record_errors" in p:
                p["record_errors"] = [
                    pcls.BatchIndexAndErrorMessage(
                        batch_index=i, batch_index_error_message=m
                    )
                    for i, m in p["record_errors"]
                ]
            if p.get("current_leader") is not None:
                lid, ep = p["current_leader"]
                p["current_leader"] = pcls.LeaderIdAndEpoch(leader_id=lid, leader_epoch=ep)
            prs.append(pcls(**p))
        responses.append(tcls(partition_responses=prs, **kw))
    kw2: dict[str, Any] = {}
    if node_endpoints is not None:
        kw2["node_endpoints"] = [cls.NodeEndpoint(**e) for e in node_endpoints]
    resp = cls(responses=responses, throttle_time_ms=throttle_time_ms, **kw2)
    resp.with_header(correlation_id=correlation_id)
    return bytes(resp.encode(header=True, framed=True))


def kp_decode_response(frame: bytes, version: int) -> Any:
    return KPResponse.decode(frame, version=version, header=True, framed=True)
