"""Consumer-group APIs of the simulator (a TEST DOUBLE): Join/Sync/Heartbeat/Leave,
OffsetCommit/OffsetFetch. (DescribeGroups and ListGroups, which no test of the proxy
needs, are not simulated: kafka-consumer-groups runs on real Kafka, tests/system.)

Invariant: only the coordinator broker (lowest live node id) answers group
requests; the others say NOT_COORDINATOR. All group logic lives in
simulator.groups; this module only maps wire structures to it.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)

from simulator import errors
from simulator.groups import CommittedOffset
from simulator.handlers.base import Ctx


async def join_group(ctx: Ctx, req: Any) -> Any:
    error = ctx.coordinator_error()
    if error:
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=error, generation_id=-1, protocol_name=None,
            leader="", member_id=req.member_id, members=[],
        )
    rebalance_timeout = req.rebalance_timeout_ms if ctx.version >= 1 else req.session_timeout_ms
    result = await ctx.core.groups.join(
        req.group_id,
        req.member_id,
        req.group_instance_id if ctx.version >= 5 else None,
        ctx.client_id or "",
        req.session_timeout_ms,
        rebalance_timeout,
        req.protocol_type,
        [(p.name, bytes(p.metadata)) for p in req.protocols],
    )
    members = [
        JoinGroupResponse.JoinGroupResponseMember(
            member_id=m, group_instance_id=inst, metadata=meta
        )
        for m, inst, meta in result.members
    ]
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        leader=result.leader,
        skip_assignment=False,
        member_id=result.member_id or req.member_id,
        members=members,
    )


async def sync_group(ctx: Ctx, req: Any) -> Any:
    error = ctx.coordinator_error()
    if error:
        return SyncGroupResponse(throttle_time_ms=0, error_code=error, assignment=b"")
    assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
    result = await ctx.core.groups.sync(
        req.group_id, req.generation_id, req.member_id, assignments
    )
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def heartbeat(ctx: Ctx, req: Any) -> Any:
    error = ctx.coordinator_error() or ctx.core.groups.heartbeat(
        req.group_id, req.generation_id, req.member_id
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


async def leave_group(ctx: Ctx, req: Any) -> Any:
    error = ctx.coordinator_error()
    if ctx.version <= 2:
        if not error:
            error = ctx.core.groups.leave(req.group_id, [req.member_id])[0]
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
    responses = []
    for m in req.members:
        member_id = m.member_id
        if not member_id and m.group_instance_id:
            member_id = ctx.core.groups.member_for_instance(req.group_id, m.group_instance_id) or ""
        code = error or ctx.core.groups.leave(req.group_id, [member_id])[0]
        responses.append(
            LeaveGroupResponse.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code
            )
        )
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=responses)


async def offset_commit(ctx: Ctx, req: Any) -> Any:
    error = ctx.coordinator_error()
    generation = req.generation_id_or_member_epoch if ctx.version >= 1 else -1
    member = req.member_id if ctx.version >= 1 else ""
    if not error:
        error = ctx.core.groups.check_commit(req.group_id, generation, member)
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            epoch = p.committed_leader_epoch if ctx.version >= 6 else -1
            offsets[(t.name, p.partition_index)] = CommittedOffset(
                p.committed_offset, epoch, p.committed_metadata
            )
            parts.append(
                OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=error
                )
            )
        topics.append(OffsetCommitResponse.OffsetCommitResponseTopic(name=t.name, partitions=parts))
    if not error:
        ctx.core.groups.store_offsets(req.group_id, offsets)
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)


def _fetched(
    ctx: Ctx, group_id: str, topics: list[Any] | None
) -> list[tuple[str, list[tuple[int, CommittedOffset | None]]]]:
    committed = ctx.core.groups.committed(group_id)
    if topics is None:
        by_topic: dict[str, list[tuple[int, CommittedOffset | None]]] = {}
        for (topic, index), off in sorted(committed.items()):
            by_topic.setdefault(topic, []).append((index, off))
        return list(by_topic.items())
    return [
        (t.name, [(i, committed.get((t.name, i))) for i in t.partition_indexes]) for t in topics
    ]


async def offset_fetch(ctx: Ctx, req: Any) -> Any:
    error = ctx.coordinator_error()
    if ctx.version <= 7:
        topic_cls = OffsetFetchResponse.OffsetFetchResponseTopic
        part_cls = topic_cls.OffsetFetchResponsePartition
        topics = [] if error else [
            topic_cls(name=name, partitions=[
                part_cls(
                    partition_index=i,
                    committed_offset=off.offset if off else -1,
                    committed_leader_epoch=off.leader_epoch if off else -1,
                    metadata=(off.metadata if off else "") or "",
                    error_code=errors.NONE,
                )
                for i, off in parts
            ])
            for name, parts in _fetched(ctx, req.group_id, req.topics)
        ]
        return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=error)
    group_cls = OffsetFetchResponse.OffsetFetchResponseGroup
    gtopic_cls = group_cls.OffsetFetchResponseTopics
    gpart_cls = gtopic_cls.OffsetFetchResponsePartitions
    groups = []
    for g in req.groups:
        gtopics = [] if error else [
            gtopic_cls(name=name, partitions=[
                gpart_cls(
                    partition_index=i,
                    committed_offset=off.offset if off else -1,
                    committed_leader_epoch=off.leader_epoch if off else -1,
                    metadata=(off.metadata if off else "") or "",
                    error_code=errors.NONE,
                )
                for i, off in parts
            ])
            for name, parts in _fetched(ctx, g.group_id, g.topics)
        ]
        groups.append(group_cls(group_id=g.group_id, topics=gtopics, error_code=error))
    return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
