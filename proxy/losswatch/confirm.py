"""Confirmation: read a partition's current leader, over the proxy's own connection to it.

One ListOffsets (latest: the high watermark, kept for the record) and one
OffsetForLeaderEpoch (the end offset of the epoch before the current one: where the
current epoch starts) per leader, for all the partitions it leads that are being
checked, both naming the view's current leader epoch so that a broker that is not that
leader answers an error. The reading's error is OffsetForLeaderEpoch's: a ListOffsets
error (OFFSET_NOT_AVAILABLE while a new leader's watermark catches up, after an unclean
election for tens of seconds) does not hold a verdict back. The requests are sent
with the injected :class:`BrokerAsk` (the poller's connection to that broker, in the
app; a fake in the tests).

Invariant: never raises for a broker's answer or failure: a partition whose reading
failed gets a :class:`~proxy.losswatch.rule.Reading` with an error (-1 for a request that
failed as a whole), which the rule treats as inconclusive.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

from protocol.primitives import Buffer
from proxy.losswatch.rule import Reading

log = logging.getLogger("rackguard.losswatch")

LIST_OFFSETS = 2
OFFSET_FOR_LEADER_EPOCH = 23
LIST_OFFSETS_MAX = 7  # v4+: current_leader_epoch
EPOCH_MAX = 4  # v2+: current_leader_epoch
EPOCH_MIN = 2
LATEST = -1
REQUEST_FAILED = -1  # the error of a partition whose request failed as a whole


class BrokerAsk(Protocol):
    """Send one request of the proxy's own to broker ``node_id``: ``build(version)`` makes
    it at the version chosen (the broker's highest, at most ``max_version``); returns the
    answer frame (size prefix included) and that version. Raises on any failure, and
    ``LookupError`` when the broker has no version in ``min_version .. max_version``."""

    def __call__(self, node_id: int, api_key: int, min_version: int, max_version: int,
                 build: Callable[[int], Any]) -> Awaitable[tuple[Buffer, int]]: ...


Target = tuple[str, int, int]  # topic name, partition, current leader epoch


async def read_leader(ask: BrokerAsk, leader: int, targets: Sequence[Target],
                      clock: Callable[[], float]) -> dict[tuple[str, int], Reading]:
    """Readings of ``targets`` from broker ``leader``."""
    marks = await _high_watermarks(ask, leader, targets)
    starts = await _epoch_starts(ask, leader, targets)
    at = clock()
    out: dict[tuple[str, int], Reading] = {}
    for name, index, epoch in targets:
        # the high watermark is for the record only: a new leader answers ListOffsets with
        # OFFSET_NOT_AVAILABLE until its followers have caught up, which can take long
        # after an unclean election, while its epoch start is known at once
        _, hw = marks.get((name, index), (REQUEST_FAILED, -1))
        error, start = starts.get((name, index), (0, None))
        out[(name, index)] = Reading(leader, epoch, error, hw, start, at)
    return out


def _by_topic(targets: Sequence[Target]) -> dict[str, list[tuple[int, int]]]:
    topics: dict[str, list[tuple[int, int]]] = {}
    for name, index, epoch in targets:
        topics.setdefault(name, []).append((index, epoch))
    return topics


async def _high_watermarks(ask: BrokerAsk, leader: int, targets: Sequence[Target]
                           ) -> dict[tuple[str, int], tuple[int, int]]:
    topic_cls = ListOffsetsRequest.ListOffsetsTopic
    part_cls = topic_cls.ListOffsetsPartition

    def build(version: int) -> Any:
        return ListOffsetsRequest(version=version, replica_id=-1, isolation_level=0, topics=[
            topic_cls(name=name, partitions=[
                part_cls(partition_index=i, current_leader_epoch=e, timestamp=LATEST)
                for i, e in parts]) for name, parts in _by_topic(targets).items()])

    try:
        frame, version = await ask(leader, LIST_OFFSETS, 4, LIST_OFFSETS_MAX, build)
        answer = ListOffsetsResponse.decode(bytes(frame), version=version, header=True,
                                            framed=True)
    except Exception as exc:  # noqa: BLE001 - any failure is an inconclusive reading
        log.info("loss watch: ListOffsets to broker %d failed: %s", leader, exc)
        return {}
    return {(t.name, p.partition_index): (p.error_code, p.offset)
            for t in answer.topics for p in t.partitions}


async def _epoch_starts(ask: BrokerAsk, leader: int, targets: Sequence[Target]
                        ) -> dict[tuple[str, int], tuple[int, int | None]]:
    topic_cls = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    part_cls = topic_cls.OffsetForLeaderPartition

    def build(version: int) -> Any:
        return OffsetForLeaderEpochRequest(version=version, replica_id=-1, topics=[
            topic_cls(topic=name, partitions=[
                part_cls(partition=i, current_leader_epoch=e, leader_epoch=e - 1)
                for i, e in parts]) for name, parts in _by_topic(targets).items()])

    try:
        frame, version = await ask(leader, OFFSET_FOR_LEADER_EPOCH, EPOCH_MIN, EPOCH_MAX,
                                   build)
        answer = OffsetForLeaderEpochResponse.decode(bytes(frame), version=version,
                                                     header=True, framed=True)
    except LookupError:
        return {}  # too old a broker: no epoch start, so nothing will be reported
    except Exception as exc:  # noqa: BLE001
        log.info("loss watch: OffsetForLeaderEpoch to broker %d failed: %s", leader, exc)
        return {(name, index): (REQUEST_FAILED, None) for name, index, _ in targets}
    out: dict[tuple[str, int], tuple[int, int | None]] = {}
    for t in answer.topics:
        for p in t.partitions:
            start = p.end_offset if p.end_offset >= 0 else None
            out[(t.topic, p.partition)] = (p.error_code, start)
    return out
