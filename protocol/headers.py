"""Request and response headers.

Invariant: a request's api key, version and correlation id sit at fixed
offsets in every header version, so opaque forwarding never needs more than
:func:`peek_request`. The full header (client id, tagged fields) is parsed
only for APIs the proxy reads; its version follows the API's flexible
versions (request header v2 / response header v1 when flexible), except that
ApiVersions responses always use response header v0.
Frames here include their 4-byte size prefix.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.apis import ApiKey, is_flexible
from protocol.primitives import (
    Buffer,
    ProtocolError,
    pack_int32,
    read_string,
    skip_tagged_fields,
)

_PEEK = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_CORR = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # offset of the request body within the frame (prefix included)

    @property
    def flexible(self) -> bool:
        return is_flexible(self.api_key, self.api_version)


def peek_request(frame: Buffer) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame."""
    if len(frame) < 12:
        raise ProtocolError(f"request frame of {len(frame)} bytes is too short for a header")
    _, key, version, corr = _PEEK.unpack_from(frame, 0)
    return key, version, corr


def parse_request_header(frame: Buffer) -> RequestHeader:
    key, version, corr = peek_request(frame)
    client_id, pos = read_string(frame, 12, compact=False)
    if is_flexible(key, version):
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(key, version, corr, client_id, pos)


def response_correlation_id(frame: Buffer) -> int:
    if len(frame) < 8:
        raise ProtocolError(f"response frame of {len(frame)} bytes is too short for a header")
    return int(_CORR.unpack_from(frame, 4)[0])


def response_header_is_flexible(api_key: int, api_version: int) -> bool:
    return api_key != ApiKey.API_VERSIONS and is_flexible(api_key, api_version)


def response_body_offset(frame: Buffer, api_key: int, api_version: int) -> int:
    """Offset of the response body within a response frame (prefix included)."""
    if response_header_is_flexible(api_key, api_version):
        return skip_tagged_fields(frame, 8)
    if len(frame) < 8:
        raise ProtocolError("response frame too short")
    return 8


def encode_response_header(correlation_id: int, api_key: int, api_version: int) -> bytes:
    head = pack_int32(correlation_id)
    return head + b"\x00" if response_header_is_flexible(api_key, api_version) else head


def response_frame(correlation_id: int, api_key: int, api_version: int, body: bytes) -> bytes:
    """A complete response frame: size prefix, header, body."""
    head = encode_response_header(correlation_id, api_key, api_version)
    return pack_int32(len(head) + len(body)) + head + body
