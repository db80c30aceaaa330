"""A fake partition leader for the loss watch's reads: answers ListOffsets and
OffsetForLeaderEpoch from a table, as Kafka does (an error for a stale current epoch).

Invariant: only tests import this; no sockets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer.offsets import ListOffsetsResponse, OffsetForLeaderEpochResponse

from proxy.losswatch.confirm import LIST_OFFSETS

FENCED_LEADER_EPOCH = 74
NOT_LEADER = 6


@dataclass
class LeaderLog:
    node: int
    epoch: int  # the leader's current epoch
    epoch_start: int  # where that epoch starts in its log
    high_watermark: int


class FakeLeaders:
    """Partition logs by (topic, partition); every request is answered by the broker asked."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], LeaderLog] = {}
        self.asked: list[tuple[int, int]] = []  # (node, api key)
        self.fail_nodes: set[int] = set()
        self.no_epoch_api = False
        self.watermark_error = 0  # e.g. OFFSET_NOT_AVAILABLE (78) from a new leader

    async def __call__(self, node_id: int, api_key: int, min_version: int, max_version: int,
                       build: Callable[[int], Any]) -> tuple[bytes, int]:
        self.asked.append((node_id, api_key))
        if node_id in self.fail_nodes:
            raise ConnectionError("broker down")
        if api_key != LIST_OFFSETS and self.no_epoch_api:
            raise LookupError("too old")
        request = build(max_version)
        if api_key == LIST_OFFSETS:
            return self._list_offsets(node_id, request, max_version), max_version
        return self._epochs(node_id, request, max_version), max_version

    def _check(self, node: int, name: str, index: int, epoch: int) -> tuple[int, LeaderLog]:
        log = self.logs[(name, index)]
        if log.node != node:
            return NOT_LEADER, log
        if log.epoch != epoch:
            return FENCED_LEADER_EPOCH, log
        return 0, log

    def _list_offsets(self, node: int, request: Any, version: int) -> bytes:
        rt = ListOffsetsResponse.ListOffsetsTopicResponse
        rp = rt.ListOffsetsPartitionResponse
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                error, log = self._check(node, t.name, p.partition_index, p.current_leader_epoch)
                error = error or self.watermark_error
                parts.append(rp(partition_index=p.partition_index, error_code=error,
                                timestamp=-1, offset=-1 if error else log.high_watermark,
                                leader_epoch=log.epoch))
            topics.append(rt(name=t.name, partitions=parts))
        answer = ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)
        answer.with_header(correlation_id=1)
        return bytes(answer.encode(header=True, framed=True))

    def _epochs(self, node: int, request: Any, version: int) -> bytes:
        rt = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
        rp = rt.EpochEndOffset
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                error, log = self._check(node, t.topic, p.partition, p.current_leader_epoch)
                assert p.leader_epoch == p.current_leader_epoch - 1
                parts.append(rp(partition=p.partition, error_code=error,
                                leader_epoch=-1 if error else p.leader_epoch,
                                end_offset=-1 if error else log.epoch_start))
            topics.append(rt(topic=t.topic, partitions=parts))
        answer = OffsetForLeaderEpochResponse(version=version, throttle_time_ms=0,
                                              topics=topics)
        answer.with_header(correlation_id=1)
        return bytes(answer.encode(header=True, framed=True))
