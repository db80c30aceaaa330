"""Fetch request (api key 1): the topics it names, read in place.

Only the fields before ``topics`` are skipped and the ``topics`` array walked (names in
v0-12, topic ids from v13); nothing after it is read, no partition field is decoded.
An incremental fetch of a fetch session (v7+) names only the partitions that changed,
often none: its topics are what it names. Malformed input raises
:class:`~protocol.primitives.ProtocolError`.

Layout (Kafka's FetchRequest.json): replica_id (int32, v0-14), max_wait_ms, min_bytes,
max_bytes (v3+), isolation_level (int8, v4+), session_id and session_epoch (v7+),
topics[] { topic (string, v0-12) | topic_id (uuid, v13+), partitions[] { partition,
current_leader_epoch (v9+), fetch_offset (int64), last_fetched_epoch (v12+),
log_start_offset (int64, v5+), partition_max_bytes } } (flexible from v12).
"""

from __future__ import annotations

from protocol.fetch_request import (
    FIRST_FLEXIBLE_VERSION,
    FIRST_NO_REPLICA_ID_VERSION,
    FIRST_TOPIC_ID_VERSION,
    partition_size,
)
from protocol.headers import RequestHeader
from protocol.primitives import (
    Buffer,
    ProtocolError,
    need,
    read_array_len,
    read_string,
    read_uuid,
    skip_tagged_fields,
)


def _fixed_before_topics(version: int) -> int:
    size = 0 if version >= FIRST_NO_REPLICA_ID_VERSION else 4  # replica_id
    size += 8  # max_wait_ms, min_bytes
    if version >= 3:
        size += 4  # max_bytes
    if version >= 4:
        size += 1  # isolation_level
    if version >= 7:
        size += 8  # session_id, session_epoch
    return size


def read_fetch_topics(frame: Buffer, header: RequestHeader) -> tuple[str | bytes, ...]:
    """The topic names (v0-12) or ids (v13+) a Fetch request names, in its order."""
    version = header.api_version
    flexible = version >= FIRST_FLEXIBLE_VERSION
    by_id = version >= FIRST_TOPIC_ID_VERSION
    fixed = partition_size(version)
    pos = header.body_offset + _fixed_before_topics(version)
    need(frame, pos, 0)
    count, pos = read_array_len(frame, pos, flexible, nullable=False)
    out: list[str | bytes] = []
    for _ in range(count):
        key: str | bytes | None
        if by_id:
            key, pos = read_uuid(frame, pos)
        else:
            key, pos = read_string(frame, pos, flexible)
            if key is None:
                raise ProtocolError(f"null topic name in a Fetch v{version} request")
        out.append(key)
        partitions, pos = read_array_len(frame, pos, flexible, nullable=False)
        for _ in range(partitions):
            pos += fixed
            need(frame, pos, 0)
            if flexible:
                pos = skip_tagged_fields(frame, pos)
        if flexible:
            pos = skip_tagged_fields(frame, pos)
    return tuple(out)
