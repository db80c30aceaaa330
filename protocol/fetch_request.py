"""Fetch request (api key 1): find the consumer's RackId (v11+) and fill it when empty.

KIP-392 added ``rack_id`` to Fetch v11 as the request's last top-level field (in the
flexible versions, v12+, only the top-level tagged fields follow it). A broker with
``replica.selector.class=RackAwareReplicaSelector`` uses it to name a same-rack replica
in the response (``preferred_read_replica``).

Invariants: :func:`fill_fetch_rack` walks the request up to ``rack_id`` without copying
anything (or, for a request of a shape it has walked, checks the bytes that walk read:
:class:`FetchRackFill`) and returns ``None`` (forward the original bytes) unless
``rack_id`` is the empty string; a filled request is the original bytes with a new size
prefix and only the ``rack_id`` field replaced: every byte before it and every tagged
field after it is the client's own. Versions below 11 have no rack and are never read.
Malformed input (truncation, negative lengths, trailing bytes) raises
:class:`~protocol.primitives.ProtocolError` and nothing else.

Layout (Kafka's FetchRequest.json): replica_id (int32, v0-14), max_wait_ms, min_bytes,
max_bytes (v3+), isolation_level (int8, v4+), session_id and session_epoch (v7+),
topics[] { topic (string, v0-12) | topic_id (uuid, v13+), partitions[] { partition,
current_leader_epoch (v9+), fetch_offset (int64), last_fetched_epoch (v12+),
log_start_offset (int64, v5+), partition_max_bytes } }, forgotten_topics_data[] (v7+)
{ topic | topic_id, partitions[] int32 }, rack_id (string, v11+).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import lru_cache
from operator import itemgetter
from typing import NamedTuple

from protocol.headers import parse_request_header
from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_string,
    need,
    pack_int32,
    read_array_len,
    read_uvarint,
    skip_string,
    skip_tagged_fields,
)

FETCH_API_KEY = 1
FIRST_RACK_VERSION = 11
FIRST_FLEXIBLE_VERSION = 12
FIRST_TOPIC_ID_VERSION = 13
FIRST_NO_REPLICA_ID_VERSION = 15
MAX_FETCH_VERSION = 15  # the proxy's ApiVersions cap (protocol.api_versions)

_I16 = struct.Struct(">h").unpack_from
_PACK_I32 = struct.Struct(">i").pack


def partition_size(version: int) -> int:
    """Bytes of one partition entry's fixed fields (tagged fields not included)."""
    size = 4 + 8 + 4  # partition, fetch_offset, partition_max_bytes
    if version >= 9:
        size += 4  # current_leader_epoch
    if version >= 12:
        size += 4  # last_fetched_epoch
    if version >= 5:
        size += 8  # log_start_offset
    return size


_PARTITION_SIZES = {v: partition_size(v) for v in range(FIRST_RACK_VERSION, MAX_FETCH_VERSION + 1)}


def rack_span(frame: Buffer, version: int, body: int) -> tuple[int, int, int]:
    """(start, payload start, end) of the ``rack_id`` field of a v11+ request whose body
    starts at ``body``; checks that nothing but tagged fields (v12+) follows it."""
    if not FIRST_RACK_VERSION <= version <= MAX_FETCH_VERSION:
        raise ProtocolError(f"Fetch v{version} has no rack_id the proxy reads")
    pos = body + (12 if version >= FIRST_NO_REPLICA_ID_VERSION else 16)  # .. max_bytes
    pos += 1 + 8  # isolation_level, session_id, session_epoch
    need(frame, pos, 0)
    try:
        if version >= FIRST_FLEXIBLE_VERSION:
            start = _skip_flexible(frame, pos, _PARTITION_SIZES[version],
                                   version >= FIRST_TOPIC_ID_VERSION)
        else:
            start = _skip_classic(frame, pos, _PARTITION_SIZES[version])
    except IndexError:
        raise ProtocolError("truncated Fetch request") from None
    if version >= FIRST_FLEXIBLE_VERSION:
        n, pos = read_uvarint(frame, start)
        n -= 1
    else:
        need(frame, start, 2)
        n = _I16(frame, start)[0]
        pos = start + 2
    payload = pos
    if n > 0:
        pos += n
    need(frame, pos, 0)
    end = pos
    if version >= FIRST_FLEXIBLE_VERSION:
        pos = skip_tagged_fields(frame, pos)
    if pos != len(frame):
        raise ProtocolError(f"{len(frame) - pos} bytes after the Fetch request at offset {pos}")
    if n < 0:
        raise ProtocolError(f"null rack_id in a Fetch v{version} request")
    return start, payload, end


def _count(frame: Buffer, pos: int) -> tuple[int, int]:
    """A compact array length that must not be null (-1)."""
    n, pos = read_uvarint(frame, pos)
    if n == 0:
        raise ProtocolError(f"null array at offset {pos}")
    return n - 1, pos


def _skip_flexible(frame: Buffer, pos: int, fixed: int, by_id: bool) -> int:
    """Past topics and forgotten_topics_data of a v12+ request (the hot path: a byte
    below 0x80 is a whole length, and most structs carry no tagged fields)."""
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
                pos += b if b else 1  # compact string: length + 1, then the bytes
            else:
                n, pos = read_uvarint(frame, pos)
                pos += n - 1
        b = frame[pos]
        if 0 < b < 0x80:
            partitions, pos = b - 1, pos + 1
        else:
            partitions, pos = _count(frame, pos)
        for _ in range(partitions):
            pos += fixed
            if frame[pos] == 0:
                pos += 1
            else:
                pos = skip_tagged_fields(frame, pos)
        if frame[pos] == 0:
            pos += 1
        else:
            pos = skip_tagged_fields(frame, pos)
    forgotten, pos = _count(frame, pos)
    for _ in range(forgotten):
        pos = pos + 16 if by_id else skip_string(frame, pos, True)
        partitions, pos = _count(frame, pos)
        pos = skip_tagged_fields(frame, pos + 4 * partitions)
    return pos


def _skip_classic(frame: Buffer, pos: int, fixed: int) -> int:
    """Past topics and forgotten_topics_data of a v11 request."""
    topics, pos = read_array_len(frame, pos, False, nullable=False)
    for _ in range(topics):
        pos = skip_string(frame, pos, False)
        partitions, pos = read_array_len(frame, pos, False, nullable=False)
        pos += partitions * fixed
    forgotten, pos = read_array_len(frame, pos, False, nullable=False)
    for _ in range(forgotten):
        pos = skip_string(frame, pos, False)
        partitions, pos = read_array_len(frame, pos, False, nullable=False)
        pos += 4 * partitions
    return pos


def read_fetch_rack(frame: Buffer) -> str:
    """The ``rack_id`` of a Fetch v11+ request frame ("" when the client set none)."""
    header = parse_request_header(frame)
    _, payload, end = rack_span(frame, header.api_version,
                                request_body_offset(frame, header.api_version))
    try:
        return str(frame[payload:end], "utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("invalid UTF-8 rack_id in a Fetch request") from exc


def request_body_offset(frame: Buffer, version: int) -> int:
    """Where a Fetch request's body starts (after the client id and, from v12, the
    header's tagged fields): the one header field the fill needs, read in place."""
    need(frame, 12, 2)
    n = _I16(frame, 12)[0]
    pos = 14 + n if n > 0 else 14
    need(frame, pos, 0)
    if version >= FIRST_FLEXIBLE_VERSION:
        if pos < len(frame) and frame[pos] == 0:
            return pos + 1
        return skip_tagged_fields(frame, pos)
    return pos


class _Shape(NamedTuple):
    """A request of the usual shape, as :func:`_usual_rack_shape` found it."""

    read: Callable[[Buffer], object]  # the bytes the walk read, from any frame
    seen: object  # what ``read`` gave for the request walked
    start: int  # where rack_id starts
    prefix: bytes | None  # the filled request's size prefix; None: the client named a rack
    before: _Shape | None  # the one remembered before it under the same key, if any


# Shapes remembered per FetchRackFill (forgotten all at once when full), and the most
# bytes one may check (about 1.2 µs; a walk of a request with more costs about as much).
_MAX_SHAPES = 256
_MAX_SHAPE_READS = 100


class FetchRackFill:
    """:func:`fill_fetch_rack` for one rack, its encodings made once: the proxy calls its
    ``fill`` per Fetch request (no per-request objects but the filled frame).

    A consumer sends one shape of request over and over: the same topics and partitions,
    only offsets and epochs (fixed-size fields) changing. The one-pass reader's answer
    depends only on the frame's length and the bytes it reads (lengths, counts, tag
    bytes), so ``fill`` remembers, per length and version, which bytes those were and
    their values; a request with the same length and the same values there has its
    rack_id where the remembered one had it, and is filled without a walk (one C call
    reads the bytes). Anything else is walked, as every request was before. Two shapes
    are kept per key, so a consumer alternating between two of one length (partitions of
    two topics taking turns) is not walked either. Measured (docs/locality.md, "Cost"):
    the fill of a known shape 0.42-0.50 us against 0.75-0.86 us walked; in the running
    proxy, with the relay's byte count, client_rack adds 0.7-1.1 us per Fetch, 1.2-1.4 us
    before.
    """

    __slots__ = ("rack", "_flexible_tail", "_classic_field", "_shapes")

    def __init__(self, rack: str) -> None:
        self.rack = rack
        self._flexible_tail = encode_string(rack, True) + b"\x00"  # + empty tagged fields
        self._classic_field = encode_string(rack, False)
        self._shapes: dict[int, _Shape] = {}

    def fill(self, frame: Buffer, version: int) -> bytes | None:
        """The request with the rack as its rack_id when the client sent an empty one;
        None when the client named a rack of its own (forward its bytes unchanged)."""
        if FIRST_FLEXIBLE_VERSION <= version <= MAX_FETCH_VERSION:
            key = len(frame) << 4 | version
            shape = self._shapes.get(key)
            while shape is not None and shape.read(frame) != shape.seen:
                shape = shape.before
            if shape is not None:
                start, prefix = shape.start, shape.prefix
            else:
                start, prefix = self._walk(frame, version, key)
            if start >= 0:  # the shape consumers send: the rack and a tag byte last
                if prefix is None:
                    return None  # a rack of the client's own
                return b"".join((prefix, frame[4:start], self._flexible_tail))
        start, payload, end = rack_span(frame, version, request_body_offset(frame, version))
        if end != payload:
            return None
        field = (self._flexible_tail[:-1] if version >= FIRST_FLEXIBLE_VERSION
                 else self._classic_field)
        size = len(frame) - 4 - (end - start) + len(field)
        return b"".join((pack_int32(size), frame[4:start], field, frame[end:]))

    def _walk(self, frame: Buffer, version: int, key: int) -> tuple[int, bytes | None]:
        """Where rack_id starts in a request of the usual shape (-1 for any other) and the
        filled request's size prefix (None: the client named a rack); the shape is
        remembered under ``key``."""
        found = _usual_rack_shape(frame, version)
        if found is None:
            return -1, None
        start, offsets = found
        prefix = (_PACK_I32(start - 4 + len(self._flexible_tail)) if frame[start] == 1
                  else None)
        if len(offsets) <= _MAX_SHAPE_READS:
            if len(self._shapes) >= _MAX_SHAPES:
                self._shapes.clear()
            read = itemgetter(*offsets)
            latest = self._shapes.get(key)  # kept as the one before, without its own
            before = (None if latest is None else
                      _Shape(latest.read, latest.seen, latest.start, latest.prefix, None))
            self._shapes[key] = _Shape(read, read(frame), start, prefix, before)
        return start, prefix


@lru_cache(maxsize=16)
def _filler(rack: str) -> FetchRackFill:
    return FetchRackFill(rack)


def fill_fetch_rack(frame: Buffer, version: int, rack: str) -> bytes | None:
    """The request with ``rack`` as its rack_id when the client sent an empty one;
    None when the client named a rack of its own (forward its bytes unchanged)."""
    return _filler(rack).fill(frame, version)


def _usual_rack_shape(frame: Buffer, version: int) -> tuple[int, list[int]] | None:
    """Where ``rack_id`` starts in a v12-v15 request of the shape consumers send (every
    length one byte, no tagged fields, no forgotten topics, the rack_id then one empty
    tagged-fields byte ending the frame), found in one pass, and the offsets of every
    byte the pass read (its answer depends on those and on the frame's length alone);
    None for anything else, which the general walk then reads (or rejects)."""
    offsets = [12, 13]
    note = offsets.append
    try:
        n = _I16(frame, 12)[0]
        pos = 14 + n if n > 0 else 14
        note(pos)
        if frame[pos]:
            return None  # header tagged fields
        pos += 22 if version >= FIRST_NO_REPLICA_ID_VERSION else 26
        fixed = _PARTITION_SIZES[version]
        by_id = version >= FIRST_TOPIC_ID_VERSION
        note(pos)
        b = frame[pos]
        if not 0 < b < 0x80:
            return None
        pos += 1
        for _ in range(b - 1):
            if by_id:
                pos += 16
            else:
                note(pos)
                b = frame[pos]
                if not 0 < b < 0x80:
                    return None
                pos += b
            note(pos)
            b = frame[pos]
            if not 0 < b < 0x80:
                return None
            # the partitions: fixed fields and an empty tagged-fields byte each
            pos += 1
            if b <= 5:
                for _ in range(b - 1):
                    pos += fixed
                    note(pos)
                    if frame[pos]:
                        return None
                    pos += 1
            else:  # many: their tag bytes checked at once (a strided view, no loop)
                first_tag = pos + fixed
                pos += (b - 1) * (fixed + 1)
                if any(frame[first_tag:pos:fixed + 1]):
                    return None
                offsets.extend(range(first_tag, pos, fixed + 1))
            note(pos)
            if frame[pos]:  # the topic's tagged fields (and a truncated frame: IndexError)
                return None
            pos += 1
        note(pos)
        if frame[pos] != 1:
            return None  # forgotten topics (or a malformed count)
        start = pos + 1
        note(start)
        b = frame[start]
        if not 0 < b < 0x80 or start + b + 1 != len(frame):
            return None  # bytes that do not belong
        note(start + b)
        if frame[start + b]:
            return None  # top-level tagged fields
        return start, offsets
    except (IndexError, struct.error):
        return None
