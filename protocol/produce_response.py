"""Produce response (v3-v13): build, parse, and merge with synthetic errors.

Invariant: responses are plain frozen dataclasses; :func:`build_produce_response`
writes exactly the fields the version has (Kafka's ProduceResponse.json) and
:func:`parse_produce_response` reads them back, keeping unknown tagged fields so a
rebuilt response loses nothing a newer broker added. :func:`merge_produce_responses`
answers partitions in the original request's order.
Malformed input raises :class:`~protocol.primitives.ProtocolError` and nothing else.
NodeEndpoints rewriting lives in :mod:`protocol.produce_endpoints`; the
``read_*``/``check_*`` helpers here are shared with it.

Layout: responses[] { name (v3-12) | topic_id (v13+), partitions[] { index int32,
error_code int16, base_offset int64, log_append_time_ms int64, log_start_offset
int64 (v5+), record_errors[] {batch_index int32, message nullable string} (v8+),
error_message nullable string (v8+), tag 0 current_leader {leader_id, leader_epoch}
(v10+) } }, throttle_time_ms int32, tag 0 node_endpoints[] {node_id, host, port,
rack} (v10+). Flexible (compact, tagged, response header v1) from v9.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from protocol.headers import response_body_offset, response_frame
from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_array_len,
    encode_string,
    encode_uvarint,
    pack_int32,
    pack_int64,
    read_string,
    read_uvarint,
)
from protocol.produce_request import (
    FIRST_FLEXIBLE_VERSION,
    FIRST_TOPIC_ID_VERSION,
    MAX_PRODUCE_VERSION,
    MIN_PRODUCE_VERSION,
    PRODUCE_API_KEY,
    ProduceRequest,
    TopicKey,
)

FIRST_LOG_START_OFFSET_VERSION = 5
FIRST_RECORD_ERRORS_VERSION = 8
FIRST_LEADER_HINT_VERSION = 10  # CurrentLeader / NodeEndpoints tagged fields
NETWORK_EXCEPTION = 13

Tags = tuple[tuple[int, bytes], ...]

_PART_HEAD = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q").unpack_from
_LEADER = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class LeaderIdAndEpoch:
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class RecordError:
    batch_index: int
    message: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionResult:
    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: tuple[RecordError, ...] = ()
    error_message: str | None = None  # v8+
    current_leader: LeaderIdAndEpoch | None = None  # v10+, tagged (omitted when None)
    unknown_tags: Tags = ()  # tagged fields this codec does not know (v9+), kept raw


@dataclass(frozen=True, slots=True)
class TopicResult:
    key: TopicKey  # name (v3-v12) or 16-byte topic id (v13+)
    partitions: tuple[PartitionResult, ...]
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    topics: tuple[TopicResult, ...]
    throttle_time_ms: int = 0
    node_endpoints: tuple[NodeEndpoint, ...] = ()  # v10+, tagged (omitted when empty)
    unknown_tags: Tags = ()


def _check_version(version: int) -> None:
    if not MIN_PRODUCE_VERSION <= version <= MAX_PRODUCE_VERSION:
        raise ValueError(f"unsupported Produce version {version}")


# --- building --------------------------------------------------------------------------


def _encode_tags(tags: Iterable[tuple[int, bytes]]) -> bytes:
    items = sorted(tags, key=lambda t: t[0])
    if not items:
        return b"\x00"
    for a, b in zip(items, items[1:], strict=False):
        if a[0] == b[0]:
            raise ValueError(f"duplicate tagged field {a[0]}")
    out = [encode_uvarint(len(items))]
    for tag, payload in items:
        out += (encode_uvarint(tag), encode_uvarint(len(payload)), payload)
    return b"".join(out)


def _encode_key(key: TopicKey, version: int, flexible: bool) -> bytes:
    if version >= FIRST_TOPIC_ID_VERSION:
        if not isinstance(key, bytes) or len(key) != 16:
            raise ValueError(f"Produce v{version} names topics by 16-byte id, got {key!r}")
        return key
    if not isinstance(key, str):
        raise ValueError(f"Produce v{version} names topics by name, got {key!r}")
    return encode_string(key, flexible)


def _encode_errors(p: PartitionResult, flexible: bool, out: list[bytes]) -> None:
    out.append(encode_array_len(len(p.record_errors), flexible))
    for e in p.record_errors:
        out.append(pack_int32(e.batch_index))
        out.append(encode_string(e.message, flexible))
        if flexible:
            out.append(b"\x00")
    out.append(encode_string(p.error_message, flexible))


def _encode_partition(p: PartitionResult, version: int, flexible: bool, out: list[bytes]) -> None:
    out.append(_PART_HEAD.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms))
    if version >= FIRST_LOG_START_OFFSET_VERSION:
        out.append(pack_int64(p.log_start_offset))
    if version >= FIRST_RECORD_ERRORS_VERSION:
        if not p.record_errors and p.error_message is None:
            # no record errors, null error message: the common case
            out.append(b"\x01\x00" if flexible else b"\x00\x00\x00\x00\xff\xff")
        else:
            _encode_errors(p, flexible, out)
    if flexible:
        leader = p.current_leader if version >= FIRST_LEADER_HINT_VERSION else None
        if leader is None and not p.unknown_tags:
            out.append(b"\x00")
            return
        tags = list(p.unknown_tags)
        if leader is not None:
            tags.append((0, _LEADER.pack(leader.leader_id, leader.leader_epoch) + b"\x00"))
        out.append(_encode_tags(tags))


def _encode_endpoints(endpoints: Sequence[NodeEndpoint]) -> bytes:
    out = [encode_array_len(len(endpoints), True)]
    for e in endpoints:
        out += (
            pack_int32(e.node_id),
            encode_string(e.host, True),
            pack_int32(e.port),
            encode_string(e.rack, True),
            b"\x00",
        )
    return b"".join(out)


def encode_produce_response_body(
    version: int,
    topics: Sequence[TopicResult],
    throttle_time_ms: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
    unknown_tags: Tags = (),
) -> bytes:
    """The response body (no size prefix, no header) for ``version``."""
    _check_version(version)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = [encode_array_len(len(topics), flexible)]
    for t in topics:
        out.append(_encode_key(t.key, version, flexible))
        out.append(encode_array_len(len(t.partitions), flexible))
        for p in t.partitions:
            _encode_partition(p, version, flexible, out)
        if flexible:
            out.append(_encode_tags(t.unknown_tags) if t.unknown_tags else b"\x00")
    out.append(pack_int32(throttle_time_ms))
    if flexible:
        tags = list(unknown_tags)
        if version >= FIRST_LEADER_HINT_VERSION and node_endpoints:
            tags.append((0, _encode_endpoints(node_endpoints)))
        out.append(_encode_tags(tags))
    return b"".join(out)


def build_produce_response(
    version: int,
    correlation_id: int,
    topics: Sequence[TopicResult],
    throttle_time_ms: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
    unknown_tags: Tags = (),
) -> bytes:
    """A complete response frame (size prefix, response header v0/v1, body).

    Fields a version lacks are left out (error_message before v8, current_leader and
    node_endpoints before v10). Topic keys must be ``str`` before v13, 16 ``bytes`` from v13.
    """
    body = encode_produce_response_body(
        version, topics, throttle_time_ms, node_endpoints, unknown_tags
    )
    return response_frame(correlation_id, PRODUCE_API_KEY, version, body)


# --- parsing ---------------------------------------------------------------------------


def read_tag_spans(buf: Buffer, pos: int, end: int) -> tuple[list[tuple[int, int, int]], int]:
    count, pos = read_uvarint(buf, pos)
    fields = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if pos + size > end:
            raise ProtocolError("tagged field runs past the end of the frame")
        fields.append((tag, pos, pos + size))
        pos += size
    return fields, pos


def read_checked_array_len(
    buf: Buffer, pos: int, flexible: bool, end: int
) -> tuple[int, int]:
    """A non-null array length that cannot exceed the bytes left before ``end``."""
    if flexible:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n = _I32(buf, pos)[0]
        pos += 4
    if n < 0 or n > end - pos:
        raise ProtocolError(f"bad array length {n} at offset {pos}")
    return n, pos


def read_topic_key(buf: Buffer, pos: int, version: int, flexible: bool) -> tuple[TopicKey, int]:
    if version >= FIRST_TOPIC_ID_VERSION:
        if pos + 16 > len(buf):
            raise ProtocolError("truncated topic id")
        return bytes(buf[pos : pos + 16]), pos + 16
    name, pos = read_string(buf, pos, flexible)
    if name is None:
        raise ProtocolError("null topic name")
    return name, pos


def _read_leader(buf: Buffer, start: int, stop: int) -> LeaderIdAndEpoch:
    if start + 8 > stop:
        raise ProtocolError("truncated CurrentLeader")
    leader_id, epoch = _LEADER.unpack_from(buf, start)
    _, pos = read_tag_spans(buf, start + 8, stop)
    if pos != stop:
        raise ProtocolError("CurrentLeader has trailing bytes")
    return LeaderIdAndEpoch(leader_id, epoch)


def read_endpoint_entries(
    buf: Buffer, start: int, stop: int
) -> tuple[list[tuple[NodeEndpoint, int, int]], int]:
    """Endpoints with, for each, the span of its bytes from the rack to its end."""
    n, pos = read_checked_array_len(buf, start, True, stop)
    out = []
    for _ in range(n):
        node_id = _I32(buf, pos)[0]
        host, pos = read_string(buf, pos + 4, True)
        if host is None:
            raise ProtocolError("null NodeEndpoint host")
        if pos + 4 > stop:
            raise ProtocolError("truncated NodeEndpoint")
        port = _I32(buf, pos)[0]
        rack_start = pos + 4
        rack, pos = read_string(buf, rack_start, True)
        _, pos = read_tag_spans(buf, pos, stop)
        if pos > stop:
            raise ProtocolError("NodeEndpoint runs past its tagged field")
        out.append((NodeEndpoint(node_id, host, port, rack), rack_start, pos))
    if pos != stop:
        raise ProtocolError("NodeEndpoints has trailing bytes")
    return out, pos


def parse_produce_response(frame: Buffer, version: int) -> ProduceResponse:
    """Parse a complete Produce response frame (size prefix included)."""
    if not MIN_PRODUCE_VERSION <= version <= MAX_PRODUCE_VERSION:
        raise ProtocolError(f"unsupported Produce version {version}")
    try:
        return _parse(frame, version)
    except (IndexError, struct.error) as exc:
        raise ProtocolError(f"truncated Produce v{version} response") from exc


def skip_tag_fields(buf: Buffer, pos: int, end: int) -> int:
    if buf[pos] == 0:
        return pos + 1
    return read_tag_spans(buf, pos, end)[1]


def check_size_prefix(frame: Buffer) -> int:
    end = len(frame)
    if end < 4 or _I32(frame, 0)[0] != end - 4:
        raise ProtocolError("frame size prefix does not match the frame length")
    return end


def _parse(frame: Buffer, version: int) -> ProduceResponse:
    end = check_size_prefix(frame)
    pos = response_body_offset(frame, PRODUCE_API_KEY, version)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    hints = version >= FIRST_LEADER_HINT_VERSION
    n_topics, pos = read_checked_array_len(frame, pos, flexible, end)
    topics = []
    for _ in range(n_topics):
        key, pos = read_topic_key(frame, pos, version, flexible)
        n_parts, pos = read_checked_array_len(frame, pos, flexible, end)
        parts = []
        for _ in range(n_parts):
            if pos + 22 > end:
                raise ProtocolError("truncated partition response")
            index, error_code, base_offset, append_time = _PART_HEAD.unpack_from(frame, pos)
            pos += 22
            log_start = -1
            if version >= FIRST_LOG_START_OFFSET_VERSION:
                log_start = _I64(frame, pos)[0]
                pos += 8
            record_errors: tuple[RecordError, ...] = ()
            error_message = None
            if version >= FIRST_RECORD_ERRORS_VERSION:
                n_err, pos = read_checked_array_len(frame, pos, flexible, end)
                errs = []
                for _ in range(n_err):
                    batch_index = _I32(frame, pos)[0]
                    message, pos = read_string(frame, pos + 4, flexible)
                    if flexible:
                        pos = skip_tag_fields(frame, pos, end)
                    errs.append(RecordError(batch_index, message))
                record_errors = tuple(errs)
                error_message, pos = read_string(frame, pos, flexible)
            leader = None
            unknown: list[tuple[int, bytes]] = []
            if flexible and frame[pos] == 0:
                pos += 1
            elif flexible:
                fields, pos = read_tag_spans(frame, pos, end)
                for tag, start, stop in fields:
                    if tag == 0 and hints:
                        leader = _read_leader(frame, start, stop)
                    else:
                        unknown.append((tag, bytes(frame[start:stop])))
            parts.append(
                PartitionResult(
                    index, error_code, base_offset, append_time, log_start,
                    record_errors, error_message, leader, tuple(unknown),
                )
            )
        t_unknown: Tags = ()
        if flexible and frame[pos] == 0:
            pos += 1
        elif flexible:
            fields, pos = read_tag_spans(frame, pos, end)
            t_unknown = tuple((tag, bytes(frame[a:b])) for tag, a, b in fields)
        topics.append(TopicResult(key, tuple(parts), t_unknown))
    throttle = _I32(frame, pos)[0]
    pos += 4
    endpoints: tuple[NodeEndpoint, ...] = ()
    top_unknown: list[tuple[int, bytes]] = []
    if flexible:
        fields, pos = read_tag_spans(frame, pos, end)
        for tag, start, stop in fields:
            if tag == 0 and hints:
                endpoints = tuple(e for e, _, _ in read_endpoint_entries(frame, start, stop)[0])
            else:
                top_unknown.append((tag, bytes(frame[start:stop])))
    if pos != end:
        raise ProtocolError(f"{end - pos} unexpected bytes after the Produce response body")
    return ProduceResponse(tuple(topics), throttle, endpoints, tuple(top_unknown))


# --- merging ---------------------------------------------------------------------------


def merge_produce_responses(
    version: int,
    correlation_id: int,
    request: ProduceRequest,
    upstream: ProduceResponse | None,
    synthetic: Mapping[tuple[TopicKey, int], PartitionResult],
    *,
    missing_error_code: int = NETWORK_EXCEPTION,
) -> bytes:
    """One response frame answering every partition of ``request`` in request order.

    A partition in ``synthetic`` gets that result (its index forced to the request's);
    any other gets the upstream result for (topic key, index). A forwarded partition
    the upstream did not answer (or no upstream at all) gets ``missing_error_code``
    (default NETWORK_EXCEPTION, retriable in every client). Throttle time, node
    endpoints and unknown top-level tags come from upstream; topic-level unknown tags
    from upstream are kept for topics upstream answered.
    """
    upstream_parts: dict[tuple[TopicKey, int], PartitionResult] = {}
    upstream_topic_tags: dict[TopicKey, Tags] = {}
    if upstream is not None:
        for ut in upstream.topics:
            if ut.unknown_tags:
                upstream_topic_tags.setdefault(ut.key, ut.unknown_tags)
            for up in ut.partitions:
                upstream_parts.setdefault((ut.key, up.index), up)
    topics = []
    for t in request.topics:
        key = t.key
        parts = []
        for p in t.partitions:
            k = (key, p.index)
            r = synthetic.get(k)
            if r is None:
                r = upstream_parts.get(k)
            if r is None:
                r = PartitionResult(p.index, missing_error_code)
            elif r.index != p.index:
                r = replace(r, index=p.index)
            parts.append(r)
        topics.append(TopicResult(key, tuple(parts), upstream_topic_tags.get(key, ())))
    if upstream is None:
        return build_produce_response(version, correlation_id, topics)
    return build_produce_response(
        version,
        correlation_id,
        topics,
        upstream.throttle_time_ms,
        upstream.node_endpoints,
        upstream.unknown_tags,
    )
