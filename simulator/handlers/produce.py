"""Produce on the simulator (a TEST DOUBLE): leader check, min ISR, idempotent append;
and InitProducerId, the producer ids idempotent producers need.

Invariant: a partition's batches are appended only on its live leader, only
if (for acks=-1) its ISR has at least min.insync.replicas members, and only
for batches the idempotence table accepts; a duplicate returns the original
base offset. acks=0 gets no response. Transactions are not simulated: an
InitProducerId with a transactional id and a transactional batch are refused
(transactional clients are proven on real Kafka).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import InitProducerIdResponse, ProduceResponse

from simulator import errors
from simulator.handlers.base import Ctx
from simulator.records import CorruptBatchError, split_batches
from simulator.sasl import refused_produce
from simulator.state import Partition

_TR = ProduceResponse.TopicProduceResponse
_PR = ProduceResponse.TopicProduceResponse.PartitionProduceResponse


def _append(part: Partition, records: bytes | None) -> tuple[int, int, str | None]:
    """(error, base offset, message) after appending every batch of `records`."""
    try:
        batches = split_batches(records or b"")
    except CorruptBatchError as exc:
        return errors.CORRUPT_MESSAGE, -1, str(exc)
    if not batches:
        return errors.CORRUPT_MESSAGE, -1, "no record batch"
    first_base = -1
    for header, batch in batches:
        if header.is_transactional:
            return (errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1,
                    "transactions are not simulated")
        verdict = part.log.producers.check(header)
        if verdict.error:
            return verdict.error, -1, None
        if verdict.duplicate_of is not None:
            base = verdict.duplicate_of
        else:
            base = part.log.append(header, batch, part.leader_epoch)
        if first_base < 0:
            first_base = base
    return errors.NONE, first_base, None


async def init_producer_id(ctx: Ctx, req: Any) -> Any:
    if req.transactional_id:
        error, pid = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1
    else:
        error, pid = errors.NONE, ctx.core.new_producer_id()
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=pid,
                                  producer_epoch=-1 if error else 0)


async def produce(ctx: Ctx, req: Any) -> Any:
    state = ctx.core.state
    acks = req.acks
    responses = []
    appended = False
    hinted: set[int] = set()  # leaders named in current_leader (Produce v10+)
    denied = refused_produce(ctx.principal, ctx.core.config.sasl)  # the ACL stand-in
    for topic in req.topic_data:
        parts = []
        for pd in topic.partition_data:
            part = state.partition(topic.name, pd.index)
            error, base, message = errors.NONE, -1, None
            if denied:
                error = errors.TOPIC_AUTHORIZATION_FAILED
            elif part is None:
                error = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif part.leader != ctx.node_id:
                error = errors.NOT_LEADER_OR_FOLLOWER
            elif acks == -1 and len(part.isr) < state.min_insync_replicas(topic.name):
                error = errors.NOT_ENOUGH_REPLICAS
                message = (
                    f"ISR {part.isr} has fewer than min.insync.replicas="
                    f"{state.min_insync_replicas(topic.name)} members"
                )
            else:
                error, base, message = _append(part, pd.records)
                appended = appended or error == errors.NONE
            leader_hint = None
            if error == errors.NOT_LEADER_OR_FOLLOWER and part is not None and part.leader >= 0:
                hinted.add(part.leader)
                leader_hint = _PR.LeaderIdAndEpoch(
                    leader_id=part.leader, leader_epoch=part.leader_epoch
                )
            parts.append(
                _PR(
                    index=pd.index,
                    error_code=error,
                    base_offset=base,
                    log_append_time_ms=-1,
                    log_start_offset=part.log.log_start_offset if part is not None else -1,
                    record_errors=[],
                    error_message=message,
                    **({"current_leader": leader_hint} if leader_hint is not None else {}),
                )
            )
        responses.append(_TR(name=topic.name, partition_responses=parts))
    if appended:
        ctx.core.notify_append()
    if acks == 0:
        return None
    if not hinted:
        return ProduceResponse(responses=responses, throttle_time_ms=0)
    endpoints = []
    for node_id in sorted(hinted):
        host, port = ctx.core.address(node_id)
        rack = state.brokers[node_id].rack
        endpoints.append(ProduceResponse.NodeEndpoint(node_id=node_id, host=host, port=port,
                                                      rack=rack))
    return ProduceResponse(responses=responses, throttle_time_ms=0, node_endpoints=endpoints)
