"""Kafka Streams' AssignmentInfo: the tasks the group leader's ``stream`` assignor gives
each member in SyncGroup (the user data of its consumer-protocol assignment).

Layout (Kafka Streams' AssignmentInfo encoding, versions 1-11, big-endian, written
with java.io.DataOutputStream): version int32, commonly_supported_version int32 (v3+),
active_tasks[] task id, standby_tasks[] {task id, partitions[] {topic UTF, partition
int32}}, then where partitions live by host: v2-4 host[] {host UTF, port int32,
partitions[] {topic UTF, partition}}; v5 a topic dictionary[] {index int32, topic UTF}
and host[] {host UTF, port, partitions[] {topic index int32, partition}}; v6+ the
dictionary, the active and the standby host maps; error_code int32 (v4+);
next_rebalance_ms int64 (v7+). A task id is {subtopology int32, partition int32} and,
from v10 (named topologies), a char count int32 and that many UTF-16 chars. Counts are
int32; UTF strings have a uint16 byte length (Java's modified UTF-8).

Also the consumer protocol's envelope around it (ConsumerProtocolAssignment: version
int16, assigned_partitions[] {topic, partitions[] int32}, user_data bytes):
:func:`envelope_assignment`.

Invariants: sans-IO; the whole message is walked so that a known version with bytes
left over is an error. A version this module does not know is opaque: None, never an
error. Malformed bytes of a known version raise
:class:`~protocol.primitives.ProtocolError` and nothing else.
"""

from __future__ import annotations

from typing import NamedTuple

from protocol.primitives import (
    Buffer,
    ProtocolError,
    need,
    read_array_len,
    read_bytes_span,
    read_int16,
    read_int32,
    skip_string,
)
from protocol.streams_subscription import TaskId

LATEST_VERSION = 11
FIRST_NAMED_TOPOLOGY_VERSION = 10


class StreamsAssignment(NamedTuple):
    version: int
    commonly_supported: int  # -1 before v3
    active: tuple[TaskId, ...]
    standby: tuple[TaskId, ...]
    error_code: int  # 0 before v4


def _count(data: Buffer, pos: int, least: int) -> tuple[int, int]:
    """An int32 count of items of at least ``least`` bytes each."""
    n, pos = read_int32(data, pos)
    if n < 0 or n * least > len(data) - pos:
        raise ProtocolError(f"count {n} at offset {pos - 4} does not fit the bytes left")
    return n, pos


def _task(data: Buffer, pos: int, version: int) -> tuple[TaskId, int]:
    sub, pos = read_int32(data, pos)
    part, pos = read_int32(data, pos)
    if version < FIRST_NAMED_TOPOLOGY_VERSION:
        return TaskId(sub, part), pos
    chars, pos = _count(data, pos, 2)
    topology = None
    if chars:
        try:
            topology = str(data[pos:pos + 2 * chars], "utf-16-be")
        except UnicodeDecodeError:
            raise ProtocolError(f"invalid UTF-16 topology name at offset {pos}") from None
        pos += 2 * chars
    return TaskId(sub, part, topology), pos


def _skip_utf(data: Buffer, pos: int) -> int:
    n, pos = read_int16(data, pos)
    n &= 0xFFFF
    need(data, pos, n)
    return pos + n


def _skip_partitions(data: Buffer, pos: int, by_index: bool) -> int:
    n, pos = _count(data, pos, 6)
    for _ in range(n):
        pos = pos + 4 if by_index else _skip_utf(data, pos)
        need(data, pos, 4)
        pos += 4
    return pos


def _skip_hosts(data: Buffer, pos: int, by_index: bool) -> int:
    n, pos = _count(data, pos, 10)
    for _ in range(n):
        pos = _skip_utf(data, pos)
        need(data, pos, 4)
        pos = _skip_partitions(data, pos + 4, by_index)
    return pos


def _skip_dictionary(data: Buffer, pos: int) -> int:
    n, pos = _count(data, pos, 6)
    for _ in range(n):
        need(data, pos, 4)
        pos = _skip_utf(data, pos + 4)
    return pos


def parse_streams_assignment(data: Buffer) -> StreamsAssignment | None:
    """The AssignmentInfo in ``data``; None when its version is not one we know."""
    version, pos = read_int32(data, 0)
    if not 1 <= version <= LATEST_VERSION:
        return None
    common = -1
    if version >= 3:
        common, pos = read_int32(data, pos)
    n, pos = _count(data, pos, 8)
    active = []
    for _ in range(n):
        task, pos = _task(data, pos, version)
        active.append(task)
    n, pos = _count(data, pos, 12)
    standby = []
    for _ in range(n):
        task, pos = _task(data, pos, version)
        standby.append(task)
        pos = _skip_partitions(data, pos, False)
    if 2 <= version <= 4:
        pos = _skip_hosts(data, pos, False)
    elif version >= 5:
        pos = _skip_dictionary(data, pos)
        pos = _skip_hosts(data, pos, True)
        if version >= 6:
            pos = _skip_hosts(data, pos, True)
    error = 0
    if version >= 4:
        error, pos = read_int32(data, pos)
    if version >= 7:
        need(data, pos, 8)
        pos += 8
    if pos != len(data):
        raise ProtocolError(f"{len(data) - pos} bytes after a v{version} AssignmentInfo")
    return StreamsAssignment(version, common, tuple(active), tuple(standby), error)


def envelope_assignment(data: Buffer) -> bytes | None:
    """The user data of a consumer-protocol assignment (any version: the fields before
    it are where v0 has them); None where there is none."""
    version, pos = read_int16(data, 0)
    if version < 0:
        raise ProtocolError(f"negative assignment version {version}")
    n, pos = read_array_len(data, pos, False, nullable=False)
    for _ in range(n):
        pos = skip_string(data, pos, False)
        parts, pos = read_array_len(data, pos, False, nullable=False)
        need(data, pos, 4 * parts)
        pos += 4 * parts
    span, pos = read_bytes_span(data, pos, False)
    return None if span is None else bytes(data[span[0]:span[1]])


def member_assignment(data: Buffer) -> StreamsAssignment | None:
    """A ``stream`` member's SyncGroup assignment: the AssignmentInfo inside, where
    there is one of a known version (None: empty, opaque)."""
    if len(data) == 0:
        return None
    user = envelope_assignment(data)
    if user is None or len(user) < 4:
        return None
    return parse_streams_assignment(user)
