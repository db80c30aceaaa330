"""Fetch and ListOffsets on the simulator (a TEST DOUBLE).

Invariant: a partition's live leader serves it, and so does a live follower for a
consumer's Fetch v11+ (KIP-392: every replica shares the one log here, up to the high
watermark). With ``replica_selector="rack_aware"`` the leader answers a consumer that
names its rack (v11+) and is not in it with the first in-sync, live replica in that rack
as ``preferred_read_replica`` and no records, as Kafka's RackAwareReplicaSelector does;
the leader itself, or no same-rack replica, means no redirect. A fetch returns whole
stored batches from the one holding the fetch offset up to the high
watermark (read_uncommitted) or last stable offset (read_committed), at
least one batch when any is available, and waits up to max_wait_ms for an
append when it has nothing to return. Fetch sessions are not kept: every
response carries session id 0, so clients keep sending full fetches.
"""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.consumer import FetchResponse, ListOffsetsResponse

from simulator import errors
from simulator.handlers.base import Ctx
from simulator.records import parse_header

_FT = FetchResponse.FetchableTopicResponse
_FP = FetchResponse.FetchableTopicResponse.PartitionData
READ_COMMITTED = 1
EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3


def _is_consumer(ctx: Ctx, req: Any) -> bool:
    if ctx.version >= 15:
        state = getattr(req, "replica_state", None)
        return state is None or getattr(state, "replica_id", -1) < 0
    return bool(req.replica_id < 0)


def _read_replica(ctx: Ctx, req: Any, part: Any) -> int:
    """The replica a rack-aware leader sends this consumer to; -1: read here."""
    if ctx.core.config.replica_selector != "rack_aware" or ctx.version < 11:
        return -1
    rack = req.rack_id
    brokers = ctx.core.state.brokers
    if not rack or brokers[part.leader].rack == rack or not _is_consumer(ctx, req):
        return -1
    for r in part.replicas:
        if r in part.isr and brokers[r].alive and brokers[r].rack == rack:
            return int(r)
    return -1


def _fetch_partition(ctx: Ctx, req: Any, name: str | None, fp: Any) -> tuple[Any, int]:
    part = ctx.core.state.partition(name, fp.partition) if name is not None else None
    unknown = errors.UNKNOWN_TOPIC_ID if ctx.version >= 13 else errors.UNKNOWN_TOPIC_OR_PARTITION
    out = _FP(
        partition_index=fp.partition, error_code=errors.NONE, high_watermark=-1,
        last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
        preferred_read_replica=-1, records=b"",
    )
    if part is None:
        out.error_code = unknown
        return out, 0
    log = part.log
    out.high_watermark = log.high_watermark
    out.last_stable_offset = log.last_stable_offset
    out.log_start_offset = log.log_start_offset
    epoch = fp.current_leader_epoch if ctx.version >= 9 else -1
    leader = part.leader == ctx.node_id
    follower = (not leader and part.leader >= 0 and ctx.version >= 11
                and ctx.node_id in part.replicas and _is_consumer(ctx, req))
    if not leader and not follower:
        out.error_code = errors.NOT_LEADER_OR_FOLLOWER
    elif epoch >= 0 and epoch < part.leader_epoch:
        out.error_code = errors.FENCED_LEADER_EPOCH
    elif epoch > part.leader_epoch:
        out.error_code = errors.UNKNOWN_LEADER_EPOCH
    elif not log.log_start_offset <= fp.fetch_offset <= log.log_end_offset:
        out.error_code = errors.OFFSET_OUT_OF_RANGE
    elif leader and (preferred := _read_replica(ctx, req, part)) >= 0:
        out.preferred_read_replica = preferred
    else:
        # no transactions: the last stable offset is the high watermark, nothing aborted
        out.records = log.read(fp.fetch_offset, fp.partition_max_bytes, log.high_watermark)
        if req.isolation_level == READ_COMMITTED:
            out.aborted_transactions = []
    return out, len(out.records)


def _fetch_once(ctx: Ctx, req: Any) -> tuple[list[Any], int, bool]:
    state = ctx.core.state
    topics = []
    total = 0
    any_error = False
    for ft in req.topics:
        if ctx.version >= 13:
            name = state.topic_ids.get(ft.topic_id)
        else:
            name = ft.topic
        parts = []
        for fp in ft.partitions:
            budget = max(req.max_bytes - total, 0) if total else fp.partition_max_bytes
            part_out, size = _fetch_partition(ctx, req, name, fp)
            if size and size > budget and total:
                part_out.records = b""
                size = 0
            total += size
            # an error or a redirect is answered at once, as Kafka does
            any_error = (any_error or part_out.error_code != errors.NONE
                         or part_out.preferred_read_replica >= 0)
            parts.append(part_out)
        topics.append(_FT(topic=ft.topic if ctx.version < 13 else name or "",
                          topic_id=ft.topic_id if ctx.version >= 13 else None,
                          partitions=parts))
    return topics, total, any_error


async def fetch(ctx: Ctx, req: Any) -> Any:
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    while True:
        topics, total, any_error = _fetch_once(ctx, req)
        remaining = deadline - time.monotonic()
        if total >= max(req.min_bytes, 1) or any_error or remaining <= 0:
            break
        await ctx.core.wait_for_append(remaining)
    ctx.core.count_fetch(ctx.client_id, ctx.node_id, total)
    return FetchResponse(
        throttle_time_ms=0, error_code=errors.NONE, session_id=0, responses=topics
    )


def _offset_for_timestamp(log: Any, timestamp: int) -> tuple[int, int]:
    """(offset, timestamp) of the first batch whose max timestamp >= `timestamp`."""
    for raw in log.batches():
        header = parse_header(raw)
        if not header.is_control and header.max_timestamp >= timestamp:
            return header.base_offset, header.max_timestamp
    return -1, -1


async def list_offsets(ctx: Ctx, req: Any) -> Any:
    state = ctx.core.state
    topics = []
    for lt in req.topics:
        parts = []
        for lp in lt.partitions:
            part = state.partition(lt.name, lp.partition_index)
            out = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                partition_index=lp.partition_index, error_code=errors.NONE,
                timestamp=-1, offset=-1, leader_epoch=-1,
            )
            if part is None:
                out.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif part.leader != ctx.node_id:
                out.error_code = errors.NOT_LEADER_OR_FOLLOWER
            else:
                log = part.log
                out.leader_epoch = part.leader_epoch
                if lp.timestamp == EARLIEST:
                    out.offset = log.log_start_offset
                elif lp.timestamp in (LATEST, MAX_TIMESTAMP) or lp.timestamp < 0:
                    out.offset = log.high_watermark
                else:
                    out.offset, out.timestamp = _offset_for_timestamp(log, lp.timestamp)
            parts.append(out)
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=lt.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
