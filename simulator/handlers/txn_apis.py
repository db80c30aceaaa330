"""Producer-id and transaction APIs of the simulator (a TEST DOUBLE).

Invariant: InitProducerId without a transactional id is answered by any
broker; every transactional request must reach the coordinator broker
(lowest live node id), else NOT_COORDINATOR. The logic is in simulator.txn.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    TxnOffsetCommitResponse,
)

from simulator import errors
from simulator.groups import CommittedOffset
from simulator.handlers.base import Ctx


async def init_producer_id(ctx: Ctx, req: Any) -> Any:
    tid = req.transactional_id
    error = ctx.coordinator_error() if tid else errors.NONE
    pid, epoch = -1, -1
    if not error:
        error, pid, epoch = ctx.core.txns.init_producer_id(tid, req.transaction_timeout_ms)
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=error, producer_id=pid, producer_epoch=epoch
    )


async def add_partitions_to_txn(ctx: Ctx, req: Any) -> Any:
    error = ctx.coordinator_error()
    partitions = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    for topic, index in partitions:
        if not error and ctx.core.state.partition(topic, index) is None:
            error = errors.UNKNOWN_TOPIC_OR_PARTITION
    if not error:
        error = ctx.core.txns.add_partitions(
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            partitions,
        )
    result_cls = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    part_cls = result_cls.AddPartitionsToTxnPartitionResult
    results = [
        result_cls(
            name=t.name,
            results_by_partition=[
                part_cls(partition_index=p, partition_error_code=error) for p in t.partitions
            ],
        )
        for t in req.v3_and_below_topics
    ]
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)


async def add_offsets_to_txn(ctx: Ctx, req: Any) -> Any:
    error = ctx.coordinator_error() or ctx.core.txns.add_offsets(
        req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
    )
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)


async def end_txn(ctx: Ctx, req: Any) -> Any:
    error = ctx.coordinator_error() or ctx.core.txns.end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed)
    )
    return EndTxnResponse(throttle_time_ms=0, error_code=error)


async def txn_offset_commit(ctx: Ctx, req: Any) -> Any:
    error = ctx.coordinator_error()
    offsets = {
        (t.name, p.partition_index): CommittedOffset(
            p.committed_offset,
            p.committed_leader_epoch if ctx.version >= 2 else -1,
            p.committed_metadata,
        )
        for t in req.topics
        for p in t.partitions
    }
    if not error:
        error = ctx.core.txns.commit_offsets(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id, offsets
        )
    topic_cls = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    part_cls = topic_cls.TxnOffsetCommitResponsePartition
    topics = [
        topic_cls(
            name=t.name,
            partitions=[part_cls(partition_index=p.partition_index, error_code=error)
                        for p in t.partitions],
        )
        for t in req.topics
    ]
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics)
