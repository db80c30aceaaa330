"""The proxy's own SASL login against scramp's server side and RFC texts."""

from __future__ import annotations

from pathlib import Path

import pytest
import scramp

from proxy.security.sasl_login import SaslCredentials, SaslLogin, SaslLoginError


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_scramps_server(mechanism: str) -> None:
    server_mech = scramp.ScramMechanism(mechanism)
    auth = server_mech.make_auth_info("s3cret", iteration_count=4096)
    server = server_mech.make_server(lambda user: auth)
    login = SaslLogin(SaslCredentials(mechanism, "rackguard", "s3cret"))  # type: ignore[arg-type]
    server.set_client_first(login.first().decode())
    final = login.step(server.get_server_first().encode())
    assert final is not None and not login.done
    server.set_client_final(final.decode())
    assert login.step(server.get_server_final().encode()) is None
    assert login.done


def test_scram_refuses_a_server_that_does_not_know_the_password() -> None:
    server_mech = scramp.ScramMechanism("SCRAM-SHA-512")
    auth = server_mech.make_auth_info("other")
    server = server_mech.make_server(lambda user: auth)
    login = SaslLogin(SaslCredentials("SCRAM-SHA-512", "rackguard", "s3cret"))
    server.set_client_first(login.first().decode())
    final = login.step(server.get_server_first().encode())
    assert final is not None
    with pytest.raises(scramp.ScramException):
        server.set_client_final(final.decode())
    # a forged server-final (wrong signature) is refused by the client
    with pytest.raises(SaslLoginError):
        login.step(b"v=AAAA")


def test_plain_is_rfc_4616() -> None:
    login = SaslLogin(SaslCredentials("PLAIN", "alice", "pw"))
    assert login.first() == b"\0alice\0pw"
    assert login.step(b"") is None and login.done


def test_oauthbearer_reads_the_token_file_at_each_login(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("eyJ.first\n")
    creds = SaslCredentials("OAUTHBEARER", token_file=token)
    assert SaslLogin(creds).first() == b"n,,\x01auth=Bearer eyJ.first\x01\x01"
    token.write_text("eyJ.second")
    login = SaslLogin(creds)
    assert b"eyJ.second" in login.first()
    assert login.step(b'{"status":"invalid_token"}') == b"\x01"  # RFC 7628 error challenge
    assert not login.done
    login = SaslLogin(creds)
    login.first()
    assert login.step(b"") is None and login.done


def test_oauthbearer_without_a_token_file() -> None:
    with pytest.raises(SaslLoginError):
        SaslLogin(SaslCredentials("OAUTHBEARER")).first()


def test_the_password_is_not_in_the_repr() -> None:
    assert "s3cret" not in repr(SaslCredentials("PLAIN", "alice", "s3cret"))
