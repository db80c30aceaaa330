"""What a client connection must pass besides well-formed frames: the limits and the
bad-input log it reports to (:class:`Guards`, one per server) and, with SASL relayed, its
own SASL screening: what the relay does with a request before the broker has
authenticated the client (see :mod:`sasl_gate` for when that is).

:meth:`ClientGuard.screen` returns None (go on as usual: ApiVersions, or any
request once the gate is open), a :class:`Relay` (forward as is, reading the
broker's SaslAuthenticate answer on the way back) or a :class:`Refuse` (close
the connection as bad input). Nothing of a SaslAuthenticate request is read;
of a SaslHandshake request only the mechanism name.

Invariants: no I/O; a SaslHandshake v0 (followed by unframed tokens the relay
could not cut into requests) is refused; the answer reader returns the frame
it was given, unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from protocol.apis import api_name
from protocol.primitives import Buffer, ProtocolError
from protocol.sasl import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    read_authenticate_outcome,
    read_handshake_mechanism,
)
from proxy.security.sasl_gate import SaslGate


@dataclass(frozen=True, slots=True)
class Refuse:
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Relay:
    """Forward unchanged; ``reads_answer``: the response goes through :meth:`answered`."""

    reads_answer: bool


class ClientGuard:
    __slots__ = ("gate",)

    def __init__(self) -> None:
        self.gate = SaslGate()

    @property
    def open(self) -> bool:
        return self.gate.open

    def screen(self, api_key: int, api_version: int, frame: Buffer) -> Refuse | Relay | None:
        gate = self.gate
        if not gate.admits(api_key):
            return Refuse("unauthenticated_request",
                          f"{api_name(api_key)} before the broker authenticated the client")
        if gate.open:
            return None
        if api_key == SASL_HANDSHAKE:
            if api_version < 1:
                return Refuse("sasl_handshake_v0", "SaslHandshake v0 (unframed SASL tokens) "
                              "is not relayed; clients since Kafka 1.0 use v1")
            try:
                gate.handshake(read_handshake_mechanism(frame))
            except ProtocolError as exc:
                return Refuse("bad_request", str(exc))
            return Relay(False)
        if api_key == SASL_AUTHENTICATE:
            return Relay(True)
        return None  # ApiVersions

    def answered(self, frame: memoryview, api_version: int) -> memoryview:
        """A response transform for SaslAuthenticate: tell the gate, hand the frame on."""
        self.gate.answered(read_authenticate_outcome(frame, api_version))
        return frame


def _log_bad_input(host: str, reason: str, message: str) -> None:
    logging.getLogger("rackguard.connection").warning("%s", message)


@dataclass(frozen=True, slots=True)
class Guards:
    """What a client connection must pass besides well-formed frames."""

    sasl: bool = False  # the brokers authenticate clients: screen until they have
    first_request_timeout_s: float | None = None
    # client address -> None (admitted: released through on_closed) or the refusing limit
    admit: Callable[[str], str | None] = lambda host: None
    # (client address, reason, message): the rate-limited bad-input log
    report: Callable[[str, str, str], None] = _log_bad_input
