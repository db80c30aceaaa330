"""ConsumerProtocolSubscription (v0-v3): the member metadata a consumer puts in each
protocol of its JoinGroup, and the RackId that KIP-881 added in v3.

Layout (Kafka's ConsumerProtocolSubscription.json, never flexible): version (int16),
topics[] string, user_data (nullable bytes), owned_partitions[] (v1+) { topic,
partitions[] int32 }, generation_id (int32, v2+), rack_id (nullable string, v3+).
Every reader parses a newer version with the fields it knows (the schema says new
versions only append), so a v3 message means to a v0-v2 reader what its first fields
say, and a v0-v2 message means to a v3 reader: no owned partitions (v0), generation -1
(v0-v1), no rack.

Invariants: :func:`with_rack` returns None (leave the bytes alone) unless the
subscription parses exactly as v0-v3 (no byte left over) and names no rack; the
result keeps every byte of the original (topics, user data, owned partitions,
generation) and only sets the version to 3 where it was lower, appending the defaults
a v3 reader assumes for the fields the old version lacks, then the rack. Unknown or
malformed metadata is never an error here: it is not ours, it stays as it came.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_string,
    pack_int16,
    pack_int32,
    read_array_len,
    read_bytes_span,
    read_int16,
    skip_string,
)

RACK_VERSION = 3
_I32 = struct.Struct(">i").unpack_from
_NO_OWNED_PARTITIONS = pack_int32(0)
_NO_GENERATION = pack_int32(-1)


class Subscription(NamedTuple):
    version: int
    rack: str | None
    rack_start: int  # where rack_id starts (v3), or the end of the message (v0-v2)


def parse_subscription(data: Buffer) -> Subscription | None:
    """The version and rack of a v0-v3 subscription; None when it is not one."""
    try:
        version, pos = read_int16(data, 0)
        if not 0 <= version <= RACK_VERSION:
            return None
        topics, pos = read_array_len(data, pos, False, nullable=False)
        for _ in range(topics):
            pos = skip_string(data, pos, False)
        _, pos = read_bytes_span(data, pos, False)
        if version >= 1:
            owned, pos = read_array_len(data, pos, False, nullable=False)
            for _ in range(owned):
                pos = skip_string(data, pos, False)
                partitions, pos = read_array_len(data, pos, False, nullable=False)
                pos += 4 * partitions
        if version >= 2:
            pos += 4
        rack: str | None = None
        start = pos
        if version >= 3:
            n, pos = read_int16(data, pos)
            if n >= 0:
                if pos + n > len(data):
                    return None
                rack = str(data[pos:pos + n], "utf-8")
                pos += n
        if pos != len(data):
            return None
    except (ProtocolError, UnicodeDecodeError):
        return None
    return Subscription(version, rack, start)


def with_rack(data: Buffer, rack: str, upgrade: bool) -> bytes | None:
    """``data`` naming ``rack``, or None to keep it as it is.

    A v3 subscription without a rack (null or empty) gets ``rack``; a v0-v2 one is
    raised to v3 only when ``upgrade`` (its readers are known to read v3)."""
    sub = parse_subscription(data)
    if sub is None or sub.rack:
        return None
    field = encode_string(rack, False)
    if sub.version == RACK_VERSION:
        return b"".join((data[:sub.rack_start], field))
    if not upgrade:
        return None
    missing = []
    if sub.version < 1:
        missing.append(_NO_OWNED_PARTITIONS)
    if sub.version < 2:
        missing.append(_NO_GENERATION)
    return b"".join((pack_int16(RACK_VERSION), data[2:], *missing, field))
