"""Metadata request (api key 3): which topics a client asks about.

Only the ``topics`` array is read (the request's first field); nothing after it. A
request for every topic (null array in v1+, empty array in v0) gives ``None``; a
named request gives its names, and in v10+ the topic ids of entries that carry an id
and no name (a client may ask by id).

Layout (Kafka's MetadataRequest.json): topics[] { topic_id (uuid, v10+), name (string;
nullable v10+) } (nullable v1+; flexible, compact, from v9), then flags this reader
never needs. Malformed input raises :class:`~protocol.primitives.ProtocolError`.
"""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.primitives import Buffer, read_array_len, read_string, read_uuid, skip_tagged_fields

METADATA_API_KEY = 3
FIRST_FLEXIBLE_VERSION = 9
FIRST_TOPIC_ID_VERSION = 10
_NO_ID = bytes(16)


def read_metadata_request_topics(frame: Buffer, header: RequestHeader
                                 ) -> tuple[str | bytes, ...] | None:
    """The topics a Metadata request names (names, or topic ids for entries without a
    name), or None when it asks for every topic."""
    version = header.api_version
    compact = version >= FIRST_FLEXIBLE_VERSION
    by_id = version >= FIRST_TOPIC_ID_VERSION
    count, pos = read_array_len(frame, header.body_offset, compact, nullable=version >= 1)
    if count < 0 or (count == 0 and version == 0):
        return None
    out: list[str | bytes] = []
    for _ in range(count):
        topic_id = None
        if by_id:
            topic_id, pos = read_uuid(frame, pos)
        name, pos = read_string(frame, pos, compact)
        if compact:
            pos = skip_tagged_fields(frame, pos)
        if name is not None:
            out.append(name)
        elif topic_id is not None and topic_id != _NO_ID:
            out.append(topic_id)
    return tuple(out)
