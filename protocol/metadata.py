"""Metadata responses (api key 3), versions 0-13: broker address rewriting and
a fast reader that feeds the proxy's cluster view.

Invariants:

* :func:`rewrite_metadata_brokers` parses only the header, the throttle time
  and the ``brokers`` array. Each broker's ``host``/``port`` is replaced by
  the mapper's answer; its node id, rack and tagged fields are copied byte for
  byte, and everything after the brokers array (cluster id, controller id,
  topics, ...) is copied as one slice. The size prefix is recomputed. No
  upstream broker address survives in the output, because the brokers array
  is the only place a Metadata response carries one.
* :func:`read_metadata` decodes the whole response (strictly: trailing bytes
  are an error) into immutable values: a frozen dataclass for the snapshot,
  one plain tuple per topic (a :data:`TopicRow`, fields in the order of
  :class:`TopicMetadata`) and per partition (a :data:`PartitionRow`, fields in
  the order of :class:`PartitionMetadata`) holding strings, bytes, ints and
  tuples of them. 100,000 partitions and 20,000 topics are normal cases, and
  plain tuples of atomic values are what CPython's cyclic collector stops
  tracking the first time it sees them (a named tuple or an instance of a class
  stays tracked for life: a snapshot of them, alive while a view is built from
  it, is promoted to the oldest generation and brings the next full collection
  forward); the reader never touches the collector's settings.
  Identical replica/ISR/offline arrays (same bytes) are decoded once per
  response and shared between partitions. An optional ``pause`` callable is
  called between topics and every 1,024 partitions within a topic (a caller on
  a worker thread uses it to let other threads run); it never changes what is
  read. An optional ``on_topic`` callable is given each topic as soon as it is
  read, instead of the snapshot (whose ``topics`` are then empty): a caller
  that keeps only what changed lets the rest go at once, before any collection
  can promote it (a topic's row is three tuples deep, one level more than the
  young collections untrack before they promote).
* Both raise :class:`ProtocolError` for malformed input, never anything else
  (an exception raised by the caller's mapper is propagated unchanged).

Version differences (MetadataResponse.json): throttle time v3+, broker rack
v1+, cluster id v2+, controller id v1+, topic is_internal v1+, topic id v10+,
topic name nullable v12+, partition leader epoch v7+, offline replicas v5+,
topic authorized operations v8+, cluster authorized operations v8-10,
top-level error code v13+, flexible (compact strings/arrays, tagged fields)
v9+.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from protocol._wire import (
    as_view,
    check_frame,
    decode_span,
    encode_address,
    finish_frame,
    guard,
    string_span,
)
from protocol.addresses import AddressMapper, BrokerAddress
from protocol.primitives import (
    Buffer,
    ProtocolError,
    need,
    read_array_len,
    read_int32,
    read_uvarint,
    skip_tagged_fields,
)

API_KEY = 3
MAX_VERSION = 13
FLEXIBLE_FROM = 9

__all__ = [
    "MetadataSnapshot",
    "PartitionMetadata",
    "PartitionRow",
    "TopicMetadata",
    "TopicRow",
    "read_metadata",
    "rewrite_metadata_brokers",
]


PartitionRow = tuple[int, int, int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]
"""One partition as :func:`read_metadata` returns it: a plain tuple with the fields of
:class:`PartitionMetadata`, in its order."""


class PartitionMetadata(NamedTuple):
    """The fields of a :data:`PartitionRow` by name (``PartitionMetadata(*row)``); equal
    to the plain row with the same values, so it also serves to write one by name."""

    partition_index: int
    error_code: int
    leader: int
    leader_epoch: int  # -1 before v7
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]  # () before v5


TopicRow = tuple[str | None, bytes | None, int, bool, tuple[PartitionRow, ...]]
"""One topic as :func:`read_metadata` returns it: a plain tuple with the fields of
:class:`TopicMetadata`, in its order."""


class TopicMetadata(NamedTuple):
    """The fields of a :data:`TopicRow` by name (``TopicMetadata(*row)``); equal to the
    plain row with the same values, so it also serves to write one by name."""

    name: str | None
    topic_id: bytes | None  # 16 bytes from v10 (all zero when unknown), None before
    error_code: int
    is_internal: bool
    partitions: tuple[PartitionRow, ...]


@dataclass(frozen=True, slots=True)
class MetadataSnapshot:
    brokers: tuple[BrokerAddress, ...]
    cluster_id: str | None
    controller_id: int  # -1 before v1
    topics: tuple[TopicRow, ...]
    throttle_time_ms: int = 0  # 0 before v3
    error_code: int = 0  # top-level error code, v13+ (0 before)


def rewrite_metadata_brokers(
    frame: Buffer, version: int, mapper: AddressMapper
) -> tuple[bytes, list[BrokerAddress]]:
    """Replace every broker's host and port with ``mapper(node_id, host, port)``.

    Returns the new frame (size prefix included) and the upstream brokers that
    were read, racks included.
    """
    mv = as_view(frame)
    pos = check_frame(mv, API_KEY, version, MAX_VERSION)
    compact = version >= FLEXIBLE_FROM
    if version >= 3:
        need(mv, pos, 4)
        pos += 4
    n, pos = read_array_len(mv, pos, compact, nullable=False)
    parts: list[Buffer] = [mv[4:pos]]
    brokers: list[BrokerAddress] = []
    for _ in range(n):
        node_id, p = read_int32(mv, pos)
        hs, he, p = string_span(mv, p, compact)
        if hs < 0:
            raise ProtocolError(f"null broker host at offset {p}")
        host = decode_span(mv, hs, he)
        port, p = read_int32(mv, p)
        tail = p
        rack = None
        if version >= 1:
            rs, re_, p = string_span(mv, p, compact)
            rack = decode_span(mv, rs, re_)
        if compact:
            p = skip_tagged_fields(mv, p)
        assert host is not None
        brokers.append(BrokerAddress(node_id, host, port, rack))
        new_host, new_port = mapper(node_id, host, port)
        parts.append(mv[pos : pos + 4])
        parts.append(encode_address(new_host, new_port, compact))
        parts.append(mv[tail:p])
        pos = p
    parts.append(mv[pos:])
    return finish_frame(parts), brokers


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_V0 = struct.Struct(">hii")  # error, index, leader (v0-v6), then replicas length
_PART_V7 = struct.Struct(">hiii")  # error, index, leader, epoch (v7-v8)
_PART_FLEX = struct.Struct(">hiii")  # error, index, leader, epoch (v9+)
_EMPTY: tuple[int, ...] = ()
_CHUNK = 1024  # partitions read between two calls of ``pause`` (about 1 ms)
Pause = Callable[[], object] | None


def read_metadata(frame: Buffer, version: int, pause: Pause = None,
                  on_topic: Callable[[TopicRow], object] | None = None) -> MetadataSnapshot:
    """Decode a whole Metadata response frame into a :class:`MetadataSnapshot`.

    ``pause``, if given, is called between topics and every 1,024 partitions.
    ``on_topic``, if given, gets each topic as it is read, and the snapshot none (a
    ProtocolError may still come after some topics were given).
    """
    buf = bytes(frame)
    pos = check_frame(buf, API_KEY, version, MAX_VERSION)
    return _read(buf, pos, version, pause, on_topic)


@guard
def _read(buf: bytes, pos: int, version: int, pause: Pause,
          on_topic: Callable[[TopicRow], object] | None) -> MetadataSnapshot:
    compact = version >= FLEXIBLE_FROM
    end = len(buf)
    i32 = _I32.unpack_from
    throttle = 0
    if version >= 3:
        throttle = i32(buf, pos)[0]
        pos += 4
    n, pos = read_array_len(buf, pos, compact, nullable=False)
    brokers = []
    for _ in range(n):
        node_id = i32(buf, pos)[0]
        hs, he, pos = string_span(buf, pos + 4, compact)
        if hs < 0:
            raise ProtocolError(f"null broker host at offset {pos}")
        host = buf[hs:he].decode()
        port = i32(buf, pos)[0]
        pos += 4
        rack = None
        if version >= 1:
            rs, re_, pos = string_span(buf, pos, compact)
            if rs >= 0:
                rack = buf[rs:re_].decode()
        if compact:
            pos = skip_tagged_fields(buf, pos)
        brokers.append(BrokerAddress(node_id, host, port, rack))
    cluster_id = None
    if version >= 2:
        cs, ce, pos = string_span(buf, pos, compact)
        if cs >= 0:
            cluster_id = buf[cs:ce].decode()
    controller_id = -1
    if version >= 1:
        controller_id = i32(buf, pos)[0]
        pos += 4
    n, pos = read_array_len(buf, pos, compact, nullable=False)
    topics: list[TopicRow] = []
    add = topics.append if on_topic is None else on_topic
    cache: ArrayCache = {}
    for _ in range(n):
        error_code = _I16.unpack_from(buf, pos)[0]
        ns, ne, pos = string_span(buf, pos + 2, compact)
        name = buf[ns:ne].decode() if ns >= 0 else None
        topic_id = None
        if version >= 10:
            if pos + 16 > end:
                raise ProtocolError(f"truncated topic id at offset {pos}")
            topic_id = buf[pos : pos + 16]
            pos += 16
        is_internal = False
        if version >= 1:
            is_internal = buf[pos] != 0
            pos += 1
        if compact:
            partitions, pos = _read_partitions_flex(buf, pos, cache, pause)
        else:
            partitions, pos = _read_partitions_legacy(buf, pos, version, cache, pause)
        if version >= 8:
            pos += 4  # topic authorized operations
        if compact:
            pos = skip_tagged_fields(buf, pos)
        if pos > end:
            raise ProtocolError("truncated topic")
        add((name, topic_id, error_code, is_internal, partitions))
        if pause is not None:
            pause()
    if 8 <= version <= 10:
        pos += 4  # cluster authorized operations
    error_code = 0
    if version >= 13:
        error_code = _I16.unpack_from(buf, pos)[0]
        pos += 2
    if compact:
        pos = skip_tagged_fields(buf, pos)
    if pos != end:
        raise ProtocolError(f"{end - pos} unexpected bytes at offset {pos} of a metadata response")
    return MetadataSnapshot(
        tuple(brokers), cluster_id, controller_id, tuple(topics), throttle, error_code
    )


_SMALL_ARRAYS = [struct.Struct(f">{k}i") for k in range(128)]
ArrayCache = dict[bytes, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


def _array(k: int) -> struct.Struct:
    return _SMALL_ARRAYS[k] if k < 128 else struct.Struct(f">{k}i")


def _read_partitions_legacy(
    buf: bytes, pos: int, version: int, cache: ArrayCache, pause: Pause
) -> tuple[tuple[PartitionRow, ...], int]:
    """Partitions of a non-flexible (v0-v8) response.

    The replica, ISR and offline arrays of a partition are decoded once per
    distinct byte pattern (``cache``, shared by all topics of a response): a
    cluster has far fewer distinct replica assignments than partitions, so
    this saves most of the decoding and most tuple allocations.
    """
    end = len(buf)
    n = _I32.unpack_from(buf, pos)[0]
    pos += 4
    if n < 0 or n > end - pos:
        raise ProtocolError(f"bad partition count {n} at offset {pos}")
    i32 = _I32.unpack_from
    get = cache.get
    empty = _EMPTY
    out: list[PartitionRow] = []
    append = out.append
    has_epoch = version >= 7
    has_offline = version >= 5
    fixed = _PART_V7 if has_epoch else _PART_V0
    fixed_unpack = fixed.unpack_from
    fixed_size = fixed.size
    for done in range(0, n, _CHUNK):
        if done and pause is not None:
            pause()
        for _ in range(min(_CHUNK, n - done)):
            if has_epoch:
                err, idx, leader, epoch = fixed_unpack(buf, pos)
            else:
                err, idx, leader = fixed_unpack(buf, pos)
                epoch = -1
            start = pos + fixed_size
            k1 = i32(buf, start)[0]
            p2 = start + 4 + 4 * k1
            k2 = i32(buf, p2)[0]
            pos = p2 + 4 + 4 * k2
            k3 = 0
            if has_offline:
                p3 = pos
                k3 = i32(buf, p3)[0]
                pos = p3 + 4 + 4 * k3
            if k1 < 0 or k2 < 0 or k3 < 0 or pos > end:
                raise ProtocolError(f"bad replica arrays at offset {start}")
            key = buf[start:pos]
            arrays = get(key)
            if arrays is None:
                arrays = cache[key] = (
                    _array(k1).unpack_from(buf, start + 4),
                    _array(k2).unpack_from(buf, p2 + 4),
                    _array(k3).unpack_from(buf, p3 + 4) if has_offline else empty,
                )
            append((idx, err, leader, epoch, *arrays))
    return tuple(out), pos


def _read_partitions_flex(
    buf: bytes, pos: int, cache: ArrayCache, pause: Pause
) -> tuple[tuple[PartitionRow, ...], int]:
    """Partitions of a flexible (v9+) response (same caching as the legacy reader)."""
    end = len(buf)
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0 or n > end - pos:
        raise ProtocolError(f"bad partition count {n} at offset {pos}")
    get = cache.get
    small = _SMALL_ARRAYS
    fixed_unpack = _PART_FLEX.unpack_from
    out: list[PartitionRow] = []
    append = out.append
    for done in range(0, n, _CHUNK):
        if done and pause is not None:
            pause()
        for _ in range(min(_CHUNK, n - done)):
            err, idx, leader, epoch = fixed_unpack(buf, pos)
            start = pos + 14
            fast = False
            # fast path: three arrays of fewer than 127 elements (one-byte lengths)
            b1 = buf[start]
            if 0 < b1 < 0x80:
                p2 = start + 4 * b1 - 3
                b2 = buf[p2]
                if 0 < b2 < 0x80:
                    p3 = p2 + 4 * b2 - 3
                    b3 = buf[p3]
                    if 0 < b3 < 0x80:
                        pos = p3 + 4 * b3 - 3
                        fast = True
            if fast:
                if pos > end:
                    raise ProtocolError(f"truncated partition at offset {start}")
                key = buf[start:pos]
                arrays = get(key)
                if arrays is None:
                    arrays = cache[key] = (
                        small[b1 - 1].unpack_from(buf, start + 1),
                        small[b2 - 1].unpack_from(buf, p2 + 1),
                        small[b3 - 1].unpack_from(buf, p3 + 1),
                    )
            else:
                arrays, pos = _compact_arrays(buf, start)
                arrays = cache.setdefault(buf[start:pos], arrays)
            if buf[pos]:
                pos = skip_tagged_fields(buf, pos)
            else:
                pos += 1
            append((idx, err, leader, epoch, *arrays))
    return tuple(out), pos


def _compact_arrays(
    buf: bytes, pos: int
) -> tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], int]:
    """Replicas, ISR and offline replicas (compact int32 arrays), the general way."""
    out = []
    for _ in range(3):
        k, pos = read_uvarint(buf, pos)
        if k == 0:
            raise ProtocolError(f"null replica array at offset {pos}")
        k -= 1
        if pos + 4 * k > len(buf):
            raise ProtocolError(f"truncated replica array at offset {pos}")
        out.append(_array(k).unpack_from(buf, pos))
        pos += 4 * k
    return (out[0], out[1], out[2]), pos
