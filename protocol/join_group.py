"""JoinGroup request (api key 11, v0-v9): give each consumer protocol's subscription a
rack (KIP-881) where the member named none.

Layout (Kafka's JoinGroupRequest.json): group_id, session_timeout_ms, rebalance_timeout_ms
(v1+), member_id, group_instance_id (nullable, v5+), protocol_type, protocols[] { name,
metadata (bytes) }, reason (nullable, v8+). Flexible from v6.

Invariants: only requests with protocol type "consumer" are read past the protocol
type; :func:`fill_join_group_rack` returns None (forward the original bytes) unless at
least one protocol's metadata changed. A rewritten request is the original bytes with
a new size prefix and the protocols array re-encoded: every other byte (header, group
and member ids, reason, tagged fields, each protocol's name and tagged fields, the
metadata of protocols left alone) is the client's own. What a protocol's metadata
becomes is :func:`~protocol.consumer_subscription.with_rack`'s answer, asked
only for the protocols ``choose`` names. Malformed input raises
:class:`~protocol.primitives.ProtocolError` and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.consumer_subscription import with_rack
from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_array_len,
    encode_uvarint,
    need,
    pack_int32,
    read_array_len,
    read_bytes_span,
    read_string,
    skip_string,
    skip_tagged_fields,
)

JOIN_GROUP_API_KEY = 11
MAX_VERSION = 9
FIRST_FLEXIBLE_VERSION = 6
CONSUMER_PROTOCOL_TYPE = "consumer"

# name -> None (leave it), False (fill a v3 subscription's rack), True (also raise v0-v2)
Choice = Callable[[str], bool | None]


def fill_join_group_rack(
    frame: Buffer, version: int, body: int, rack: str, choose: Choice
) -> bytes | None:
    """The request with ``rack`` in its consumer subscriptions, or None if none changed."""
    if not 0 <= version <= MAX_VERSION:
        raise ProtocolError(f"JoinGroup v{version} is beyond v{MAX_VERSION}")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    pos = skip_string(frame, body, flexible)  # group_id
    pos += 8 if version >= 1 else 4  # session and rebalance timeouts
    need(frame, pos, 0)
    pos = skip_string(frame, pos, flexible)  # member_id
    if version >= 5:
        pos = skip_string(frame, pos, flexible)  # group_instance_id
    protocol_type, pos = read_string(frame, pos, flexible)
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    array_start = pos
    count, pos = read_array_len(frame, pos, flexible, nullable=False)
    parts: list[Buffer] = []
    changed = False
    for _ in range(count):
        entry = pos
        name, pos = read_string(frame, pos, flexible)
        meta_start = pos
        span, pos = read_bytes_span(frame, pos, flexible)
        meta_end = pos
        if flexible:
            pos = skip_tagged_fields(frame, pos)
        choice = choose(name) if name is not None and span is not None else None
        new = None
        if choice is not None and span is not None:
            new = with_rack(frame[span[0]:span[1]], rack, choice)
        if new is None:
            parts.append(frame[entry:pos])
            continue
        changed = True
        length = encode_uvarint(len(new) + 1) if flexible else pack_int32(len(new))
        parts.extend((frame[entry:meta_start], length, new, frame[meta_end:pos]))
    array_end = pos
    if version >= 8:
        pos = skip_string(frame, pos, flexible)  # reason
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    if pos != len(frame):
        raise ProtocolError(f"{len(frame) - pos} bytes after the JoinGroup request")
    if not changed:
        return None
    protocols = b"".join((encode_array_len(count, flexible), *parts))
    size = len(frame) - 4 - (array_end - array_start) + len(protocols)
    return b"".join((pack_int32(size), frame[4:array_start], protocols, frame[array_end:]))
