"""The config API codecs under fuzzed input: any bytes behind a valid header either parse
or raise ProtocolError, never anything else (the relay turns that into one closed
connection); a request that parses can be encoded again (the rebuilt request)."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.alter_configs import (
    encode_alter_configs_request,
    parse_alter_configs_request,
    parse_alter_configs_response,
)
from protocol.create_topics import (
    encode_create_topics_request,
    parse_create_topics_request,
    parse_create_topics_response,
)
from protocol.describe_configs_rewrite import (
    parse_describe_configs_request,
    parse_describe_configs_response,
)
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError

CASES = [(19, v) for v in range(8)] + [(32, v) for v in range(5)] + [
    (33, v) for v in range(3)] + [(44, v) for v in range(2)]
FLEXIBLE = {19: 5, 32: 4, 33: 2, 44: 1}


def request_frame(key: int, version: int, body: bytes) -> bytes:
    head = struct.pack(">hhih", key, version, 7, 1) + b"c"
    if version >= FLEXIBLE[key]:
        head += b"\x00"
    return struct.pack(">i", len(head) + len(body)) + head + body


def response_frame(key: int, version: int, body: bytes) -> bytes:
    head = struct.pack(">i", 7) + (b"\x00" if version >= FLEXIBLE[key] else b"")
    return struct.pack(">i", len(head) + len(body)) + head + body


@settings(max_examples=400, deadline=None)
@given(case=st.sampled_from(CASES), body=st.binary(max_size=120))
def test_fuzzed_requests_parse_or_raise_protocol_error(case: tuple[int, int], body: bytes
                                                       ) -> None:
    key, version = case
    frame = request_frame(key, version, body)
    header = parse_request_header(frame)
    try:
        if key == 19:
            request = parse_create_topics_request(frame, header)
            encode_create_topics_request(frame, header, request)
        elif key == 32:
            parse_describe_configs_request(frame, header)
        else:
            alter = parse_alter_configs_request(frame, header)
            encode_alter_configs_request(frame, header, alter)
    except ProtocolError:
        pass


@settings(max_examples=400, deadline=None)
@given(case=st.sampled_from(CASES), body=st.binary(max_size=120))
def test_fuzzed_responses_parse_or_raise_protocol_error(case: tuple[int, int], body: bytes
                                                        ) -> None:
    key, version = case
    frame = response_frame(key, version, body)
    try:
        if key == 19:
            parse_create_topics_response(frame, version)
        elif key == 32:
            parse_describe_configs_response(frame, version)
        else:
            parse_alter_configs_response(frame, key, version)
    except ProtocolError:
        pass
