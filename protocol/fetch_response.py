"""Fetch response (api key 1, v0-v15): how many record bytes it carries, and how many
partitions it redirects to a preferred read replica (KIP-392).

Invariants: :func:`fetch_response_traffic` walks the response without copying
anything (record sets are skipped by their length) and changes nothing; the proxy
forwards the frame it was given. Malformed input (truncation, negative lengths,
trailing bytes, a version outside 0-15) raises
:class:`~protocol.primitives.ProtocolError` and nothing else.

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

from protocol._wire import check_frame
from protocol.primitives import (
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
    try:
        if (12 <= version <= MAX_VERSION and frame[8] == 0
                and _I32(frame, 0)[0] == len(frame) - 4):  # the usual header: read in place
            total, redirects, pos = _walk_flexible(frame, 19, version >= 13)
        else:
            pos = check_frame(frame, 1, version, MAX_VERSION)
            if version >= 12:
                total, redirects, pos = _walk_flexible(frame, pos + 10, version >= 13)
            else:
                total, redirects, pos = _walk_classic(frame, pos, version)
    except (IndexError, struct.error):
        raise ProtocolError("truncated Fetch response") from None
    if pos != len(frame):
        raise ProtocolError(f"{len(frame) - pos} trailing bytes in a Fetch response")
    return FetchTraffic(total, redirects)


def _count(frame: Buffer, pos: int) -> tuple[int, int]:
    """A compact array length that must not be null."""
    n, pos = read_uvarint(frame, pos)
    if n == 0:
        raise ProtocolError(f"null array at offset {pos}")
    return n - 1, pos


def _walk_flexible(frame: Buffer, pos: int, by_id: bool) -> tuple[int, int, int]:
    """(record bytes, redirects, end) of a v12+ response body past its session id (the
    hot path: a byte below 0x80 is a whole length, tagged fields are mostly absent)."""
    total = redirects = 0
    i32 = _I32
    end = len(frame)
    b = frame[pos]
    if 0 < b < 0x80:
        topics, pos = b - 1, pos + 1
    else:
        topics, pos = _count(frame, pos)
    for _ in range(topics):
        if by_id:
            pos += 16
        else:
            b = frame[pos]
            if b < 0x80:
                pos += b if b else 1
            else:
                n, pos = read_uvarint(frame, pos)
                pos += n - 1
        b = frame[pos]
        if 0 < b < 0x80:
            partitions, pos = b - 1, pos + 1
        else:
            partitions, pos = _count(frame, pos)
        for _ in range(partitions):
            pos += 30  # partition_index .. log_start_offset
            b = frame[pos]
            if b == 1:  # no aborted transactions, the usual
                pos += 1
            elif b:  # a compact array of (producer_id, first_offset, tagged fields)
                aborted, pos = read_uvarint(frame, pos)
                for _ in range(aborted - 1):
                    pos = skip_tagged_fields(frame, pos + 16)
            else:  # null
                pos += 1
            if i32(frame, pos)[0] >= 0:
                redirects += 1
            pos += 4
            b = frame[pos]
            if b < 0x80:
                n, pos = b - 1, pos + 1
            else:
                n, pos = read_uvarint(frame, pos)
                n -= 1
            if n > 0:
                pos += n
                if pos > end:
                    raise ProtocolError(f"records of {n} bytes run past the frame")
                total += n
            if frame[pos] == 0:
                pos += 1
            else:
                pos = skip_tagged_fields(frame, pos)
        if frame[pos] == 0:
            pos += 1
        else:
            pos = skip_tagged_fields(frame, pos)
    return total, redirects, skip_tagged_fields(frame, pos)


def _walk_classic(frame: Buffer, pos: int, version: int) -> tuple[int, int, int]:
    """(record bytes, redirects, end) of a v0-v11 response body."""
    if version >= 1:
        pos += 4
    if version >= 7:
        pos += 6
    need(frame, pos, 0)
    fixed = _FIXED[version]
    total = redirects = 0
    topics, pos = read_array_len(frame, pos, False, nullable=False)
    for _ in range(topics):
        pos = skip_string(frame, pos, False)
        partitions, pos = read_array_len(frame, pos, False, nullable=False)
        for _ in range(partitions):
            pos += fixed
            if version >= 4:
                aborted, pos = read_array_len(frame, pos, False)
                if aborted > 0:
                    pos += aborted * 16  # producer_id, first_offset
            if version >= 11:
                need(frame, pos, 4)
                if _I32(frame, pos)[0] >= 0:
                    redirects += 1
                pos += 4
            need(frame, pos, 4)
            n = _I32(frame, pos)[0]
            pos += 4
            if n > 0:
                need(frame, pos, n)
                pos += n
                total += n
            elif n < -1:
                raise ProtocolError(f"negative records length {n} at offset {pos}")
    return total, redirects, pos
