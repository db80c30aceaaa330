"""The classic group protocol's member data, read where it passes: the JoinGroup
response (the leader gets every member's metadata), the SyncGroup request (the leader
sends every member's assignment) and DescribeGroups (both, for a stable group, to
anyone who asks).

Layouts (Kafka's JoinGroupResponse.json v0-9, flexible v6+; SyncGroupRequest.json
v0-5, flexible v4+; DescribeGroupsRequest/Response.json v0-6, flexible v5+):

- JoinGroup request: group_id, session_timeout_ms, rebalance_timeout_ms (v1+), member_id,
  group_instance_id (nullable, v5+), protocol_type, protocols[] {name, metadata bytes},
  reason (nullable, v8+);
- JoinGroup response: throttle_time_ms (v2+), error_code, generation_id, protocol_type
  (nullable, v7+), protocol_name (nullable v7+), leader, skip_assignment (bool, v9+),
  member_id, members[] {member_id, group_instance_id (nullable, v5+), metadata bytes};
- SyncGroup request: group_id, generation_id, member_id, group_instance_id (nullable,
  v3+), protocol_type, protocol_name (nullable, v5+), assignments[] {member_id,
  assignment bytes};
- DescribeGroups request: groups[] string, include_authorized_operations (bool, v3+);
  response: throttle_time_ms (v1+), groups[] {error_code, error_message (nullable, v6+),
  group_id, group_state, protocol_type, protocol_data, members[] {member_id,
  group_instance_id (nullable, v4+), client_id, client_host, member_metadata bytes,
  member_assignment bytes}, authorized_operations (int32, v3+)}.

Invariants: read-only (nothing here changes a frame); the member data is copied out
as bytes, for the Streams decoders. Versions beyond those listed raise
:class:`~protocol.primitives.ProtocolError`, as malformed input does, and nothing else.
"""

from __future__ import annotations

from typing import NamedTuple

from protocol._message import Reader, Writer
from protocol.headers import response_body_offset
from protocol.primitives import Buffer, ProtocolError, read_bytes_span

JOIN_GROUP_API_KEY = 11
SYNC_GROUP_API_KEY = 14
DESCRIBE_GROUPS_API_KEY = 15
JOIN_GROUP_MAX = 9
SYNC_GROUP_MAX = 5
DESCRIBE_GROUPS_MAX = 6


class JoinGroupRequest(NamedTuple):
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata)


class JoinedMember(NamedTuple):
    member_id: str
    instance_id: str | None
    metadata: bytes


class JoinGroupAnswer(NamedTuple):
    error_code: int
    generation: int
    protocol_name: str | None
    leader: str
    member_id: str
    members: tuple[JoinedMember, ...]  # empty but for the leader


class SyncGroupAssignments(NamedTuple):
    group_id: str
    generation: int
    member_id: str
    protocol_name: str | None  # v5+; None before
    assignments: dict[str, bytes]  # member id -> assignment; empty but from the leader


class DescribedMember(NamedTuple):
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class DescribedGroup(NamedTuple):
    error_code: int
    error_message: str | None
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[DescribedMember, ...]


def _blob(r: Reader) -> bytes:
    span, r.pos = read_bytes_span(r.buf, r.pos, r.flexible)
    return b"" if span is None else bytes(r.buf[span[0]:span[1]])


def _check(version: int, top: int, name: str) -> None:
    if not 0 <= version <= top:
        raise ProtocolError(f"{name} v{version} is beyond v{top}")


def read_join_group_request(frame: Buffer, version: int, body: int) -> JoinGroupRequest:
    _check(version, JOIN_GROUP_MAX, "JoinGroup request")
    r = Reader(frame, body, version >= 6)
    group = r.string()
    r.int32()
    if version >= 1:
        r.int32()
    member = r.string()
    if version >= 5:
        r.nullable_string()
    ptype = r.string()
    protocols = []
    for _ in range(r.array()):
        name = r.string()
        protocols.append((name, _blob(r)))
        r.tags()
    if version >= 8:
        r.nullable_string()
    r.tags()
    r.end()
    return JoinGroupRequest(group, member, ptype, tuple(protocols))


def read_join_group_response(frame: Buffer, version: int) -> JoinGroupAnswer:
    _check(version, JOIN_GROUP_MAX, "JoinGroup response")
    r = Reader(frame, response_body_offset(frame, JOIN_GROUP_API_KEY, version), version >= 6)
    if version >= 2:
        r.int32()
    error, generation = r.int16(), r.int32()
    if version >= 7:
        r.nullable_string()
    protocol = r.nullable_string()
    leader = r.string()
    if version >= 9:
        r.boolean()
    member_id = r.string()
    members = []
    for _ in range(r.array()):
        mid = r.string()
        instance = r.nullable_string() if version >= 5 else None
        members.append(JoinedMember(mid, instance, _blob(r)))
        r.tags()
    r.tags()
    r.end()
    return JoinGroupAnswer(error, generation, protocol, leader, member_id, tuple(members))


def read_sync_group_request(frame: Buffer, version: int, body: int) -> SyncGroupAssignments:
    _check(version, SYNC_GROUP_MAX, "SyncGroup request")
    r = Reader(frame, body, version >= 4)
    group, generation, member = r.string(), r.int32(), r.string()
    if version >= 3:
        r.nullable_string()
    protocol = None
    if version >= 5:
        r.nullable_string()
        protocol = r.nullable_string()
    assignments = {}
    for _ in range(r.array()):
        mid = r.string()
        assignments[mid] = _blob(r)
        r.tags()
    r.tags()
    r.end()
    return SyncGroupAssignments(group, generation, member, protocol, assignments)


def encode_describe_groups_request(groups: list[str], version: int) -> bytes:
    """The request body (after the header)."""
    _check(version, DESCRIBE_GROUPS_MAX, "DescribeGroups request")
    w = Writer(version >= 5)
    w.array(len(groups))
    for g in groups:
        w.string(g)
    if version >= 3:
        w.boolean(False)
    w.tags()
    return w.body()


def read_describe_groups_response(frame: Buffer, version: int) -> list[DescribedGroup]:
    _check(version, DESCRIBE_GROUPS_MAX, "DescribeGroups response")
    r = Reader(frame, response_body_offset(frame, DESCRIBE_GROUPS_API_KEY, version),
               version >= 5)
    if version >= 1:
        r.int32()
    out = []
    for _ in range(r.array()):
        error = r.int16()
        message = r.nullable_string() if version >= 6 else None
        group, state, ptype, pdata = r.string(), r.string(), r.string(), r.string()
        members = []
        for _ in range(r.array()):
            mid = r.string()
            instance = r.nullable_string() if version >= 4 else None
            client, host = r.string(), r.string()
            metadata, assignment = _blob(r), _blob(r)
            r.tags()
            members.append(DescribedMember(mid, instance, client, host, metadata, assignment))
        if version >= 3:
            r.int32()
        r.tags()
        out.append(DescribedGroup(error, message, group, state, ptype, pdata, tuple(members)))
    r.tags()
    r.end()
    return out
