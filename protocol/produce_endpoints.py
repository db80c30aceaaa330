"""NodeEndpoints in Produce responses (v10+, top-level tagged field 0): read and rewrite.

Invariant: a broker address never has to be decoded into a full response to be
replaced. :func:`rewrite_produce_response_endpoints` walks the response without
building it, returns ``None`` when there is no NodeEndpoints field (v3-v9, or none
sent), and otherwise re-encodes only each endpoint's host and port plus the one
tagged-field length that encloses them; every other byte, including each endpoint's
rack and tagged fields and the other top-level tagged fields, is copied verbatim.
Every v10+ response is walked whole (its top-level tagged fields sit after all its
partitions, and no shorter check can tell NodeEndpoints from a partition's bytes),
with the usual shapes (short lengths, empty tagged fields, no record errors) read
inline. Malformed input raises
:class:`~protocol.primitives.ProtocolError` and nothing else.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from protocol.headers import response_body_offset
from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_string,
    encode_uvarint,
    pack_int32,
    read_uvarint,
)
from protocol.produce_request import (
    FIRST_TOPIC_ID_VERSION,
    MAX_PRODUCE_VERSION,
    MIN_PRODUCE_VERSION,
    PRODUCE_API_KEY,
)
from protocol.produce_response import (
    FIRST_LEADER_HINT_VERSION,
    NodeEndpoint,
    read_checked_array_len,
    read_endpoint_entries,
    skip_tag_fields,
)

EndpointMapper = Callable[[int, str, int], tuple[str, int]]
"""``mapper(node_id, host, port) -> (host, port)``: the address clients should see."""

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from


def _skip_string(buf: Buffer, pos: int, flexible: bool, end: int) -> int:
    if flexible:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n = _I16(buf, pos)[0]
        pos += 2
    if n > 0:
        pos += n
        if pos > end:
            raise ProtocolError("string runs past the end of the frame")
    return pos


def _find_endpoints_tag(frame: Buffer, version: int) -> tuple[int, int, int] | None:
    """(offset of the tag's size varint, payload start, payload end) of NodeEndpoints.

    Walks the whole response (so a malformed one is still refused), reading a varint
    below 0x80 and an empty tag section inline: a usual response costs no helper call.
    """
    end = len(frame)
    if end < 4 or _I32(frame, 0)[0] != end - 4:  # check_size_prefix, inline
        raise ProtocolError("frame size prefix does not match the frame length")
    pos = 9 if frame[8] == 0 else response_body_offset(frame, PRODUCE_API_KEY, version)
    by_id = version >= FIRST_TOPIC_ID_VERSION
    n_topics = frame[pos]
    if n_topics < 0x80:
        pos += 1
        n_topics -= 1
        if n_topics < 0 or n_topics > end - pos:
            raise ProtocolError(f"bad array length {n_topics} at offset {pos}")
    else:
        n_topics, pos = read_checked_array_len(frame, pos, True, end)
    for _ in range(n_topics):
        if by_id:
            pos += 16
        else:
            n = frame[pos]
            if n < 0x80:
                pos += n if n > 1 else 1  # compact length n - 1, then the name
                if pos > end:
                    raise ProtocolError("string runs past the end of the frame")
            else:
                pos = _skip_string(frame, pos, True, end)
        n_parts = frame[pos]
        if n_parts < 0x80:
            pos += 1
            n_parts -= 1
            if n_parts < 0 or n_parts > end - pos:
                raise ProtocolError(f"bad array length {n_parts} at offset {pos}")
        else:
            n_parts, pos = read_checked_array_len(frame, pos, True, end)
        for _ in range(n_parts):
            pos += 30  # index, error code, base offset, append time, log start offset
            if frame[pos] == 1:  # no record errors
                pos += 1
            else:
                n_err, pos = read_checked_array_len(frame, pos, True, end)
                for _ in range(n_err):
                    pos = _skip_string(frame, pos + 4, True, end)
                    pos = skip_tag_fields(frame, pos, end)
            if frame[pos] == 0:  # null error message
                pos += 1
            else:
                pos = _skip_string(frame, pos, True, end)
            if frame[pos] == 0:  # no tagged fields (no CurrentLeader)
                pos += 1
            else:
                pos = skip_tag_fields(frame, pos, end)
        if frame[pos] == 0:
            pos += 1
        else:
            pos = skip_tag_fields(frame, pos, end)
    pos += 4  # throttle time
    if pos + 1 == end and frame[pos] == 0:  # no top-level tagged fields: the usual end
        return None
    found = None
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        tag, pos = read_uvarint(frame, pos)
        size_at = pos
        size, pos = read_uvarint(frame, pos)
        if pos + size > end:
            raise ProtocolError("tagged field runs past the end of the frame")
        if tag == 0:
            found = (size_at, pos, pos + size)
        pos += size
    if pos != end:
        raise ProtocolError(f"{end - pos} unexpected bytes after the Produce response body")
    return found


def _scan_endpoints(
    frame: Buffer, version: int
) -> tuple[tuple[int, int, int], list[tuple[NodeEndpoint, int, int]]] | None:
    if not MIN_PRODUCE_VERSION <= version <= MAX_PRODUCE_VERSION:
        raise ProtocolError(f"unsupported Produce version {version}")
    if version < FIRST_LEADER_HINT_VERSION:
        return None
    try:
        found = _find_endpoints_tag(frame, version)
        if found is None:
            return None
        return found, read_endpoint_entries(frame, found[1], found[2])[0]
    except (IndexError, struct.error) as exc:
        raise ProtocolError(f"truncated Produce v{version} response") from exc


def rewrite_produce_response_endpoints_seen(
    frame: Buffer, version: int, mapper: EndpointMapper
) -> tuple[bytes | None, tuple[NodeEndpoint, ...]]:
    """Like :func:`rewrite_produce_response_endpoints`, also returning the endpoints
    as the broker sent them (before mapping), so the caller can learn addresses."""
    scanned = _scan_endpoints(frame, version)
    if scanned is None:
        return None, ()
    (size_at, start, stop), entries = scanned
    mv = memoryview(frame)
    n_len_end = read_uvarint(frame, start)[1]
    payload: list[Buffer] = [mv[start:n_len_end]]
    for e, rack_start, entry_end in entries:
        host, port = mapper(e.node_id, e.host, e.port)
        payload += (
            pack_int32(e.node_id),
            encode_string(host, True),
            pack_int32(port),
            mv[rack_start:entry_end],
        )
    body = b"".join(payload)
    out: list[Buffer] = [mv[4:size_at], encode_uvarint(len(body)), body, mv[stop:]]
    size = sum(len(b) for b in out)
    return pack_int32(size) + b"".join(out), tuple(e for e, _, _ in entries)


def rewrite_produce_response_endpoints(
    frame: Buffer, version: int, mapper: EndpointMapper
) -> bytes | None:
    """A copy of the frame with every NodeEndpoint's host/port replaced by
    ``mapper(node_id, host, port)``; ``None`` if the response has no NodeEndpoints."""
    return rewrite_produce_response_endpoints_seen(frame, version, mapper)[0]


def produce_response_endpoints(frame: Buffer, version: int) -> tuple[NodeEndpoint, ...]:
    """The NodeEndpoints a response carries (empty before v10 or when absent)."""
    scanned = _scan_endpoints(frame, version)
    return () if scanned is None else tuple(e for e, _, _ in scanned[1])
