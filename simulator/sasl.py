"""SASL on the simulator's brokers (a TEST DOUBLE of Kafka's SASL listeners).

Per connection, like Kafka's SaslServerAuthenticator: until a client has
authenticated, only ApiVersions, SaslHandshake (v1) and SaslAuthenticate are
answered, and any other request closes the connection; a failed
authentication is answered with SASL_AUTHENTICATION_FAILED (58) and the
connection closed after it. PLAIN (RFC 4616) and SCRAM-SHA-256/512 (scramp's
server side) are offered; a re-authentication (KIP-368) on an authenticated
connection must name the same user. OAUTHBEARER (RFC 7628) takes an
unsecured JWT (``alg: none``, as Kafka's unsecured validator) whose ``sub``
is a known user; any other token gets the RFC's error challenge, then the
failure. ``produce_denied`` lists users whose
Produce requests are refused with TOPIC_AUTHORIZATION_FAILED (29), standing
in for Kafka's ACLs.

Invariants: no sockets here; the session decodes the SASL requests itself and
never hands a token to anything else.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import scramp
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from simulator.wire import RequestHeader, body_offset, response_frame

HANDSHAKE, AUTHENTICATE, API_VERSIONS = 17, 36, 18
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_SASL_MECHANISM = 33
SASL_AUTHENTICATION_FAILED = 58
TOPIC_AUTHORIZATION_FAILED = 29


@dataclass(frozen=True)
class SaslUsers:
    users: Mapping[str, str] = field(repr=False)
    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    produce_denied: frozenset[str] = frozenset()
    session_lifetime_ms: int = 0  # KIP-368: > 0 tells clients to re-authenticate


@functools.lru_cache(maxsize=64)
def _auth_info(mechanism: str, password: str) -> tuple[bytes, bytes, bytes, int]:
    return scramp.ScramMechanism(mechanism).make_auth_info(password, iteration_count=4096)


class SaslSession:
    """One connection's authentication state."""

    def __init__(self, users: SaslUsers) -> None:
        self._users = users
        self.principal: str | None = None
        self._mechanism: str | None = None
        self._scram: Any = None
        self._scram_user: str | None = None
        self._challenged = False  # OAUTHBEARER: the error challenge was sent

    @property
    def _completed(self) -> bool:
        """No exchange under way and a user authenticated."""
        return self._mechanism is None and self.principal is not None

    def admits(self, api_key: int) -> bool:
        return self.principal is not None or api_key == API_VERSIONS

    def handle(self, header: RequestHeader, frame: bytes) -> tuple[bytes, bool]:
        """The response to a SASL request, and whether to close the connection after it."""
        if header.api_key == HANDSHAKE:
            return self._handshake(header, frame), False
        return self._authenticate(header, frame)

    def _handshake(self, header: RequestHeader, frame: bytes) -> bytes:
        request = SaslHandshakeRequest.decode(memoryview(frame)[body_offset(frame, False):],
                                              version=header.api_version)
        error = 0
        if request.mechanism in self._users.mechanisms:
            self._mechanism = request.mechanism
            self._scram = None
        else:
            error = UNSUPPORTED_SASL_MECHANISM
        body = SaslHandshakeResponse(version=header.api_version, error_code=error,
                                     mechanisms=list(self._users.mechanisms))
        return response_frame(header.correlation_id,
                              bytes(body.encode(version=header.api_version)), False)

    def _authenticate(self, header: RequestHeader, frame: bytes) -> tuple[bytes, bool]:
        version = header.api_version
        flexible = version >= 2
        request = SaslAuthenticateRequest.decode(
            memoryview(frame)[body_offset(frame, flexible):], version=version)
        token = bytes(request.auth_bytes)
        error, message, reply = 0, None, b""
        try:
            reply, user = self._step(token)
        except _Refused as exc:
            error, message = exc.code, str(exc)
        else:
            if user is not None:
                if self.principal is not None and user != self.principal:
                    error, message = ILLEGAL_SASL_STATE, "re-authentication as another user"
                else:
                    self.principal = user
        fields: dict[str, Any] = {"error_code": error, "error_message": message,
                                  "auth_bytes": reply}
        if version >= 1:
            fields["session_lifetime_ms"] = (self._users.session_lifetime_ms
                                             if error == 0 and self._completed else 0)
        body = SaslAuthenticateResponse(version=version, **fields).encode(version=version)
        return response_frame(header.correlation_id, bytes(body), flexible), error != 0

    def _step(self, token: bytes) -> tuple[bytes, str | None]:
        """The server's token, and the user once authenticated."""
        mechanism = self._mechanism
        if mechanism is None:
            raise _Refused(ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake")
        if mechanism == "PLAIN":
            parts = token.split(b"\0")
            if len(parts) != 3:
                raise _Refused(SASL_AUTHENTICATION_FAILED, "Authentication failed: bad PLAIN "
                               "message")
            user, password = parts[1].decode(errors="replace"), parts[2].decode(errors="replace")
            if self._users.users.get(user) != password:
                raise _Refused(SASL_AUTHENTICATION_FAILED,
                               "Authentication failed: Invalid username or password")
            self._mechanism = None
            return b"", user
        if mechanism == "OAUTHBEARER":
            return self._bearer(token)
        try:
            if self._scram is None:
                users = self._users.users

                def auth_fn(name: str) -> tuple[bytes, bytes, bytes, int]:
                    if name not in users:
                        raise scramp.ScramException("unknown user")
                    self._scram_user = name
                    return _auth_info(mechanism, users[name])

                self._scram = scramp.ScramMechanism(mechanism).make_server(auth_fn)
                self._scram.set_client_first(token.decode())
                return self._scram.get_server_first().encode(), None
            server, self._scram = self._scram, None
            server.set_client_final(token.decode())
            self._mechanism = None
            return server.get_server_final().encode(), self._scram_user
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            self._scram = None
            raise _Refused(SASL_AUTHENTICATION_FAILED, "Authentication failed during "
                           f"authentication due to invalid credentials with SASL mechanism "
                           f"{mechanism}") from exc


    def _bearer(self, token: bytes) -> tuple[bytes, str | None]:
        if self._challenged:  # the client's %x01 after the error challenge
            self._challenged = False
            raise _Refused(SASL_AUTHENTICATION_FAILED, "Authentication failed: invalid token")
        user = bearer_subject(token)
        if user is None or user not in self._users.users:
            self._challenged = True
            return b'{"status":"invalid_token"}', None
        self._mechanism = None
        return b"", user


def bearer_subject(message: bytes) -> str | None:
    """The ``sub`` of the unsecured JWT in an RFC 7628 client message, or None."""
    for part in message.split(b"\x01"):
        if part.startswith(b"auth=Bearer "):
            pieces = part[len(b"auth=Bearer "):].split(b".")
            if len(pieces) != 3:
                return None
            try:
                payload = base64.urlsafe_b64decode(pieces[1] + b"=" * (-len(pieces[1]) % 4))
                subject = json.loads(payload).get("sub")
            except (ValueError, AttributeError):
                return None
            return subject if isinstance(subject, str) else None
    return None


def unsecured_jwt(subject: str, lifetime_s: int = 3600) -> str:
    """An unsecured JWT for ``subject`` (for tests: the simulator accepts it)."""
    import time

    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': now, 'exp': now + lifetime_s})}."


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def refused_produce(principal: str | None, users: SaslUsers | None) -> bool:
    return users is not None and principal is not None and principal in users.produce_denied
