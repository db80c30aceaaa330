"""Fetch response (api key 1, v0-v15): how many record bytes it carries, and how many
partitions it redirects to a preferred read replica (KIP-392).

Invariants: :func:`fetch_response_traffic` walks the response without copying
anything (record sets are skipped by their length) and changes nothing; the proxy
forwards the frame it was given. Malformed input (truncation, negative lengths,
trailing bytes, a version outside 0-15) raises
:class:`~rackguard.protocol.primitives.ProtocolError` and nothing else.

Layout (Kafka's FetchResponse.json): throttle_time_ms (v1+), error_code and session_id
(v7+), responses[] { topic (string, v0-12) | topic_id (uuid, v13+), partitions[] {
partition_index, error_code, high_watermark, last_stable_offset (v4+),
log_start_offset (v5+), aborted_transactions[] (nullable, v4+) { producer_id,
first_offset }, preferred_read_replica (v11+), records (nullable) } }. Flexible from
v12 (compact lengths, tagged fields on every struct).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rackguard.protocol._wire import check_frame
from rackguard.protocol.primitives import (
    Buffer,
    ProtocolError,
    need,
    read_array_len,
    read_uvarint,
    skip_string,
    skip_tagged_fields,
)

MAX_VERSION = 15
_I32 = struct.Struct(">i").unpack_from


class FetchTraffic(NamedTuple):
    record_bytes: int  # bytes of record sets, all partitions
    redirects: int  # partitions answered with a preferred read replica and no records


def _fixed_before_aborted(version: int) -> int:
    size = 4 + 2 + 8  # partition_index, error_code, high_watermark
    if version >= 4:
        size += 8  # last_stable_offset
    if version >= 5:
        size += 8  # log_start_offset
    return size


_FIXED = {v: _fixed_before_aborted(v) for v in range(MAX_VERSION + 1)}


def fetch_response_traffic(frame: Buffer, version: int) -> FetchTraffic:
    """Record bytes and redirected partitions of a Fetch response frame."""
    pos = check_frame(frame, 1, version, MAX_VERSION)
    flexible = version >= 12
    if version >= 1:
        pos += 4
    if version >= 7:
        pos += 6
    need(frame, pos, 0)
    fixed = _FIXED[version]
    total = 0
    redirects = 0
    topics, pos = read_array_len(frame, pos, flexible, nullable=False)
    for _ in range(topics):
        if version >= 13:
            need(frame, pos, 16)
            pos += 16
        else:
            pos = skip_string(frame, pos, flexible)
        partitions, pos = read_array_len(frame, pos, flexible, nullable=False)
        for _ in range(partitions):
            pos += fixed
            if version >= 4:
                aborted, pos = read_array_len(frame, pos, flexible)
                if aborted > 0:
                    if flexible:
                        for _ in range(aborted):
                            pos = skip_tagged_fields(frame, pos + 16)
                    else:
                        pos += aborted * 16  # producer_id, first_offset
            if version >= 11:
                need(frame, pos, 4)
                if _I32(frame, pos)[0] >= 0:
                    redirects += 1
                pos += 4
            if flexible:
                n, pos = read_uvarint(frame, pos)
                n -= 1
            else:
                need(frame, pos, 4)
                n = _I32(frame, pos)[0]
                pos += 4
            if n > 0:
                need(frame, pos, n)
                pos += n
                total += n
            elif n < -1:
                raise ProtocolError(f"negative records length {n} at offset {pos}")
            if flexible:
                pos = skip_tagged_fields(frame, pos)
        if flexible:
            pos = skip_tagged_fields(frame, pos)
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    if pos != len(frame):
        raise ProtocolError(f"{len(frame) - pos} trailing bytes in a Fetch response")
    return FetchTraffic(total, redirects)
