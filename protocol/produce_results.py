"""The broker's per-partition outcome of a Produce (v3-v13), read without building a response.

:func:`produce_results` returns ``{(topic key, partition index): (error_code,
base_offset)}`` for every partition of a Produce response frame. It walks the
same layout as :func:`protocol.produce_response.parse_produce_response` but
builds no objects beyond that mapping: record errors, error messages and tagged
fields (node endpoints included) are skipped over, not decoded. It is the
decision ledger's reader, called once per forwarded request, off the event loop.

Invariant: on a well-formed response the mapping equals what the full parser
reports; malformed input raises :class:`~protocol.primitives.ProtocolError` and
nothing else.
"""

from __future__ import annotations

import struct

from protocol.headers import response_body_offset
from protocol.primitives import Buffer, ProtocolError, skip_string
from protocol.produce_request import (
    FIRST_FLEXIBLE_VERSION,
    MAX_PRODUCE_VERSION,
    MIN_PRODUCE_VERSION,
    PRODUCE_API_KEY,
    TopicKey,
)
from protocol.produce_response import (
    FIRST_LOG_START_OFFSET_VERSION,
    FIRST_RECORD_ERRORS_VERSION,
    check_size_prefix,
    read_checked_array_len,
    read_topic_key,
    skip_tag_fields,
)

_PART_HEAD = struct.Struct(">ihq")  # index, error_code, base_offset
# after base_offset: log_append_time_ms, and log_start_offset from v5
_AFTER_OFFSET = 8


def produce_results(frame: Buffer, version: int) -> dict[tuple[TopicKey, int], tuple[int, int]]:
    """(error_code, base_offset) per (topic key, partition) of a complete response frame."""
    if not MIN_PRODUCE_VERSION <= version <= MAX_PRODUCE_VERSION:
        raise ProtocolError(f"unsupported Produce version {version}")
    try:
        return _scan(frame, version)
    except (IndexError, struct.error) as exc:
        raise ProtocolError(f"truncated Produce v{version} response") from exc


def _scan(frame: Buffer, version: int) -> dict[tuple[TopicKey, int], tuple[int, int]]:
    end = check_size_prefix(frame)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    if flexible and end > 8 and frame[8] == 0:  # no tagged fields in the header: the usual case
        pos = 9
    else:
        pos = response_body_offset(frame, PRODUCE_API_KEY, version)
    record_errors = version >= FIRST_RECORD_ERRORS_VERSION
    part_size = 14 + _AFTER_OFFSET + (8 if version >= FIRST_LOG_START_OFFSET_VERSION else 0)
    head = _PART_HEAD.unpack_from
    out: dict[tuple[TopicKey, int], tuple[int, int]] = {}
    n_topics, pos = read_checked_array_len(frame, pos, flexible, end)
    for _ in range(n_topics):
        key, pos = read_topic_key(frame, pos, version, flexible)
        if flexible and 0 < frame[pos] < 0x80:  # a one-byte compact length, the usual case
            n_parts = frame[pos] - 1
            pos += 1
        else:
            n_parts, pos = read_checked_array_len(frame, pos, flexible, end)
        for _ in range(n_parts):
            if pos + part_size > end:
                raise ProtocolError("truncated partition response")
            index, error_code, base_offset = head(frame, pos)
            pos += part_size
            if record_errors:
                # the usual tail: no record errors, a null message, no tagged fields
                if flexible and frame[pos] == 1 and frame[pos + 1] == 0 and frame[pos + 2] == 0:
                    pos += 3
                else:
                    pos = _skip_record_errors(frame, pos, flexible, end)
                    pos = skip_string(frame, pos, flexible)  # error_message
                    if flexible:
                        pos = skip_tag_fields(frame, pos, end)
            elif flexible:
                pos = skip_tag_fields(frame, pos, end)
            out[(key, index)] = (error_code, base_offset)
        if flexible:
            pos = skip_tag_fields(frame, pos, end)
    pos += 4  # throttle_time_ms
    if flexible:
        pos = skip_tag_fields(frame, pos, end)  # node endpoints are not read
    if pos != end:
        raise ProtocolError(f"{end - pos} unexpected bytes after the Produce response body")
    return out


def _skip_record_errors(frame: Buffer, pos: int, flexible: bool, end: int) -> int:
    if flexible and frame[pos] == 1:  # the common case: an empty compact array
        return pos + 1
    count, pos = read_checked_array_len(frame, pos, flexible, end)
    for _ in range(count):
        pos = skip_string(frame, pos + 4, flexible)  # batch_index, message
        if flexible:
            pos = skip_tag_fields(frame, pos, end)
    return pos
