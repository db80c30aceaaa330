"""ConsumerGroupHeartbeat request (api key 68, v0-v1, KIP-848): fill RackId when a
member joins without one.

Layout (Kafka's ConsumerGroupHeartbeatRequest.json, flexible in every version):
group_id, member_id, member_epoch (int32), instance_id (nullable), rack_id (nullable),
then fields this module never reads. RackId is "null if not provided or if it didn't
change since the last heartbeat": a member sends its rack when it joins (member epoch
0), so that is the only heartbeat given one here; later nulls keep meaning "unchanged".

Invariants: the request is read only up to rack_id; :func:`fill_heartbeat_rack`
returns None (forward the original bytes) unless the member epoch is 0 and rack_id is
null or empty; a filled request is the original bytes with a new size prefix and only
rack_id replaced. Malformed input up to rack_id raises
:class:`~protocol.primitives.ProtocolError` and nothing else (the rest is the
broker's to judge).
"""

from __future__ import annotations

import struct

from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_string,
    need,
    pack_int32,
    read_uvarint,
    skip_string,
    skip_tagged_fields,
)

CONSUMER_GROUP_HEARTBEAT_API_KEY = 68
MAX_VERSION = 1
JOINING_EPOCH = 0
_I32 = struct.Struct(">i").unpack_from


def body_offset(frame: Buffer) -> int:
    """Where the body starts: the header is v2 (flexible) in every version of this API,
    which the shared header table (checked against kafka-python's schemas, which lack
    this API) cannot say."""
    pos = skip_string(frame, 12, False)  # client_id
    return skip_tagged_fields(frame, pos)


def fill_heartbeat_rack(frame: Buffer, version: int, rack: str) -> bytes | None:
    """The joining heartbeat with ``rack`` as its RackId, or None to forward it as is."""
    if not 0 <= version <= MAX_VERSION:
        raise ProtocolError(f"ConsumerGroupHeartbeat v{version} is beyond v{MAX_VERSION}")
    pos = skip_string(frame, body_offset(frame), True)  # group_id
    pos = skip_string(frame, pos, True)  # member_id
    need(frame, pos, 4)
    epoch = _I32(frame, pos)[0]
    pos = skip_string(frame, pos + 4, True)  # instance_id
    start = pos
    n, pos = read_uvarint(frame, pos)
    if n > 1:
        need(frame, pos, n - 1)
    if epoch != JOINING_EPOCH or n > 1:
        return None  # not joining, or the member named its rack
    field = encode_string(rack, True)
    size = len(frame) - 4 - (pos - start) + len(field)
    return b"".join((pack_int32(size), frame[4:start], field, frame[pos:]))
