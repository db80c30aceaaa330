"""Discovery APIs of the simulator (a TEST DOUBLE): ApiVersions, Metadata,
FindCoordinator, DescribeCluster.

Invariant: only live brokers are listed; partitions show every replica,
the current ISR (which may name a dead broker), the dead replicas as
offline, and leader -1 with LEADER_NOT_AVAILABLE when no leader is live.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorResponse, MetadataResponse

from simulator import errors
from simulator.handlers.base import Ctx
from simulator.state import NO_LEADER, StateError, Topic
from simulator.versions import SUPPORTED

ZERO_UUID = uuid.UUID(int=0)
_MB = MetadataResponse.MetadataResponseBroker
_MT = MetadataResponse.MetadataResponseTopic
_MP = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition


def api_versions_body(error: int = errors.NONE) -> Any:
    keys = [
        ApiVersionsResponse.ApiVersion(
            api_key=s.key, min_version=s.min_version, max_version=s.max_version
        )
        for s in sorted(SUPPORTED.values(), key=lambda s: s.key)
    ]
    return ApiVersionsResponse(error_code=error, api_keys=keys, throttle_time_ms=0)


async def api_versions(ctx: Ctx, req: Any) -> Any:
    return api_versions_body()


def _topic_metadata(ctx: Ctx, topic: Topic) -> Any:
    state = ctx.core.state
    parts = []
    for p in topic.partitions:
        parts.append(
            _MP(
                error_code=errors.LEADER_NOT_AVAILABLE if p.leader == NO_LEADER else errors.NONE,
                partition_index=p.index,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=[r for r in p.replicas if not state.brokers[r].alive],
            )
        )
    return _MT(
        error_code=errors.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=False,
        partitions=parts,
        authorized_operations=None,
    )


def _missing(name: str | None, topic_id: uuid.UUID, code: int) -> Any:
    return _MT(
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[],
        authorized_operations=None,
    )


async def metadata(ctx: Ctx, req: Any) -> Any:
    state = ctx.core.state
    requested = req.topics
    if ctx.version == 0 and not requested:
        requested = None
    auto = ctx.version < 4 or bool(req.allow_auto_topic_creation)
    topics = []
    if requested is None:
        topics = [_topic_metadata(ctx, t) for t in state.topics.values()]
    else:
        for rt in requested:
            name = rt.name
            topic_id = rt.topic_id if ctx.version >= 10 else None
            if not name and topic_id is not None and topic_id != ZERO_UUID:
                name = state.topic_ids.get(topic_id)
                if name is None:
                    topics.append(_missing(None, topic_id, errors.UNKNOWN_TOPIC_ID))
                    continue
            topic = state.topics.get(name) if name else None
            if topic is None and name and auto:
                try:
                    topic = ctx.core.auto_create(name)
                except StateError as exc:
                    topics.append(_missing(name, ZERO_UUID, exc.code))
                    continue
            if topic is None:
                topics.append(_missing(name, ZERO_UUID, errors.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                topics.append(_topic_metadata(ctx, topic))
    brokers = [
        _MB(node_id=b.node_id, host=ctx.core.config.public_host, port=b.port, rack=b.rack)
        for b in state.live_brokers()
    ]
    controller = state.coordinator()
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=ctx.core.config.cluster_id,
        controller_id=-1 if controller is None else controller,
        topics=topics,
        authorized_operations=None,
        error_code=errors.NONE,
    )


async def find_coordinator(ctx: Ctx, req: Any) -> Any:
    coordinator = ctx.core.state.coordinator()
    if coordinator is None:
        error, node, host, port = errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    else:
        error, node = errors.NONE, coordinator
        host, port = ctx.core.address(coordinator)
    if ctx.version <= 3:
        return FindCoordinatorResponse(
            throttle_time_ms=0, error_code=error, error_message=None,
            node_id=node, host=host, port=port,
        )
    coordinators = [
        FindCoordinatorResponse.Coordinator(
            key=key, node_id=node, host=host, port=port, error_code=error, error_message=None
        )
        for key in req.coordinator_keys
    ]
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)


async def describe_cluster(ctx: Ctx, req: Any) -> Any:
    state = ctx.core.state
    controller = state.coordinator()
    brokers = [
        DescribeClusterResponse.DescribeClusterBroker(
            broker_id=b.node_id, host=ctx.core.config.public_host, port=b.port, rack=b.rack,
            is_fenced=False,
        )
        for b in state.live_brokers()
    ]
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=errors.NONE,
        error_message=None,
        endpoint_type=1,
        cluster_id=ctx.core.config.cluster_id,
        controller_id=-1 if controller is None else controller,
        brokers=brokers,
        authorized_operations=None,
    )
