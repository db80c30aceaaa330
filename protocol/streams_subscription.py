"""Kafka Streams' SubscriptionInfo: what a member of the ``stream`` assignor says about
itself in its JoinGroup (the user data of its consumer-protocol subscription).

Layout (Kafka Streams' SubscriptionInfoData.json, versions 1-11, never flexible; the
``stream`` assignor writes the message's own int32 version first): version,
latest_supported_version (v3+), process_id (uuid), prev_tasks[] and standby_tasks[]
{subtopology int32, partition int32} (v1-6), user_end_point (bytes, v2+),
task_offset_sums[] (v7+: {subtopology, partition_to_offset_sum[] {partition, offset
int64}} in v7-9; {subtopology, partition, offset int64, named_topology nullable
string} from v10), unique_field (int8, v8+), error_code (int32, v9+), client_tags[]
{key bytes, value bytes} (v11+: KIP-708's ``client.tag.*``). Arrays have int32
lengths, strings int16, bytes int32.

Also the consumer protocol's envelope around it (ConsumerProtocolSubscription v0-3:
version int16, topics[], user_data bytes, then owned partitions, generation and rack
id, which are read only for the rack): :func:`envelope_subscription`.

Invariants: sans-IO, no copy of anything but the fields returned. A version this
module does not know (below 1, above :data:`LATEST_VERSION`) is opaque: the decoders
return None, never an error, because the data is not ours and newer Streams may
change it. Malformed bytes of a known version raise
:class:`~protocol.primitives.ProtocolError` and nothing else.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from protocol.primitives import (
    Buffer,
    ProtocolError,
    need,
    read_array_len,
    read_bytes_span,
    read_int8,
    read_int16,
    read_int32,
    read_int64,
    read_string,
    skip_string,
)

LATEST_VERSION = 11
FIRST_TAGS_VERSION = 11
FIRST_OFFSET_SUM_VERSION = 7
ACTIVE_OFFSET_SUM = -2  # Task.LATEST_OFFSET: the task runs as an active task on the member
STREAM_PROTOCOL = "stream"  # the assignor's name in JoinGroup


class TaskId(NamedTuple):
    """A Streams task: sub-topology and partition (and a named topology, rarely)."""

    subtopology: int
    partition: int
    topology: str | None = None

    def __str__(self) -> str:
        base = f"{self.subtopology}_{self.partition}"
        return f"{self.topology}__{base}" if self.topology else base


class StreamsSubscription(NamedTuple):
    version: int
    latest_supported: int  # -1 before v3
    process_id: str
    user_endpoint: str | None
    active: frozenset[TaskId]  # tasks the member ran as active (prev tasks)
    state: frozenset[TaskId]  # tasks with state on the member: standbys and former tasks
    unique_field: int  # -1 before v8
    error_code: int  # 0 before v9
    client_tags: dict[str, str]


class Envelope(NamedTuple):
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    rack: str | None


def _tasks(data: Buffer, pos: int) -> tuple[frozenset[TaskId], int]:
    n, pos = read_array_len(data, pos, False, nullable=False)
    need(data, pos, 8 * n)
    out = set()
    for _ in range(n):
        sub, pos = read_int32(data, pos)
        part, pos = read_int32(data, pos)
        out.add(TaskId(sub, part))
    return frozenset(out), pos


def _bytes_text(data: Buffer, pos: int, nullable: bool) -> tuple[str | None, int]:
    span, pos = read_bytes_span(data, pos, False)
    if span is None:
        if not nullable:
            raise ProtocolError(f"null bytes at offset {pos}")
        return None, pos
    try:
        return str(data[span[0]:span[1]], "utf-8"), pos
    except UnicodeDecodeError:
        raise ProtocolError(f"invalid UTF-8 at offset {span[0]}") from None


def parse_streams_subscription(data: Buffer) -> StreamsSubscription | None:
    """The SubscriptionInfo in ``data``; None when its version is not one we know."""
    version, pos = read_int32(data, 0)
    if not 1 <= version <= LATEST_VERSION:
        return None
    latest = -1
    if version >= 3:
        latest, pos = read_int32(data, pos)
    need(data, pos, 16)
    process = str(uuid.UUID(bytes=bytes(data[pos:pos + 16])))
    pos += 16
    active: frozenset[TaskId] = frozenset()
    state: frozenset[TaskId] = frozenset()
    if version <= 6:
        active, pos = _tasks(data, pos)
        state, pos = _tasks(data, pos)
    endpoint = None
    if version >= 2:
        endpoint, pos = _bytes_text(data, pos, nullable=False)
        endpoint = endpoint or None
    if version >= FIRST_OFFSET_SUM_VERSION:
        active, state, pos = _offset_sums(data, pos, version)
    unique = -1
    if version >= 8:
        unique, pos = read_int8(data, pos)
    error = 0
    if version >= 9:
        error, pos = read_int32(data, pos)
    tags: dict[str, str] = {}
    if version >= FIRST_TAGS_VERSION:
        n, pos = read_array_len(data, pos, False, nullable=False)
        for _ in range(n):
            key, pos = _bytes_text(data, pos, nullable=False)
            value, pos = _bytes_text(data, pos, nullable=False)
            tags[key or ""] = value or ""
    if pos != len(data):
        raise ProtocolError(f"{len(data) - pos} bytes after a v{version} SubscriptionInfo")
    return StreamsSubscription(version, latest, process, endpoint, active, state, unique,
                               error, tags)


def _offset_sums(data: Buffer, pos: int, version: int
                 ) -> tuple[frozenset[TaskId], frozenset[TaskId], int]:
    active: set[TaskId] = set()
    state: set[TaskId] = set()
    n, pos = read_array_len(data, pos, False, nullable=False)
    for _ in range(n):
        sub, pos = read_int32(data, pos)
        if version >= 10:
            part, pos = read_int32(data, pos)
            offset, pos = read_int64(data, pos)
            topology, pos = read_string(data, pos, False)
            task = TaskId(sub, part, topology or None)
            (active if offset == ACTIVE_OFFSET_SUM else state).add(task)
            continue
        m, pos = read_array_len(data, pos, False, nullable=False)
        need(data, pos, 12 * m)
        for _ in range(m):
            part, pos = read_int32(data, pos)
            offset, pos = read_int64(data, pos)
            (active if offset == ACTIVE_OFFSET_SUM else state).add(TaskId(sub, part))
    return frozenset(active), frozenset(state), pos


def envelope_subscription(data: Buffer) -> Envelope:
    """The consumer-protocol subscription around a member's user data (v0 and later:
    newer versions only append, so the fields up to the user data are where v0 has
    them; the rack is read from v3 exactly)."""
    version, pos = read_int16(data, 0)
    if version < 0:
        raise ProtocolError(f"negative subscription version {version}")
    n, pos = read_array_len(data, pos, False, nullable=False)
    topics = []
    for _ in range(n):
        topic, pos = read_string(data, pos, False)
        topics.append(topic or "")
    span, pos = read_bytes_span(data, pos, False)
    user = None if span is None else bytes(data[span[0]:span[1]])
    rack = None
    if version == 3:
        owned, pos = read_array_len(data, pos, False, nullable=False)
        for _ in range(owned):
            pos = skip_string(data, pos, False)
            parts, pos = read_array_len(data, pos, False, nullable=False)
            need(data, pos, 4 * parts)
            pos += 4 * parts
        _generation, pos = read_int32(data, pos)
        rack, pos = read_string(data, pos, False)
    return Envelope(version, tuple(topics), user, rack)


def member_subscription(metadata: Buffer) -> tuple[Envelope, StreamsSubscription | None]:
    """A ``stream`` member's JoinGroup metadata: the envelope and, where its version is
    known, the SubscriptionInfo inside (None: opaque, or no user data)."""
    envelope = envelope_subscription(metadata)
    if envelope.user_data is None or len(envelope.user_data) < 4:
        return envelope, None
    return envelope, parse_streams_subscription(envelope.user_data)
