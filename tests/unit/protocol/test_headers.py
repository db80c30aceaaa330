"""protocol.headers against requests and responses encoded by kafka-python.

Invariant under test: api key, version and correlation id are read at fixed
offsets; the full request header is v1 for non-flexible versions and v2
(tagged fields) for flexible ones, and ``body_offset`` is where the body
kafka-python encodes starts; response headers are v1 when flexible except for
ApiVersions (always v0); ``response_frame`` builds what kafka-python builds.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest, MetadataResponse

from benchmarks.produce_frames import kp_request, make_batch
from protocol.headers import (
    RequestHeader,
    encode_response_header,
    parse_request_header,
    peek_request,
    response_body_offset,
    response_correlation_id,
    response_frame,
    response_header_is_flexible,
)
from protocol.primitives import ProtocolError, encode_tagged_fields, pack_int32


def metadata_request(version: int, corr: int, client_id: str | None) -> tuple[bytes, bytes]:
    """(framed request with header, body alone) as kafka-python encodes them."""
    cls = MetadataRequest[version]
    kw: dict[str, Any] = {"name": "orders"}
    if version >= 10:
        kw["topic_id"] = None
    extra: dict[str, Any] = {}
    if version >= 4:
        extra["allow_auto_topic_creation"] = False
    if version >= 8:
        extra["include_topic_authorized_operations"] = False
    if 8 <= version <= 10:
        extra["include_cluster_authorized_operations"] = False
    req = cls(topics=[cls.MetadataRequestTopic(**kw)], **extra)
    req.with_header(correlation_id=corr, client_id=client_id)
    return bytes(req.encode(header=True, framed=True)), bytes(req.encode())


def with_header_tags(frame: bytes, header: RequestHeader, tags: list[tuple[int, bytes]]) -> bytes:
    """Replace a flexible request header's empty tagged fields with ``tags``."""
    assert frame[header.body_offset - 1] == 0
    body = frame[4 : header.body_offset - 1] + encode_tagged_fields(tags) + frame[
        header.body_offset :
    ]
    return pack_int32(len(body)) + body


@pytest.mark.parametrize(
    "version, client_id, flexible",
    [(0, "c", False), (1, None, False), (8, "client-8", False), (9, "client-9", True),
     (12, "cli", True), (12, None, True), (13, "ü-client", True)],
)
def test_metadata_request_header(version: int, client_id: str | None, flexible: bool) -> None:
    frame, body = metadata_request(version, 7_000_001, client_id)
    header = parse_request_header(frame)
    assert header == RequestHeader(3, version, 7_000_001, client_id, len(frame) - len(body))
    assert header.flexible is flexible
    assert frame[header.body_offset :] == body
    assert peek_request(frame) == (3, version, 7_000_001)
    assert peek_request(memoryview(frame)) == (3, version, 7_000_001)


def test_metadata_v1_body_offset_is_after_the_client_id() -> None:
    frame, _ = metadata_request(1, 5, "abc")
    # size(4) api key(2) version(2) corr(4) client id length(2) "abc"(3); no tagged fields
    assert parse_request_header(frame).body_offset == 17


def test_metadata_v12_body_offset_includes_tagged_fields() -> None:
    frame, _ = metadata_request(12, 5, "abc")
    # ... "abc"(3) then the header's empty tagged fields (1)
    assert parse_request_header(frame).body_offset == 18


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_produce_request_header(version: int) -> None:
    key: str | bytes = bytes(range(16)) if version >= 13 else "orders"
    frame = kp_request(version, [(key, [(0, make_batch(2))])], correlation_id=-3,
                       client_id="producer-1")
    header = parse_request_header(memoryview(frame))
    assert (header.api_key, header.api_version, header.correlation_id) == (0, version, -3)
    assert header.client_id == "producer-1"
    assert header.flexible is (version >= 9)
    expected = 4 + 8 + 2 + len("producer-1") + (1 if version >= 9 else 0)
    assert header.body_offset == expected
    # transactional id (null) starts the body: int16 -1 or compact 0
    null_txn = b"\x00" if version >= 9 else b"\xff\xff"
    assert frame[expected : expected + len(null_txn)] == null_txn


def test_flexible_header_with_tagged_fields() -> None:
    frame, body = metadata_request(12, 99, "tagged")
    plain = parse_request_header(frame)
    tagged_frame = with_header_tags(frame, plain, [(0, b"\x01\x02"), (5, b"xyz")])
    tagged = parse_request_header(tagged_frame)
    assert tagged.client_id == "tagged"
    assert tagged.body_offset == plain.body_offset + len(b"\x00\x02\x01\x02\x05\x03xyz")
    assert tagged_frame[tagged.body_offset :] == body


def test_non_flexible_header_ignores_what_would_be_tags() -> None:
    frame, body = metadata_request(8, 1, "x")
    header = parse_request_header(frame)
    assert frame[header.body_offset :] == body  # v8 body starts right after the client id


@pytest.mark.parametrize("cut", [0, 4, 11])
def test_short_request_frames(cut: int) -> None:
    frame, _ = metadata_request(12, 1, "client")
    with pytest.raises(ProtocolError):
        peek_request(frame[:cut])
    with pytest.raises(ProtocolError):
        parse_request_header(frame[:cut])


def test_truncated_client_id_and_tags() -> None:
    frame, _ = metadata_request(12, 1, "client")
    header = parse_request_header(frame)
    for cut in range(12, header.body_offset):
        with pytest.raises(ProtocolError):
            parse_request_header(frame[:cut])


def metadata_response(version: int, corr: int) -> tuple[bytes, bytes]:
    cls = MetadataResponse[version]
    kw: dict[str, Any] = {"brokers": [], "topics": []}
    if version >= 1:
        kw["controller_id"] = 1
    if version >= 2:
        kw["cluster_id"] = "c"
    if version >= 3:
        kw["throttle_time_ms"] = 0
    resp = cls(**kw)
    resp.with_header(correlation_id=corr)
    return bytes(resp.encode(header=True, framed=True)), bytes(resp.encode())


def api_versions_response(version: int, corr: int) -> tuple[bytes, bytes]:
    cls = ApiVersionsResponse[version]
    kw: dict[str, Any] = {"error_code": 0, "api_keys": []}
    if version >= 1:
        kw["throttle_time_ms"] = 0
    resp = cls(**kw)
    resp.with_header(correlation_id=corr)
    return bytes(resp.encode(header=True, framed=True)), bytes(resp.encode())


@pytest.mark.parametrize("version", [0, 1, 8, 9, 12, 13])
def test_metadata_response_header(version: int) -> None:
    frame, body = metadata_response(version, 31337)
    offset = response_body_offset(frame, 3, version)
    assert offset == (9 if version >= 9 else 8)
    assert frame[offset:] == body
    assert response_correlation_id(frame) == 31337
    assert response_header_is_flexible(3, version) is (version >= 9)
    assert response_frame(31337, 3, version, body) == frame


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_header_is_always_v0(version: int) -> None:
    frame, body = api_versions_response(version, 12)
    assert response_header_is_flexible(18, version) is False
    assert response_body_offset(frame, 18, version) == 8
    assert frame[8:] == body
    assert response_frame(12, 18, version, body) == frame
    assert encode_response_header(12, 18, version) == pack_int32(12)


def test_encode_response_header() -> None:
    assert encode_response_header(5, 3, 12) == b"\x00\x00\x00\x05\x00"
    assert encode_response_header(5, 3, 8) == b"\x00\x00\x00\x05"
    assert encode_response_header(-1, 0, 9) == b"\xff\xff\xff\xff\x00"


def test_flexible_response_header_with_tags() -> None:
    tags = encode_tagged_fields([(1, b"abc")])
    body = b"BODY"
    frame = pack_int32(4 + len(tags) + len(body)) + pack_int32(8) + tags + body
    assert response_body_offset(frame, 3, 12) == 8 + len(tags)
    assert response_body_offset(frame, 18, 3) == 8  # ApiVersions: the bytes are body


def test_response_frame_size_prefix() -> None:
    out = response_frame(77, 0, 9, b"xyz")
    assert out == pack_int32(8) + pack_int32(77) + b"\x00" + b"xyz"


def test_short_responses() -> None:
    with pytest.raises(ProtocolError):
        response_correlation_id(b"\x00\x00\x00\x04\x00\x00")
    with pytest.raises(ProtocolError):
        response_body_offset(b"\x00\x00\x00\x04\x00\x00\x00", 3, 1)
    with pytest.raises(ProtocolError):
        response_body_offset(b"\x00\x00\x00\x04\x00\x00\x00\x01", 3, 12)  # no tag byte
