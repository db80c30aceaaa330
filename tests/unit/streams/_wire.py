"""Kafka Streams' assignment data written in Python for the tests: SubscriptionInfo v11
and AssignmentInfo v11 in their consumer-protocol envelopes (kafka-python's classes).
The writers are checked against the golden bytes Kafka Streams' own classes wrote
(test_wire_writers_match_kafka_streams), so what they write is what Streams writes."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as Assignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Subscription


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _task(task: str) -> tuple[int, int]:
    sub, part = task.split("_")
    return int(sub), int(part)


def subscription_info(process: str, tags: Mapping[str, str], offsets: Mapping[str, int],
                      endpoint: str = "", unique: int = 0) -> bytes:
    out = [struct.pack(">ii", 11, 11), uuid.UUID(process).bytes, _bytes(endpoint.encode()),
           struct.pack(">i", len(offsets))]
    for task, offset in offsets.items():
        out.append(struct.pack(">iiqh", *_task(task), offset, -1))
    out.append(struct.pack(">bii", unique, 0, len(tags)))
    for key, value in sorted(tags.items()):
        out += [_bytes(key.encode()), _bytes(value.encode())]
    return b"".join(out)


def assignment_info(active: Sequence[str], standby: Sequence[str], topic: str = "words"
                    ) -> bytes:
    out = [struct.pack(">iii", 11, 11, len(active))]
    out += [struct.pack(">iii", *_task(t), 0) for t in active]
    out.append(struct.pack(">i", len(standby)))
    for t in standby:
        name = topic.encode()
        out.append(struct.pack(">iiii", *_task(t), 0, 1) + struct.pack(">H", len(name)) + name
                   + struct.pack(">i", _task(t)[1]))
    out.append(struct.pack(">iiiiq", 0, 0, 0, 0, (1 << 63) - 1))
    return b"".join(out)


def member_metadata(info: bytes, topics: Sequence[str] = ("words",), rack: str | None = None
                    ) -> bytes:
    return bytes(Subscription(version=3, topics=list(topics), user_data=info,
                              owned_partitions=[], generation_id=-1, rack_id=rack).encode())


def member_assignment(info: bytes) -> bytes:
    return bytes(Assignment(version=3, assigned_partitions=[], user_data=info).encode())
