"""CreatePartitions on the simulator (a TEST DOUBLE). Reassignments are not simulated:
they are proven on real Kafka (tests/system/test_placement_real_kafka.py).

Invariant: a ``validate_only`` CreatePartitions checks and changes nothing.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreatePartitionsResponse

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
