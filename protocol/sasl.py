"""SaslHandshake (17) and SaslAuthenticate (36): the parts the proxy reads.

Reads: the mechanism name of a SaslHandshake request (a client's, to know how
many rounds its exchange takes); a SaslAuthenticate response's outcome (error
code, the length of the server's token, the session lifetime of KIP-368) for
the relay, and the whole response (the server's token too) for the proxy's
own login; a SaslHandshake response's error and mechanisms.

Invariants: a SaslAuthenticate *request* is never read: its bytes are the
client's credentials. Frames include their 4-byte size prefix. Malformed
input raises :class:`ProtocolError` and nothing else. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol._wire import check_frame, expect_end, guard
from protocol.headers import parse_request_header
from protocol.primitives import (
    Buffer,
    ProtocolError,
    read_array_len,
    read_bytes_span,
    read_int16,
    read_int64,
    read_string,
    skip_string,
    skip_tagged_fields,
)

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
HANDSHAKE_MAX = 1  # v0 is followed by raw, unframed tokens: not relayed
AUTHENTICATE_MAX = 2
AUTHENTICATE_FLEXIBLE_FROM = 2

# error codes
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_SASL_MECHANISM = 33
SASL_AUTHENTICATION_FAILED = 58


@dataclass(frozen=True, slots=True)
class AuthenticateOutcome:
    """What the relay learns from a SaslAuthenticate response (no token bytes)."""

    error_code: int
    token_length: int  # -1 for a null token
    session_lifetime_ms: int  # 0: none (v0, or the broker sets no lifetime)


@dataclass(frozen=True, slots=True)
class AuthenticateResponse:
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


@guard
def read_handshake_mechanism(frame: Buffer) -> str:
    """The mechanism a SaslHandshake request asks for."""
    header = parse_request_header(frame)
    if header.api_key != SASL_HANDSHAKE:
        raise ProtocolError(f"api key {header.api_key} is not SaslHandshake")
    mechanism, _ = read_string(frame, header.body_offset, False)
    if mechanism is None:
        raise ProtocolError("null SASL mechanism")
    return mechanism


def _authenticate(frame: Buffer, version: int) -> tuple[int, str | None, tuple[int, int] | None,
                                                         int]:
    pos = check_frame(frame, SASL_AUTHENTICATE, version, AUTHENTICATE_MAX)
    compact = version >= AUTHENTICATE_FLEXIBLE_FROM
    error, pos = read_int16(frame, pos)
    message, pos = read_string(frame, pos, compact)
    span, pos = read_bytes_span(frame, pos, compact)
    lifetime = 0
    if version >= 1:
        lifetime, pos = read_int64(frame, pos)
    if compact:
        pos = skip_tagged_fields(frame, pos)
    expect_end(frame, pos)
    return error, message, span, lifetime


@guard
def read_authenticate_outcome(frame: Buffer, version: int) -> AuthenticateOutcome:
    """Error code, token length and session lifetime of a SaslAuthenticate response."""
    error, _, span, lifetime = _authenticate(frame, version)
    return AuthenticateOutcome(error, -1 if span is None else span[1] - span[0], lifetime)


@guard
def read_authenticate_response(frame: Buffer, version: int) -> AuthenticateResponse:
    """The whole SaslAuthenticate response (for the proxy's own login)."""
    error, message, span, lifetime = _authenticate(frame, version)
    token = b"" if span is None else bytes(frame[span[0]:span[1]])
    return AuthenticateResponse(error, message, token, lifetime)


@guard
def read_handshake_response(frame: Buffer, version: int) -> tuple[int, tuple[str, ...]]:
    """(error code, mechanisms the broker enables) of a SaslHandshake response."""
    pos = check_frame(frame, SASL_HANDSHAKE, version, HANDSHAKE_MAX)
    error, pos = read_int16(frame, pos)
    n, pos = read_array_len(frame, pos, False)
    names = []
    for _ in range(max(n, 0)):
        start = pos
        pos = skip_string(frame, pos, False)
        name, _ = read_string(frame, start, False)
        names.append(name or "")
    expect_end(frame, pos)
    return error, tuple(names)
