"""protocol.primitives: readers and writers of Kafka's wire types.

Invariant under test: every reader returns ``(value, new_pos)`` and accepts
bytes, bytearray and memoryview; a buffer that ends early (or a malformed
value) raises ProtocolError and nothing else; encoders agree byte for byte
with kafka-python's own type codecs.
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.old.types import (
    CompactString,
    String,
    TaggedFields,
    UnsignedVarInt32,
    VarInt32,
)

from protocol.primitives import (
    EMPTY_TAGGED_FIELDS,
    ProtocolError,
    encode_array_len,
    encode_string,
    encode_tagged_fields,
    encode_uvarint,
    pack_int8,
    pack_int16,
    pack_int32,
    pack_int64,
    read_array_len,
    read_bytes_span,
    read_int8,
    read_int16,
    read_int32,
    read_int64,
    read_string,
    read_tagged_fields,
    read_uuid,
    read_uvarint,
    read_varint,
    skip_string,
    skip_tagged_fields,
)

BUFFER_TYPES: list[Callable[[bytes], Any]] = [bytes, bytearray, memoryview]
FAST = settings(max_examples=150, deadline=None)


def _all_prefixes_fail(fn: Callable[[bytes, int], Any], data: bytes, start: int = 0) -> None:
    for cut in range(start, len(data)):
        with pytest.raises(ProtocolError):
            fn(data[:cut], start)


@pytest.mark.parametrize("wrap", BUFFER_TYPES)
@pytest.mark.parametrize(
    "reader, pack, width, values",
    [
        (read_int8, pack_int8, 1, [-128, -1, 0, 1, 127]),
        (read_int16, pack_int16, 2, [-32768, -1, 0, 1, 32767]),
        (read_int32, pack_int32, 4, [-(2**31), -1, 0, 1, 2**31 - 1]),
        (read_int64, pack_int64, 8, [-(2**63), -1, 0, 1, 2**63 - 1]),
    ],
    ids=["int8", "int16", "int32", "int64"],
)
def test_fixed_ints_round_trip_at_an_offset(
    wrap: Callable[[bytes], Any],
    reader: Callable[[Any, int], tuple[int, int]],
    pack: Callable[[int], bytes],
    width: int,
    values: list[int],
) -> None:
    for value in values:
        buf = wrap(b"\xaa\xbb" + pack(value) + b"\xcc")
        assert reader(buf, 2) == (value, 2 + width)
        with pytest.raises(ProtocolError):
            reader(wrap(b"\xaa\xbb" + pack(value)[:-1]), 2)
    with pytest.raises(ProtocolError):
        reader(wrap(b""), 0)


@FAST
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_uvarint_agrees_with_kafka_python(n: int) -> None:
    encoded = encode_uvarint(n)
    assert encoded == UnsignedVarInt32.encode(n)
    assert len(encoded) <= 5
    assert read_uvarint(b"\x00" + encoded + b"\xff", 1) == (n, 1 + len(encoded))
    _all_prefixes_fail(read_uvarint, encoded)


@FAST
@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_zigzag_varint_agrees_with_kafka_python(n: int) -> None:
    encoded = VarInt32.encode(n)
    assert read_varint(memoryview(encoded), 0) == (n, len(encoded))


@pytest.mark.parametrize(
    "n, encoded",
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
     (2**28, b"\x80\x80\x80\x80\x01")],
)
def test_uvarint_golden(n: int, encoded: bytes) -> None:
    assert encode_uvarint(n) == encoded
    assert read_uvarint(encoded, 0) == (n, len(encoded))


def test_varint_golden() -> None:
    assert read_varint(b"\x00", 0) == (0, 1)
    assert read_varint(b"\x01", 0) == (-1, 1)
    assert read_varint(b"\x02", 0) == (1, 1)
    assert read_varint(b"\x03", 0) == (-2, 1)


def test_uvarint_longer_than_five_bytes_is_an_error() -> None:
    with pytest.raises(ProtocolError):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)
    with pytest.raises(ProtocolError):
        read_uvarint(b"\xff" * 10, 0)


def test_encode_uvarint_rejects_negative() -> None:
    with pytest.raises(ValueError):
        encode_uvarint(-1)


@pytest.mark.parametrize("wrap", BUFFER_TYPES)
def test_uuid(wrap: Callable[[bytes], Any]) -> None:
    u = uuid.uuid4().bytes
    value, pos = read_uuid(wrap(b"\x01" + u + b"\x02"), 1)
    assert (value, pos) == (u, 17)
    assert type(value) is bytes
    with pytest.raises(ProtocolError):
        read_uuid(wrap(u[:15]), 0)


STRINGS = st.one_of(st.none(), st.text(max_size=40))


@FAST
@given(STRINGS, st.booleans())
def test_strings_agree_with_kafka_python(s: str | None, compact: bool) -> None:
    oracle = CompactString("utf-8") if compact else String("utf-8")
    encoded = encode_string(s, compact)
    assert encoded == oracle.encode(s)
    assert oracle.decode(io.BytesIO(encoded)) == s
    buf = b"\xee" + encoded + b"\xee"
    assert read_string(buf, 1, compact) == (s, 1 + len(encoded))
    assert skip_string(buf, 1, compact) == 1 + len(encoded)
    if s:
        _all_prefixes_fail(lambda b, p: read_string(b, p, compact), encoded)


def test_string_golden() -> None:
    assert encode_string("ab", compact=False) == b"\x00\x02ab"
    assert encode_string("ab", compact=True) == b"\x03ab"
    assert encode_string(None, compact=False) == b"\xff\xff"
    assert encode_string(None, compact=True) == b"\x00"
    assert encode_string("", compact=True) == b"\x01"
    assert read_string(b"\x00\x00", 0, compact=False) == ("", 2)
    assert read_string(b"\x01", 0, compact=True) == ("", 1)


@pytest.mark.parametrize("compact", [False, True])
def test_invalid_utf8_is_a_protocol_error(compact: bool) -> None:
    head = b"\x03" if compact else b"\x00\x02"
    with pytest.raises(ProtocolError):
        read_string(head + b"\xff\xfe", 0, compact)


def test_skip_string_truncated() -> None:
    with pytest.raises(ProtocolError):
        skip_string(b"\x00\x05abc", 0, compact=False)
    with pytest.raises(ProtocolError):
        skip_string(b"\x06abc", 0, compact=True)


@pytest.mark.parametrize("wrap", BUFFER_TYPES)
def test_bytes_span_is_a_span_not_a_copy(wrap: Callable[[bytes], Any]) -> None:
    payload = b"record-bytes"
    buf = wrap(b"\x99" + struct.pack(">i", len(payload)) + payload + b"\x77")
    span, pos = read_bytes_span(buf, 1, compact=False)
    assert span == (5, 5 + len(payload))
    assert pos == 5 + len(payload)
    assert bytes(buf[span[0] : span[1]]) == payload
    cbuf = wrap(encode_uvarint(len(payload) + 1) + payload)
    assert read_bytes_span(cbuf, 0, compact=True) == ((1, 1 + len(payload)), 1 + len(payload))


def test_bytes_span_null_and_truncated() -> None:
    assert read_bytes_span(struct.pack(">i", -1), 0, compact=False) == (None, 4)
    assert read_bytes_span(b"\x00", 0, compact=True) == (None, 1)
    assert read_bytes_span(struct.pack(">i", 0), 0, compact=False) == ((4, 4), 4)
    with pytest.raises(ProtocolError):
        read_bytes_span(struct.pack(">i", 5) + b"abcd", 0, compact=False)
    with pytest.raises(ProtocolError):
        read_bytes_span(b"\x06abcd", 0, compact=True)


@pytest.mark.parametrize("compact", [False, True])
def test_array_len(compact: bool) -> None:
    for n in (0, 1, 3):
        encoded = encode_array_len(n, compact)
        buf = encoded + b"\x00" * n
        assert read_array_len(buf, 0, compact) == (n, len(encoded))
    null = encode_array_len(None, compact)
    assert read_array_len(null, 0, compact) == (-1, len(null))
    with pytest.raises(ProtocolError, match="null array length"):  # where none may be null
        read_array_len(null, 0, compact, nullable=False)
    assert read_array_len(encode_array_len(0, compact), 0, compact, nullable=False)[0] == 0
    # a length that cannot fit in the remaining bytes is rejected before any loop
    with pytest.raises(ProtocolError):
        read_array_len(encode_array_len(1000, compact) + b"\x00" * 10, 0, compact)


def test_array_len_golden_and_negative() -> None:
    assert encode_array_len(2, compact=False) == b"\x00\x00\x00\x02"
    assert encode_array_len(2, compact=True) == b"\x03"
    assert encode_array_len(None, compact=False) == b"\xff\xff\xff\xff"
    assert encode_array_len(None, compact=True) == b"\x00"
    with pytest.raises(ProtocolError):
        read_array_len(struct.pack(">i", -2), 0, compact=False)
    with pytest.raises(ProtocolError):
        read_array_len(b"\x00\x00", 0, compact=False)


TAGS = st.dictionaries(
    st.integers(min_value=0, max_value=10_000), st.binary(max_size=20), max_size=5
)


@FAST
@given(TAGS)
def test_tagged_fields_agree_with_kafka_python(tags: dict[int, bytes]) -> None:
    ordered = sorted(tags.items())
    encoded = encode_tagged_fields(ordered)
    assert encoded == TaggedFields.encode(dict(ordered))
    buf = b"\x55" + encoded + b"\x55"
    assert skip_tagged_fields(buf, 1) == 1 + len(encoded)
    spans, pos = read_tagged_fields(buf, 1)
    assert pos == 1 + len(encoded)
    assert [(tag, bytes(buf[s:e])) for tag, s, e in spans] == ordered
    if ordered:
        _all_prefixes_fail(skip_tagged_fields, encoded)
        _all_prefixes_fail(read_tagged_fields, encoded)


def test_empty_tagged_fields() -> None:
    assert EMPTY_TAGGED_FIELDS == encode_tagged_fields([]) == b"\x00"
    assert skip_tagged_fields(b"\x00", 0) == 1
    assert read_tagged_fields(b"\x00", 0) == ([], 1)


def test_tagged_field_size_beyond_buffer() -> None:
    with pytest.raises(ProtocolError):
        skip_tagged_fields(b"\x01\x00\x7f" + b"\x00" * 10, 0)
    with pytest.raises(ProtocolError):
        read_tagged_fields(b"\x01\x00\x7f" + b"\x00" * 10, 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=24), st.integers(min_value=0, max_value=4), st.booleans())
def test_readers_raise_only_protocol_error(data: bytes, pos: int, compact: bool) -> None:
    readers: list[Callable[[bytes, int], Any]] = [
        read_int8, read_int16, read_int32, read_int64, read_uvarint, read_varint, read_uuid,
        lambda b, p: read_string(b, p, compact),
        lambda b, p: skip_string(b, p, compact),
        lambda b, p: read_bytes_span(b, p, compact),
        lambda b, p: read_array_len(b, p, compact),
        skip_tagged_fields,
        read_tagged_fields,
    ]
    for reader in readers:
        try:
            result = reader(data, pos)
        except ProtocolError:
            continue
        new_pos = result if isinstance(result, int) else result[1]
        assert pos < new_pos <= len(data)
