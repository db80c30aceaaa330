"""Fetch request (api key 1): find the consumer's RackId (v11+) and fill it when empty.

KIP-392 added ``rack_id`` to Fetch v11 as the request's last top-level field (in the
flexible versions, v12+, only the top-level tagged fields follow it). A broker with
``replica.selector.class=RackAwareReplicaSelector`` uses it to name a same-rack replica
in the response (``preferred_read_replica``).

Invariants: :func:`fill_fetch_rack` walks the request up to ``rack_id`` without copying
anything and returns ``None`` (forward the original bytes) unless ``rack_id`` is the
empty string; a filled request is the original bytes with a new size prefix and only the
``rack_id`` field replaced: every byte before it and every tagged field after it is the
client's own. Versions below 11 have no rack and are never read. Malformed input
(truncation, negative lengths, trailing bytes) raises
:class:`~rackguard.protocol.primitives.ProtocolError` and nothing else.

Layout (Kafka's FetchRequest.json): replica_id (int32, v0-14), max_wait_ms, min_bytes,
max_bytes (v3+), isolation_level (int8, v4+), session_id and session_epoch (v7+),
topics[] { topic (string, v0-12) | topic_id (uuid, v13+), partitions[] { partition,
current_leader_epoch (v9+), fetch_offset (int64), last_fetched_epoch (v12+),
log_start_offset (int64, v5+), partition_max_bytes } }, forgotten_topics_data[] (v7+)
{ topic | topic_id, partitions[] int32 }, rack_id (string, v11+).
"""

from __future__ import annotations

import struct

from rackguard.protocol.headers import parse_request_header
from rackguard.protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_string,
    need,
    pack_int32,
    read_array_len,
    read_uvarint,
    skip_string,
    skip_tagged_fields,
)

FETCH_API_KEY = 1
FIRST_RACK_VERSION = 11
FIRST_FLEXIBLE_VERSION = 12
FIRST_TOPIC_ID_VERSION = 13
FIRST_NO_REPLICA_ID_VERSION = 15
MAX_FETCH_VERSION = 15  # the proxy's ApiVersions cap (protocol.api_versions)

_I16 = struct.Struct(">h").unpack_from


def _partition_size(version: int) -> int:
    """Bytes of one partition entry's fixed fields (tagged fields not included)."""
    size = 4 + 8 + 4  # partition, fetch_offset, partition_max_bytes
    if version >= 9:
        size += 4  # current_leader_epoch
    if version >= 12:
        size += 4  # last_fetched_epoch
    if version >= 5:
        size += 8  # log_start_offset
    return size


_PARTITION_SIZES = {v: _partition_size(v) for v in range(FIRST_RACK_VERSION, MAX_FETCH_VERSION + 1)}


def _skip_topic_key(buf: Buffer, pos: int, version: int, flexible: bool) -> int:
    if version >= FIRST_TOPIC_ID_VERSION:
        need(buf, pos, 16)
        return pos + 16
    return skip_string(buf, pos, flexible)


def rack_span(frame: Buffer, version: int, body: int) -> tuple[int, int, int]:
    """(start, payload start, end) of the ``rack_id`` field of a v11+ request whose body
    starts at ``body``; checks that nothing but tagged fields (v12+) follows it."""
    if not FIRST_RACK_VERSION <= version <= MAX_FETCH_VERSION:
        raise ProtocolError(f"Fetch v{version} has no rack_id the proxy reads")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    pos = body + (12 if version >= FIRST_NO_REPLICA_ID_VERSION else 16)  # .. max_bytes
    pos += 1 + 8  # isolation_level, session_id, session_epoch
    need(frame, pos, 0)
    fixed = _PARTITION_SIZES[version]
    topics, pos = read_array_len(frame, pos, flexible, nullable=False)
    for _ in range(topics):
        pos = _skip_topic_key(frame, pos, version, flexible)
        partitions, pos = read_array_len(frame, pos, flexible, nullable=False)
        if flexible:
            for _ in range(partitions):
                pos += fixed
                if pos < len(frame) and frame[pos] == 0:
                    pos += 1
                else:
                    pos = skip_tagged_fields(frame, pos)
            pos = skip_tagged_fields(frame, pos)
        else:
            pos += partitions * fixed
    forgotten, pos = read_array_len(frame, pos, flexible, nullable=False)
    for _ in range(forgotten):
        pos = _skip_topic_key(frame, pos, version, flexible)
        partitions, pos = read_array_len(frame, pos, flexible, nullable=False)
        pos += 4 * partitions
        if flexible:
            pos = skip_tagged_fields(frame, pos)
    start = pos
    if flexible:
        n, pos = read_uvarint(frame, pos)
        n -= 1
    else:
        need(frame, pos, 2)
        n = _I16(frame, pos)[0]
        pos += 2
    payload = pos
    if n > 0:
        pos += n
    need(frame, pos, 0)
    end = pos
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    if pos != len(frame):
        raise ProtocolError(f"{len(frame) - pos} bytes after the Fetch request at offset {pos}")
    if n < 0:
        raise ProtocolError(f"null rack_id in a Fetch v{version} request")
    return start, payload, end


def read_fetch_rack(frame: Buffer) -> str:
    """The ``rack_id`` of a Fetch v11+ request frame ("" when the client set none)."""
    header = parse_request_header(frame)
    _, payload, end = rack_span(frame, header.api_version, header.body_offset)
    try:
        return str(frame[payload:end], "utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("invalid UTF-8 rack_id in a Fetch request") from exc


def fill_fetch_rack(frame: Buffer, version: int, body: int, rack: str) -> bytes | None:
    """The request with ``rack`` as its rack_id when the client sent an empty one;
    None when the client named a rack of its own (forward its bytes unchanged)."""
    start, payload, end = rack_span(frame, version, body)
    if end != payload:
        return None
    field = encode_string(rack, version >= FIRST_FLEXIBLE_VERSION)
    size = len(frame) - 4 - (end - start) + len(field)
    return b"".join((pack_int32(size), frame[4:start], field, frame[end:]))
