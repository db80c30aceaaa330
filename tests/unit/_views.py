"""Test helpers: Metadata values, a cluster view store and a fake clock, built directly.

Invariant: only tests import this; no sockets, no real clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from protocol.addresses import BrokerAddress
from protocol.metadata import MetadataSnapshot, PartitionMetadata, TopicMetadata


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def tid(n: int) -> bytes:
    return uuid.UUID(int=n).bytes


def broker(n: int, rack: str | None) -> BrokerAddress:
    return BrokerAddress(n, f"b{n}.internal", 9092 + n, rack)


def part(
    i: int,
    isr: Sequence[int],
    replicas: Sequence[int] = (1, 2, 3),
    leader: int | None = None,
    offline: Sequence[int] = (),
    epoch: int = 4,
) -> PartitionMetadata:
    if leader is None:
        leader = isr[0] if isr else -1
    return PartitionMetadata(i, 0, leader, epoch, tuple(replicas), tuple(isr), tuple(offline))


def topic(
    name: str, parts: Sequence[PartitionMetadata], topic_id: bytes | None = None, error: int = 0
) -> TopicMetadata:
    return TopicMetadata(name, topic_id, error, False, tuple(parts))


BROKERS = (broker(1, "rack-a"), broker(2, "rack-b"), broker(3, "rack-c"))


def snap(
    topics: Sequence[TopicMetadata],
    brokers: Sequence[BrokerAddress] = BROKERS,
    cluster_id: str | None = "cluster-1",
) -> MetadataSnapshot:
    return MetadataSnapshot(tuple(brokers), cluster_id, 1, tuple(topics))
