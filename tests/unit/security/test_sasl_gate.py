"""The SASL gate: what a client may send before the broker has authenticated it."""

from __future__ import annotations

import pytest

from protocol.sasl import AuthenticateOutcome
from proxy.security.sasl_gate import SaslGate

PRODUCE, METADATA, API_VERSIONS, HANDSHAKE, AUTHENTICATE = 0, 3, 18, 17, 36
OK_EMPTY = AuthenticateOutcome(0, 0, 0)
OK_TOKEN = AuthenticateOutcome(0, 40, 0)
FAILED = AuthenticateOutcome(58, 0, 0)


def test_only_the_authentication_apis_pass_before_authentication() -> None:
    gate = SaslGate()
    for key in (API_VERSIONS, HANDSHAKE, AUTHENTICATE):
        assert gate.admits(key)
    for key in (PRODUCE, METADATA, 1, 32):
        assert not gate.admits(key)


def test_plain_opens_after_one_successful_round() -> None:
    gate = SaslGate()
    gate.handshake("PLAIN")
    gate.answered(OK_EMPTY)
    assert gate.open and gate.admits(PRODUCE)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_opens_only_after_the_server_final_round(mechanism: str) -> None:
    gate = SaslGate()
    gate.handshake(mechanism)
    gate.answered(OK_TOKEN)  # server-first
    assert not gate.admits(PRODUCE)
    gate.answered(OK_TOKEN)  # server-final
    assert gate.admits(PRODUCE)


def test_a_failed_round_keeps_it_shut() -> None:
    gate = SaslGate()
    gate.handshake("SCRAM-SHA-512")
    gate.answered(OK_TOKEN)
    gate.answered(FAILED)
    assert not gate.admits(PRODUCE)
    gate.handshake("PLAIN")
    gate.answered(FAILED)
    assert not gate.admits(METADATA)


def test_oauthbearer_error_challenge_does_not_open_it() -> None:
    gate = SaslGate()
    gate.handshake("OAUTHBEARER")
    gate.answered(OK_TOKEN)  # RFC 7628 error challenge (JSON)
    assert not gate.admits(PRODUCE)
    gate.answered(FAILED)
    assert not gate.admits(PRODUCE)
    gate = SaslGate()
    gate.handshake("OAUTHBEARER")
    gate.answered(OK_EMPTY)
    assert gate.admits(PRODUCE)


def test_an_unknown_mechanism_opens_when_the_client_moves_on_after_a_success() -> None:
    gate = SaslGate()
    gate.handshake("GSSAPI")
    assert not gate.admits(METADATA)
    gate.answered(OK_TOKEN)
    assert gate.admits(AUTHENTICATE) and not gate.open  # more rounds may follow
    assert gate.admits(METADATA) and gate.open


def test_no_handshake_no_opening() -> None:
    gate = SaslGate()
    gate.answered(OK_EMPTY)  # an answer to nothing the gate knows of: unknown mechanism
    gate2 = SaslGate()
    assert not gate2.admits(PRODUCE)


def test_reauthentication_keeps_it_open() -> None:
    gate = SaslGate()
    gate.handshake("PLAIN")
    gate.answered(OK_EMPTY)
    gate.handshake("PLAIN")  # KIP-368
    gate.answered(FAILED)  # the broker closes the connection itself
    assert gate.admits(PRODUCE)
