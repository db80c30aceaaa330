"""DescribeCluster responses (api key 60), versions 0-2: broker address
rewriting.

Invariant: only the ``brokers`` array is parsed and rebuilt; each broker's
``host``/``port`` is replaced by ``mapper(broker_id, host, port)`` and every
other byte (header, throttle time, error code and message, endpoint type,
cluster id, controller id, rack, is_fenced, tagged fields, authorized
operations) is copied unchanged; the size prefix is recomputed. The whole
frame is walked (it is small), so trailing or missing bytes are detected.
Malformed input raises :class:`ProtocolError` only.

Shape (DescribeClusterResponse.json, flexible in every version): throttle,
error code, error message, endpoint type (v1+; 1 = brokers, 2 = controllers),
cluster id, controller id, brokers[id, host, port, rack, is_fenced (v2+)],
cluster authorized operations. Note that with endpoint type 2 the entries are
controllers, whose node ids may not be broker ids: the caller decides what
to do with such a response (:func:`describe_cluster_endpoint_type`).
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
    need,
    read_array_len,
    read_int32,
    skip_tagged_fields,
)

API_KEY = 60
MAX_VERSION = 2

__all__ = ["describe_cluster_endpoint_type", "rewrite_describe_cluster"]


def _brokers_offset(mv: memoryview, version: int) -> tuple[int, int]:
    """(body offset, offset of the brokers array) after validating the frame."""
    body = check_frame(mv, API_KEY, version, MAX_VERSION)
    need(mv, body, 6)
    _, _, pos = string_span(mv, body + 6, True)  # error message
    if version >= 1:
        need(mv, pos, 1)
        pos += 1
    _, _, pos = string_span(mv, pos, True)  # cluster id
    need(mv, pos, 4)
    return body, pos + 4


def describe_cluster_endpoint_type(frame: Buffer, version: int) -> int:
    """1 (brokers) or 2 (controllers); always 1 before v1."""
    mv = as_view(frame)
    body, _ = _brokers_offset(mv, version)
    if version < 1:
        return 1
    pos = body + 6
    _, _, pos = string_span(mv, pos, True)
    return int(mv[pos])


def rewrite_describe_cluster(
    frame: Buffer, version: int, mapper: AddressMapper
) -> tuple[bytes, list[BrokerAddress]]:
    """Map every broker's address; return the new frame and the upstream brokers."""
    mv = as_view(frame)
    _, pos = _brokers_offset(mv, version)
    n, pos = read_array_len(mv, pos, True, nullable=False)
    parts: list[Buffer] = [mv[4:pos]]
    brokers: list[BrokerAddress] = []
    for _ in range(n):
        node_id, p = read_int32(mv, pos)
        hs, he, p = string_span(mv, p, True)
        if hs < 0:
            raise ProtocolError(f"null broker host at offset {pos + 4}")
        host = decode_span(mv, hs, he)
        assert host is not None
        port, p = read_int32(mv, p)
        tail = p
        rs, re_, p = string_span(mv, p, True)
        rack = decode_span(mv, rs, re_)
        if version >= 2:
            need(mv, p, 1)
            p += 1
        p = skip_tagged_fields(mv, p)
        brokers.append(BrokerAddress(node_id, host, port, rack))
        new_host, new_port = mapper(node_id, host, port)
        parts.append(mv[pos : pos + 4])
        parts.append(encode_address(new_host, new_port, True))
        parts.append(mv[tail:p])
        pos = p
    need(mv, pos, 4)
    end = skip_tagged_fields(mv, pos + 4)
    expect_end(mv, end)
    parts.append(mv[pos:])
    return finish_frame(parts), brokers
