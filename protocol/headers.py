"""Request and response headers.

Invariant: a request's api key, version and correlation id sit at fixed
offsets in every header version, so opaque forwarding never needs more than
:func:`peek_request`. The full header (client id, tagged fields) is parsed
only for APIs the proxy reads; its version follows the API's flexible
versions (request header v2 / response header v1 when flexible), except that
ApiVersions responses always use response header v0.
Frames here include their 4-byte size prefix. A malformed header (too short,
a client id or tagged field running past the frame, invalid UTF-8 in the
client id) raises :class:`~protocol.primitives.ProtocolError` and nothing else.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.apis import FLEXIBLE_FROM, ApiKey, is_flexible
from protocol.primitives import (
    Buffer,
    ProtocolError,
    pack_int32,
    skip_tagged_fields,
)

_PEEK = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_HEAD = struct.Struct(">hhih").unpack_from  # api key, version, correlation id, client id length
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
    end = len(frame)
    if end < 14:
        if end < 12:
            raise ProtocolError(f"request frame of {end} bytes is too short for a header")
        raise ProtocolError("truncated client id length in the request header")
    key, version, corr, n = _HEAD(frame, 4)
    if n < 0:
        client_id = None
        pos = 14
    else:
        pos = 14 + n
        if pos > end:
            raise ProtocolError(f"truncated: client id of {n} bytes, have {end - 14}")
        try:
            client_id = str(frame[14:pos], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError("invalid UTF-8 client id in the request header") from exc
    first_flexible = FLEXIBLE_FROM.get(key)
    if first_flexible is not None and version >= first_flexible:
        if pos < end and frame[pos] == 0:  # no tagged fields: the usual header
            pos += 1
        else:
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
