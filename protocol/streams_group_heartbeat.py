"""StreamsGroupHeartbeat request (api key 88, KIP-1071): what a Kafka Streams member of a
streams group says about itself, read for its process id, rack id and client tags.

Layout (Kafka's StreamsGroupHeartbeatRequest.json, v0-1, flexible from v0; v1 is v0):
group_id, member_id, member_epoch int32, endpoint_information_epoch int32, instance_id
(nullable), rack_id (nullable), rebalance_timeout_ms int32, topology (nullable struct
{epoch int32, subtopologies[] {subtopology_id, source_topics[] string,
source_topic_regex[] string, state_changelog_topics[] TopicInfo,
repartition_sink_topics[] string, repartition_source_topics[] TopicInfo,
copartition_groups[] {source_topics[] int16, source_topic_regex[] int16,
repartition_source_topics[] int16}}}), active_tasks, standby_tasks, warmup_tasks
(nullable []{subtopology_id, partitions[] int32}), process_id (nullable), user_endpoint
(nullable struct {host, port uint16}), client_tags (nullable []{key, value}),
task_offsets and task_end_offsets (nullable []{subtopology_id, partition, offset int64}),
shutdown_application bool. TopicInfo is {name, partitions int32, replication_factor
int16, topic_configs[] {key, value}}.

The request header is v2 (flexible): ``body`` is where the header's tagged fields start
(the proxy's header table does not list this API as flexible).

Invariant: read-only; a field the client leaves null ("unchanged since the last
heartbeat") is None. Malformed input raises :class:`~protocol.primitives.ProtocolError`
and nothing else.
"""

from __future__ import annotations

from typing import NamedTuple

from protocol._message import Reader
from protocol.primitives import Buffer, ProtocolError, skip_tagged_fields

API_KEY = 88
MAX_VERSION = 1


class HeartbeatMember(NamedTuple):
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    process_id: str | None
    client_tags: dict[str, str] | None  # None: unchanged since the last heartbeat


def _strings(r: Reader) -> None:
    for _ in range(r.array()):
        r.string()


def _key_values(r: Reader) -> dict[str, str] | None:
    n = r.array(nullable=True)
    if n < 0:
        return None
    out = {}
    for _ in range(n):
        key = r.string()
        out[key] = r.string()
        r.tags()
    return out


def _topic_infos(r: Reader) -> None:
    for _ in range(r.array()):
        r.string()
        r.int32()
        r.int16()
        _key_values(r)
        r.tags()


def _int16s(r: Reader) -> None:
    for _ in range(r.array()):
        r.int16()


def _topology(r: Reader) -> None:
    if r.int8() < 0:
        return
    r.int32()
    for _ in range(r.array()):
        r.string()
        _strings(r)
        _strings(r)
        _topic_infos(r)
        _strings(r)
        _topic_infos(r)
        for _ in range(r.array()):
            _int16s(r)
            _int16s(r)
            _int16s(r)
            r.tags()
        r.tags()
    r.tags()


def _tasks(r: Reader) -> None:
    for _ in range(max(r.array(nullable=True), 0)):
        r.string()
        for _ in range(r.array()):
            r.int32()
        r.tags()


def _offsets(r: Reader) -> None:
    for _ in range(max(r.array(nullable=True), 0)):
        r.string()
        r.int32()
        r.int32()  # the int64 offset, as two halves: not needed
        r.int32()
        r.tags()


def read_heartbeat(frame: Buffer, version: int, body: int) -> HeartbeatMember:
    """The member's identity and tags; ``body``: the offset after the client id."""
    if not 0 <= version <= MAX_VERSION:
        raise ProtocolError(f"StreamsGroupHeartbeat v{version} is beyond v{MAX_VERSION}")
    r = Reader(frame, skip_tagged_fields(frame, body), True)
    group, member, epoch = r.string(), r.string(), r.int32()
    r.int32()
    r.nullable_string()
    rack = r.nullable_string()
    r.int32()
    _topology(r)
    _tasks(r)
    _tasks(r)
    _tasks(r)
    process = r.nullable_string()
    if r.int8() >= 0:  # user endpoint
        r.string()
        r.int16()
        r.tags()
    tags = _key_values(r)
    _offsets(r)
    _offsets(r)
    r.boolean()
    r.tags()
    r.end()
    return HeartbeatMember(group, member, epoch, rack, process, tags)
