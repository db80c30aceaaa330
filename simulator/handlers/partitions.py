"""Partition admin APIs of the simulator (a TEST DOUBLE): CreatePartitions,
AlterPartitionReassignments, ListPartitionReassignments.

Invariant: a reassignment completes at once (nothing is copied), so
ListPartitionReassignments always answers that none is in progress; a
``validate_only`` CreatePartitions checks and changes nothing.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    AlterPartitionReassignmentsResponse,
    CreatePartitionsResponse,
    ListPartitionReassignmentsResponse,
)

from simulator import errors
from simulator.handlers.base import Ctx
from simulator.state import StateError


async def create_partitions(ctx: Ctx, req: Any) -> Any:
    state = ctx.core.state
    results = []
    for t in req.topics:
        error, message = errors.NONE, None
        assignment = ([list(a.broker_ids) for a in t.assignments]
                      if t.assignments is not None else None)
        try:
            if req.validate_only:
                if t.name not in state.topics:
                    raise StateError(errors.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"unknown topic {t.name!r}")
            else:
                state.add_partitions(t.name, t.count, assignment)
        except StateError as exc:
            error, message = exc.code, exc.message
        results.append(CreatePartitionsResponse.CreatePartitionsTopicResult(
            name=t.name, error_code=error, error_message=message))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


async def alter_partition_reassignments(ctx: Ctx, req: Any) -> Any:
    state = ctx.core.state
    topic_cls = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    part_cls = topic_cls.ReassignablePartitionResponse
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            error, message = errors.NONE, None
            try:
                if p.replicas is None:  # cancel: nothing is ever pending here
                    state.require_partition(t.name, p.partition_index)
                    raise StateError(errors.NO_REASSIGNMENT_IN_PROGRESS,
                                     "no reassignment in progress")
                state.reassign(t.name, p.partition_index, list(p.replicas))
            except StateError as exc:
                error, message = exc.code, exc.message
            parts.append(part_cls(partition_index=p.partition_index, error_code=error,
                                  error_message=message))
        responses.append(topic_cls(name=t.name, partitions=parts))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, allow_replication_factor_change=True, error_code=0,
        error_message=None, responses=responses)


async def list_partition_reassignments(ctx: Ctx, req: Any) -> Any:
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0,
                                              error_message=None, topics=[])
