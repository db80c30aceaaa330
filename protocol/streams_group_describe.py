"""StreamsGroupDescribe (api key 89, KIP-1071): a streams group's members with their
process ids, rack ids, client tags and current task assignment, from the broker that
runs the group (Kafka 4.x with the ``streams`` rebalance protocol).

Layout (Kafka's StreamsGroupDescribeRequest/Response.json, v0, flexible; v1 adds a
topology description the audit does not need, so v0 is asked for):
request groups[] string, include_authorized_operations bool. Response throttle_time_ms,
groups[] {error_code, error_message (nullable),
group_id, group_state, group_epoch, assignment_epoch, topology (nullable struct {epoch,
subtopologies[] (nullable) {subtopology_id, source_topics[], repartition_sink_topics[],
state_changelog_topics[] TopicInfo, repartition_source_topics[] TopicInfo}}), members[]
{member_id, member_epoch, instance_id (nullable), rack_id (nullable), client_id,
client_host, topology_epoch, process_id, user_endpoint (nullable struct {host, port
uint16}), client_tags[] {key, value}, task_offsets[] and task_end_offsets[]
{subtopology_id, partition, offset int64}, assignment and target_assignment {active,
standby, warmup []{subtopology_id, partitions[] int32}}, is_classic bool},
authorized_operations int32}. TopicInfo is
{name, partitions int32, replication_factor int16, topic_configs[] {key, value}}.

Invariants: only what the audit needs is kept (members' ids, rack, tags and the
current assignment; the sub-topologies' changelog topics, which tell stateful
sub-topologies). Malformed input raises
:class:`~protocol.primitives.ProtocolError` and nothing else.
"""

from __future__ import annotations

from typing import NamedTuple

from protocol._message import Reader, Writer
from protocol.primitives import Buffer, ProtocolError, need, skip_tagged_fields

API_KEY = 89
MAX_VERSION = 0  # v1 adds a topology description the audit does not need


class StreamsMember(NamedTuple):
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    process_id: str
    client_tags: dict[str, str]
    active: dict[str, tuple[int, ...]]  # subtopology id -> partitions
    standby: dict[str, tuple[int, ...]]
    warmup: dict[str, tuple[int, ...]]


class StreamsGroup(NamedTuple):
    error_code: int
    error_message: str | None
    group_id: str
    state: str
    stateful_subtopologies: frozenset[str] | None  # None: the topology is not known
    members: tuple[StreamsMember, ...]


def encode_request(groups: list[str], version: int) -> bytes:
    """The request body (after the header)."""
    if not 0 <= version <= MAX_VERSION:
        raise ProtocolError(f"StreamsGroupDescribe v{version} is beyond v{MAX_VERSION}")
    w = Writer(True)
    w.array(len(groups))
    for g in groups:
        w.string(g)
    w.boolean(False)
    w.tags()
    return w.body()


def _strings(r: Reader) -> None:
    for _ in range(r.array()):
        r.string()


def _key_values(r: Reader) -> dict[str, str]:
    out = {}
    for _ in range(r.array()):
        key = r.string()
        out[key] = r.string()
        r.tags()
    return out


def _topic_infos(r: Reader) -> int:
    n = r.array()
    for _ in range(n):
        r.string()
        r.int32()
        r.int16()
        _key_values(r)
        r.tags()
    return n


def _task_offsets(r: Reader) -> None:
    for _ in range(r.array()):
        r.string()
        r.int32()
        r.int32()  # the int64 offset, as two halves: not needed
        r.int32()
        r.tags()


def _tasks(r: Reader) -> dict[str, tuple[int, ...]]:
    out = {}
    for _ in range(r.array()):
        sub = r.string()
        out[sub] = tuple(r.int32() for _ in range(r.array()))
        r.tags()
    return out


def _assignment(r: Reader) -> tuple[dict[str, tuple[int, ...]], ...]:
    active, standby, warmup = _tasks(r), _tasks(r), _tasks(r)
    r.tags()
    return active, standby, warmup


def _topology(r: Reader) -> frozenset[str] | None:
    if r.int8() < 0:  # a nullable struct: -1 null, 1 present
        return None
    r.int32()  # epoch
    n = r.array(nullable=True)
    stateful = set()
    for _ in range(max(n, 0)):
        sub = r.string()
        _strings(r)
        _strings(r)
        if _topic_infos(r):
            stateful.add(sub)
        _topic_infos(r)
        r.tags()
    r.tags()
    return frozenset(stateful) if n >= 0 else None


def _member(r: Reader) -> StreamsMember:
    mid = r.string()
    r.int32()
    instance, rack = r.nullable_string(), r.nullable_string()
    client, host = r.string(), r.string()
    r.int32()
    process = r.string()
    if r.int8() >= 0:  # user endpoint
        r.string()
        r.int16()
        r.tags()
    tags = _key_values(r)
    _task_offsets(r)
    _task_offsets(r)
    active, standby, warmup = _assignment(r)
    _assignment(r)
    r.boolean()
    r.tags()
    return StreamsMember(mid, instance, rack, client, host, process, tags, active, standby,
                         warmup)


def read_response(frame: Buffer, version: int) -> list[StreamsGroup]:
    if not 0 <= version <= MAX_VERSION:
        raise ProtocolError(f"StreamsGroupDescribe v{version} is beyond v{MAX_VERSION}")
    need(frame, 0, 8)
    r = Reader(frame, skip_tagged_fields(frame, 8), True)  # a flexible response header
    r.int32()
    out = []
    groups = r.array()
    for _ in range(groups):
        error, message = r.int16(), r.nullable_string()
        group, state = r.string(), r.string()
        r.int32()
        r.int32()
        stateful = _topology(r)
        members = tuple(_member(r) for _ in range(r.array()))
        r.int32()
        out.append(StreamsGroup(error, message, group, state, stateful, members))
        r.tags()
    r.tags()
    r.end()
    return out
