"""The one-partition Produce, read where its fields sit (flexible versions, v9-v13).

Most Produce requests name one topic and one partition (librdkafka sends one partition per
request); their layout is fixed but for a few lengths. :func:`single_partition_request`
returns what the loss watch needs of such a request (the raw client id, the topic key, the
partition index, the record count) without walking it into objects; it checks that the
request ends exactly where that layout ends, and returns None for any other request (the
caller walks it then). :func:`single_partition_result` reads the answer's base offset the
same way, falling back to :func:`~protocol.produce_results.produce_results`.

Invariant: on a well-formed frame the values equal what the full walkers give; a frame
they would reject gives None or raises :class:`~protocol.primitives.ProtocolError`.
"""

from __future__ import annotations

import struct

from protocol.primitives import Buffer, ProtocolError, read_uvarint
from protocol.produce_request import FIRST_FLEXIBLE_VERSION, PRODUCE_API_KEY, TopicKey
from protocol.produce_results import produce_results

_HEAD = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_BATCH_COUNT = struct.Struct(">i")
_BATCH_LENGTH_AT = 8
_BATCH_COUNT_AT = 57
_BATCH_HEADER = 61
_RESULT = struct.Struct(">ihq")  # index, error code, base offset


def single_partition_request(frame: Buffer) -> tuple[bytes, TopicKey, int, int] | None:
    """(raw client id, topic key, partition index, records) of a flexible one-partition
    Produce request frame; None for any other request."""
    try:
        return _request(frame)
    except (IndexError, struct.error) as exc:
        raise ProtocolError("truncated Produce request") from exc


def _request(frame: Buffer) -> tuple[bytes, TopicKey, int, int] | None:
    api_key, version, _, client_len = _HEAD.unpack_from(frame, 4)
    if api_key != PRODUCE_API_KEY or not FIRST_FLEXIBLE_VERSION <= version <= 13:
        return None
    pos = 14 + max(client_len, 0)
    client = bytes(frame[14:pos])
    if frame[pos] != 0:  # header tagged fields
        return None
    pos += 1
    n = frame[pos]  # transactional id: a compact nullable string
    if n >= 0x80:
        return None
    pos += 1 + max(n - 1, 0) + 6  # the string, acks, timeout
    if frame[pos] != 2:  # one topic
        return None
    pos += 1
    key: TopicKey
    if version >= 13:
        key = bytes(frame[pos:pos + 16])
        pos += 16
    else:
        n = frame[pos]
        if n >= 0x80 or n == 0:
            return None
        key = bytes(frame[pos + 1:pos + n]).decode()
        pos += n
    if frame[pos] != 2:  # one partition
        return None
    index = _BATCH_COUNT.unpack_from(frame, pos + 1)[0]
    size, pos = read_uvarint(frame, pos + 5)  # records: compact nullable bytes
    if size == 0:
        return None
    end = pos + size - 1
    if end + 3 != len(frame) or frame[end] or frame[end + 1] or frame[end + 2]:
        return None  # tagged fields somewhere, or more than this layout: walk it
    count = 0
    while pos < end:
        if pos + _BATCH_HEADER > end:
            raise ProtocolError("truncated record batch header")
        count += _BATCH_COUNT.unpack_from(frame, pos + _BATCH_COUNT_AT)[0]
        pos += 12 + _BATCH_COUNT.unpack_from(frame, pos + _BATCH_LENGTH_AT)[0]
    if pos != end:
        raise ProtocolError("record batch runs past its record set")
    return client, key, index, count


def single_partition_result(frame: Buffer, version: int, index: int) -> int | None:
    """The base offset of a flexible (v9+) Produce answer to a one-partition request when
    it acknowledged partition ``index``; None when it did not. The answer to one partition
    has one topic and one partition, so their fields sit right after the header and the
    topic key; any other layout is read by :func:`produce_results`."""
    if frame[8] != 0 or frame[9] != 2:  # header tags; a compact array of one topic
        return _general(frame, version, index)
    if version >= 13:
        pos = 10 + 16
    else:
        size = frame[10]
        if size >= 0x80:
            return _general(frame, version, index)
        pos = 10 + size  # the length byte (n + 1) and n bytes of name
    if frame[pos] != 2:  # one partition
        return _general(frame, version, index)
    got, error, base = _RESULT.unpack_from(frame, pos + 1)
    if got != index:
        return _general(frame, version, index)
    return base if error == 0 and base >= 0 else None


def _general(frame: Buffer, version: int, index: int) -> int | None:
    for (_, got), (error, base) in produce_results(frame, version).items():
        if got == index:
            return base if error == 0 and base >= 0 else None
    return None
