"""FindCoordinator responses (api key 10), versions 0-6: coordinator address
rewriting.

Invariants: only the coordinator entries are parsed and rebuilt; every other
byte (header, throttle time, error codes and messages, keys, tagged fields)
is copied unchanged, and the size prefix is recomputed. An entry that names a
coordinator (node id >= 0 and error code 0) gets ``mapper(node_id, host,
port)`` as its address. Any other entry is kept as it is, except that a
non-empty host in it is blanked (``""``, port -1), so that no upstream
address reaches a client even on an error path. Malformed input raises
:class:`ProtocolError` only.

Shapes (FindCoordinatorResponse.json): v0 ``error, node, host, port``; v1-v3
``throttle, error, message, node, host, port`` (v3 flexible); v4+
``throttle, coordinators[key, node, host, port, error, message]`` (flexible).
"""

from __future__ import annotations

from protocol._wire import (
    as_view,
    check_frame,
    decode_span,
    encode_address,
    expect_end,
    finish_frame,
    string_span,
)
from protocol.addresses import AddressMapper, BrokerAddress
from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_string,
    need,
    pack_int32,
    read_array_len,
    read_int16,
    read_int32,
    skip_tagged_fields,
)

API_KEY = 10
MAX_VERSION = 6
FLEXIBLE_FROM = 3
BATCHED_FROM = 4

__all__ = ["rewrite_find_coordinator"]


def _address(
    mv: memoryview,
    pos: int,
    compact: bool,
) -> tuple[int, int, str, int, int]:
    """(node id, address start, host, port, address end) from ``pos`` (the node id)."""
    node_id, p = read_int32(mv, pos)
    start = p
    hs, he, p = string_span(mv, p, compact)
    if hs < 0:
        raise ProtocolError(f"null coordinator host at offset {start}")
    host = decode_span(mv, hs, he)
    assert host is not None
    port, p = read_int32(mv, p)
    return node_id, start, host, port, p


def _replacement(
    node_id: int,
    host: str,
    port: int,
    error_code: int,
    compact: bool,
    mapper: AddressMapper,
    out: list[BrokerAddress],
) -> bytes | None:
    """New host+port bytes, or None to keep the original bytes."""
    if node_id >= 0 and error_code == 0:
        out.append(BrokerAddress(node_id, host, port))
        new_host, new_port = mapper(node_id, host, port)
        return encode_address(new_host, new_port, compact)
    if host:
        return encode_string("", compact) + pack_int32(-1)
    return None


def rewrite_find_coordinator(
    frame: Buffer, version: int, mapper: AddressMapper
) -> tuple[bytes, list[BrokerAddress]]:
    """Map every coordinator address; return the new frame and the upstream
    coordinators (rack None) that were rewritten."""
    mv = as_view(frame)
    pos = check_frame(mv, API_KEY, version, MAX_VERSION)
    compact = version >= FLEXIBLE_FROM
    found: list[BrokerAddress] = []
    parts: list[Buffer] = []
    if version < BATCHED_FROM:
        if version >= 1:
            need(mv, pos, 4)
            pos += 4
        error_code, pos = read_int16(mv, pos)
        if version >= 1:
            _, _, pos = string_span(mv, pos, compact)
        node_id, start, host, port, addr_end = _address(mv, pos, compact)
        p = skip_tagged_fields(mv, addr_end) if compact else addr_end
        expect_end(mv, p)
        new = _replacement(node_id, host, port, error_code, compact, mapper, found)
        if new is None:
            return bytes(mv), found
        return finish_frame([mv[4:start], new, mv[addr_end:]]), found
    need(mv, pos, 4)
    pos += 4
    n, pos = read_array_len(mv, pos, compact, nullable=False)
    parts.append(mv[4:pos])
    for _ in range(n):
        _, _, p = string_span(mv, pos, compact)  # key
        node_id, start, host, port, addr_end = _address(mv, p, compact)
        error_code, p = read_int16(mv, addr_end)
        _, _, p = string_span(mv, p, compact)  # error message
        p = skip_tagged_fields(mv, p)
        new = _replacement(node_id, host, port, error_code, compact, mapper, found)
        if new is None:
            parts.append(mv[pos:p])
        else:
            parts.append(mv[pos:start])
            parts.append(new)
            parts.append(mv[addr_end:p])
        pos = p
    p = skip_tagged_fields(mv, pos)
    expect_end(mv, p)
    parts.append(mv[pos:])
    return finish_frame(parts), found
