"""DescribeConfigs (v0-4) for topics' min.insync.replicas: the request, and a reader of
just that config from the response.

The proxy's poller asks every topic's min.insync.replicas; with 20,000 topics
kafka-python's generic codec takes ~0.3 s (seconds with all configs), so the
request is encoded here directly and the response read without decoding any
other config. Both take an optional ``pause`` callback, called every few
hundred topics, so a caller on a worker thread can let others run.

Invariants: the request is byte for byte what kafka-python encodes (without
synonyms or documentation); the reader returns exactly the topics without an
error that carry the config, and raises :class:`~protocol.primitives.ProtocolError`
and nothing else for a malformed frame, trailing bytes included. No I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection, Iterable

from protocol.apis import ApiKey
from protocol.headers import response_body_offset
from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_array_len,
    encode_string,
    read_uvarint,
)

Pause = Callable[[], object] | None

CLIENT_ID = "rackguard-poller"
TOPIC_RESOURCE = 2
DESCRIBE_CONFIGS_MAX = 4
MIN_INSYNC_REPLICAS = "min.insync.replicas"
_TOPIC_CHUNK = 256  # topics encoded between two calls of ``pause``
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def encode_describe_configs(topics: Iterable[str], version: int, correlation_id: int,
                            keys: Collection[str] | None, pause: Pause = None) -> bytes:
    """A DescribeConfigs request frame (v0-4) for these topics' ``keys`` (None: all).

    Byte for byte what kafka-python encodes, without synonyms or documentation.
    ``pause``, if given, is called every 256 topics.
    """
    if not 0 <= version <= DESCRIBE_CONFIGS_MAX:
        raise ValueError(f"unsupported DescribeConfigs version {version}")
    flexible = version >= 4
    tags = b"\x00" if flexible else b""
    head = (_I16.pack(ApiKey.DESCRIBE_CONFIGS) + _I16.pack(version) + _I32.pack(correlation_id)
            + encode_string(CLIENT_ID, False) + tags)
    if keys is None:
        wanted = encode_array_len(None, flexible)
    else:
        wanted = encode_array_len(len(keys), flexible) + b"".join(
            encode_string(k, flexible) for k in keys)
    tail = wanted + tags
    parts = [head, b""]
    topic = bytes((TOPIC_RESOURCE,))
    for i, name in enumerate(topics):
        raw = name.encode()
        size = encode_array_len(len(raw), flexible) if flexible else _I16.pack(len(raw))
        parts.append(topic + size + raw + tail)
        if pause is not None and i % _TOPIC_CHUNK == _TOPIC_CHUNK - 1:
            pause()
    parts[1] = encode_array_len(len(parts) - 2, flexible)
    if version >= 1:
        parts.append(b"\x00")  # include_synonyms
    if version >= 3:
        parts.append(b"\x00")  # include_documentation
    parts.append(tags)
    body = b"".join(parts)
    return _I32.pack(len(body)) + body


def read_min_insync_replicas(frame: Buffer, version: int, pause: Pause = None
                             ) -> dict[str, int | str]:
    """Each described topic's min.insync.replicas from a DescribeConfigs response (v0-4).

    Topics with an error or without the config are left out; a value that is not a
    number is returned as the string it is (the caller reports it). Every other
    config is skipped without being decoded. Raises :class:`ProtocolError` for a
    malformed frame (trailing bytes included). ``pause``, if given, is called after every result.
    """
    if not 0 <= version <= DESCRIBE_CONFIGS_MAX:
        raise ProtocolError(f"unsupported DescribeConfigs version {version}")
    buf = frame
    if len(buf) < 8 or _I32.unpack_from(buf, 0)[0] != len(buf) - 4:
        raise ProtocolError(f"DescribeConfigs response frame of {len(buf)} bytes is malformed")
    try:
        return _read_min_insync_replicas(buf, version, pause)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed DescribeConfigs response: {exc}") from exc


_KEY = MIN_INSYNC_REPLICAS.encode()


def _read_min_insync_replicas(buf: Buffer, version: int, pause: Pause
                              ) -> dict[str, int | str]:
    flexible = version >= 4
    end = len(buf)
    i16 = _I16.unpack_from
    i32 = _I32.unpack_from

    def length(pos: int) -> tuple[int, int]:
        """A string's or an array's length (-1: null) and the position after it."""
        if not flexible:
            return i32(buf, pos)[0], pos + 4  # arrays only: strings take two bytes
        b = buf[pos]
        if b < 0x80:
            return b - 1, pos + 1
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos

    def string(pos: int) -> tuple[int, int]:
        """(length, start) of a string's bytes; length -1 for null."""
        if flexible:
            return length(pos)
        return i16(buf, pos)[0], pos + 2

    def skip_tags(pos: int) -> int:
        if buf[pos] == 0:
            return pos + 1
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            _, pos = read_uvarint(buf, pos)  # tag
            size, pos = read_uvarint(buf, pos)
            pos += size
        return pos

    # Every bounds check is left to the buffer, except where a length could point past
    # its end without the next read noticing: the loop counts and the final position.
    pos = response_body_offset(buf, ApiKey.DESCRIBE_CONFIGS, version) + 4  # throttle
    results, pos = length(pos)
    if not 0 <= results <= end - pos:
        raise ProtocolError(f"bad results array length {results}")
    values: dict[str, int | str] = {}
    key_size = len(_KEY)
    for _ in range(results):
        error = i16(buf, pos)[0]
        n, pos = string(pos + 2)  # error message
        if n > 0:
            pos += n
        n, start = string(pos + 1)  # after the resource type: the name
        if n < 0:
            raise ProtocolError(f"null resource name at offset {pos}")
        pos = start + n
        name = str(buf[start:pos], "utf-8")
        configs, pos = length(pos)
        if not 0 <= configs <= end - pos:
            raise ProtocolError(f"bad configs array length {configs} at offset {pos}")
        for _ in range(configs):
            n, start = string(pos)
            pos = start + n if n > 0 else start
            is_key = n == key_size and buf[start:pos] == _KEY
            n, start = string(pos)  # the value
            pos = start + n if n > 0 else start
            if is_key and error == 0 and n >= 0:
                _set_value(values, name, str(buf[start:pos], "utf-8"))
            pos += 3  # read_only, is_default (v0) or config_source, is_sensitive
            if version >= 1:
                synonyms, pos = length(pos)
                for _ in range(synonyms):
                    n, start = string(pos)
                    n, start = string(start + n if n > 0 else start)
                    pos = (start + n if n > 0 else start) + 1  # and the source
                    if flexible:
                        pos = skip_tags(pos)
            if version >= 3:
                n, start = string(pos + 1)  # after config_type: documentation
                pos = start + n if n > 0 else start
            if flexible:
                pos = skip_tags(pos)
        if flexible:
            pos = skip_tags(pos)
        if pos > end:
            raise ProtocolError("truncated DescribeConfigs result")
        if pause is not None:
            pause()
    if flexible:
        pos = skip_tags(pos)
    if pos != end:
        raise ProtocolError(f"{end - pos} bytes left after the DescribeConfigs response")
    return values


def _set_value(values: dict[str, int | str], topic: str, value: str) -> None:
    try:
        values[topic] = int(value)
    except ValueError:
        values[topic] = value  # the caller says what is wrong with it
