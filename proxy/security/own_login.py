"""The proxy's own connections log in: SaslHandshake v1, then SaslAuthenticate rounds.

Used by the poller on each new connection, after ApiVersions. The requests are
encoded with kafka-python's generic codec (as the poller's other small
requests), the answers read with :mod:`protocol.sasl`.

Invariants: a refusal raises :class:`LoginFailed` carrying the broker's error
code and message, never a token; the session lifetime the broker grants
(KIP-368) is returned so the caller can replace the connection before it
runs out.
"""

from __future__ import annotations

from typing import Any, Protocol

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from protocol.primitives import Buffer, ProtocolError
from protocol.sasl import (
    AUTHENTICATE_MAX,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    read_authenticate_response,
    read_handshake_response,
)
from proxy.security.sasl_login import SaslCredentials, SaslLogin, SaslLoginError

_MAX_ROUNDS = 8


class LoginFailed(Exception):
    """The broker refused the proxy's login, or the exchange could not go on."""


class Caller(Protocol):
    versions: dict[int, tuple[int, int]]

    async def call(self, request: Any, timeout: float) -> Buffer: ...


async def login(conn: Caller, credentials: SaslCredentials, timeout: float) -> int:
    """Authenticate ``conn``; return the session lifetime in ms (0: none)."""
    if SASL_AUTHENTICATE not in conn.versions or SASL_HANDSHAKE not in conn.versions:
        raise LoginFailed("the broker offers no SaslHandshake v1 / SaslAuthenticate")
    if conn.versions[SASL_HANDSHAKE][1] < 1:
        raise LoginFailed("the broker offers only SaslHandshake v0")
    try:
        frame = await conn.call(SaslHandshakeRequest(version=1,
                                                     mechanism=credentials.mechanism), timeout)
        error, mechanisms = read_handshake_response(frame, 1)
        if error:
            raise LoginFailed(f"SaslHandshake error {error}: the broker enables "
                              f"{', '.join(mechanisms) or 'no mechanism'}, not "
                              f"{credentials.mechanism}")
        version = min(conn.versions[SASL_AUTHENTICATE][1], AUTHENTICATE_MAX)
        exchange = SaslLogin(credentials)
        token: bytes | None = exchange.first()
        lifetime = 0
        for _ in range(_MAX_ROUNDS):
            if token is None:
                return lifetime
            frame = await conn.call(SaslAuthenticateRequest(version=version,
                                                            auth_bytes=token), timeout)
            answer = read_authenticate_response(frame, version)
            if answer.error_code:
                raise LoginFailed(f"{credentials.mechanism} authentication failed (error "
                                  f"{answer.error_code}): {answer.error_message or ''}")
            lifetime = answer.session_lifetime_ms
            token = exchange.step(answer.auth_bytes)
        raise LoginFailed(f"{credentials.mechanism}: no end after {_MAX_ROUNDS} rounds")
    except (SaslLoginError, ProtocolError) as exc:
        raise LoginFailed(str(exc)) from None
