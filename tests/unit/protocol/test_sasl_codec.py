"""protocol.sasl against kafka-python's generic codec (Kafka's JSON schemas).

Invariant under test: for every version the relay and the login accept, the
readers return what kafka-python encoded (error, message, token, session
lifetime; the handshake's mechanisms and the request's mechanism); every
truncation raises ProtocolError and nothing else.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.sasl import (
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from protocol.headers import response_frame
from protocol.primitives import ProtocolError
from protocol.sasl import (
    AUTHENTICATE_MAX,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    read_authenticate_outcome,
    read_authenticate_response,
    read_handshake_mechanism,
    read_handshake_response,
)


def authenticate(version: int, error: int, message: str | None, token: bytes,
                 lifetime: int = 0) -> bytes:
    fields: dict[str, object] = {"error_code": error, "error_message": message,
                                 "auth_bytes": token}
    if version >= 1:
        fields["session_lifetime_ms"] = lifetime
    body = SaslAuthenticateResponse(version=version, **fields).encode(version=version)
    return response_frame(9, SASL_AUTHENTICATE, version, bytes(body))


@pytest.mark.parametrize("version", range(AUTHENTICATE_MAX + 1))
@pytest.mark.parametrize(("error", "message", "token"), [
    (0, None, b""), (0, None, b"r=abc,s=c2FsdA==,i=4096"), (58, "Authentication failed", b""),
])
def test_authenticate_response_reads_what_kafka_python_encodes(
        version: int, error: int, message: str | None, token: bytes) -> None:
    frame = authenticate(version, error, message, token, 3_600_000)
    full = read_authenticate_response(frame, version)
    assert (full.error_code, full.error_message, full.auth_bytes) == (error, message, token)
    assert full.session_lifetime_ms == (3_600_000 if version >= 1 else 0)
    outcome = read_authenticate_outcome(memoryview(frame), version)
    assert (outcome.error_code, outcome.token_length) == (error, len(token))


@pytest.mark.parametrize("version", range(AUTHENTICATE_MAX + 1))
def test_truncated_authenticate_responses_raise_protocol_error(version: int) -> None:
    frame = authenticate(version, 0, "m", b"token", 1)
    for i in range(len(frame)):
        with pytest.raises(ProtocolError):
            read_authenticate_outcome(frame[:i], version)
        if i >= 8:
            fixed = struct.pack(">i", i - 4) + frame[4:i]
            with pytest.raises(ProtocolError):
                read_authenticate_outcome(fixed, version)


def test_an_authenticate_version_above_the_cap_is_refused() -> None:
    with pytest.raises(ProtocolError):
        read_authenticate_outcome(authenticate(2, 0, None, b""), AUTHENTICATE_MAX + 1)


@given(st.binary(max_size=64), st.integers(0, AUTHENTICATE_MAX))
def test_garbage_raises_only_protocol_error(data: bytes, version: int) -> None:
    frame = struct.pack(">i", len(data)) + data
    for read in (read_authenticate_outcome, read_authenticate_response):
        try:
            read(frame, version)
        except ProtocolError:
            pass


@pytest.mark.parametrize("version", [0, 1])
def test_handshake_request_and_response(version: int) -> None:
    request = SaslHandshakeRequest(version=version, mechanism="SCRAM-SHA-512")
    request.with_header(correlation_id=3, client_id="app")
    assert read_handshake_mechanism(bytes(request.encode(header=True, framed=True))) == \
        "SCRAM-SHA-512"
    body = SaslHandshakeResponse(version=version, error_code=33,
                                 mechanisms=["PLAIN", "SCRAM-SHA-512"]).encode(version=version)
    frame = response_frame(3, SASL_HANDSHAKE, version, bytes(body))
    assert read_handshake_response(frame, version) == (33, ("PLAIN", "SCRAM-SHA-512"))


def test_a_handshake_request_of_another_api_is_refused() -> None:
    request = SaslHandshakeRequest(version=1, mechanism="PLAIN")
    request.with_header(correlation_id=3, client_id="app")
    frame = bytearray(request.encode(header=True, framed=True))
    frame[4:6] = struct.pack(">h", 36)
    with pytest.raises(ProtocolError):
        read_handshake_mechanism(bytes(frame))
