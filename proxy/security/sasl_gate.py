"""What a client connection may send before the broker has authenticated it.

With SASL on the brokers' listener, each client authenticates itself: its
SaslHandshake and SaslAuthenticate requests go, unchanged, to its own upstream
connection, and the broker decides. Until then the relay forwards only
ApiVersions, SaslHandshake and SaslAuthenticate and reads nothing else of the
client's (no hook, no decoding); any other request closes the connection.

When the exchange is over is known from the mechanism the client asked for
(its SaslHandshake request names it) and the broker's answers, never from the
client's tokens: PLAIN is one round; SCRAM-SHA-256/512 two (client-first,
client-final); OAUTHBEARER ends with an empty success token (a non-empty one
is the error challenge of RFC 7628). For any other mechanism (GSSAPI, AWS
IAM, ...) the proxy cannot see the end: after a successful round the client's
next non-SASL request opens the gate, and the broker, which refuses any other
request in the middle of an exchange by closing the connection, remains the
authority on it.

Invariants: a pure value per connection, no I/O; once open, it stays open (a
KIP-368 re-authentication is relayed like any request: a broker that refuses
it closes the connection itself); a failed round leaves it shut.
"""

from __future__ import annotations

from protocol.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, AuthenticateOutcome

API_VERSIONS = 18
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})

# successful rounds after which the broker has authenticated the client
_ROUNDS = {"PLAIN": 1, "SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2}
_OAUTH = "OAUTHBEARER"


class SaslGate:
    __slots__ = ("open", "_mechanism", "_rounds", "_client_decides")

    def __init__(self) -> None:
        self.open = False
        self._mechanism: str | None = None
        self._rounds = 0
        self._client_decides = False

    def admits(self, api_key: int) -> bool:
        """May a request of ``api_key`` be forwarded now? (Opens the gate when the end of an
        exchange cannot be seen and the client moves on after a successful round.)"""
        if self.open or api_key in BEFORE_AUTHENTICATION:
            return True
        if self._client_decides:
            self.open = True
            return True
        return False

    def handshake(self, mechanism: str) -> None:
        """The client's SaslHandshake request asked for ``mechanism``."""
        if not self.open:
            self._mechanism = mechanism
            self._rounds = 0
            self._client_decides = False

    def answered(self, outcome: AuthenticateOutcome) -> None:
        """The broker answered one of the client's SaslAuthenticate requests."""
        if self.open:
            return
        if outcome.error_code != 0:
            self._client_decides = False
            return
        self._rounds += 1
        mechanism = self._mechanism
        if mechanism == _OAUTH:
            self.open = outcome.token_length <= 0
        elif mechanism in _ROUNDS:
            self.open = self._rounds >= _ROUNDS[mechanism]
        else:
            self._client_decides = True
