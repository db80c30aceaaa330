"""The security settings: secrets never a flag and never printed, the checks at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.cli import SERVE_FLAGS, build_parser
from proxy.security.settings_map import (
    relays_client_sasl,
    sasl_credentials,
    server_tls,
    upstream_tls,
)
from proxy.settings import SettingsError, load_settings

BASE = {"upstream": "k:9092"}
SASL = {**BASE, "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "rackguard"}


def test_the_password_has_no_flag() -> None:
    assert "sasl_password" not in {field for field, _ in SERVE_FLAGS.values()}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--sasl-password", "x"])


def test_the_password_from_the_environment_is_redacted_when_printed() -> None:
    settings = load_settings(SASL, env={"RACKGUARD_SASL_PASSWORD": "hunter2"})
    assert "hunter2" not in repr(settings) and "hunter2" not in str(settings)
    assert "hunter2" not in str(settings.model_dump())
    credentials = sasl_credentials(settings)
    assert credentials is not None and credentials.password == "hunter2"
    assert "hunter2" not in repr(credentials)


def test_the_password_file_wins_and_is_read_when_asked(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    settings = load_settings({**SASL, "sasl_password_file": str(secret)},
                             env={"RACKGUARD_SASL_PASSWORD": "from-env"})
    assert sasl_credentials(settings).password == "from-file"  # type: ignore[union-attr]
    secret.write_text("rotated\n")
    assert sasl_credentials(settings).password == "rotated"  # type: ignore[union-attr]


@pytest.mark.parametrize(("overrides", "named"), [
    ({"tls_cert": "/c.pem"}, "tls_cert and tls_key"),
    ({"tls_client_ca": "/ca.pem"}, "tls_client_ca"),
    ({"ssl_keyfile": "/k.pem"}, "ssl_keyfile"),
    ({"security_protocol": "SASL_PLAINTEXT"}, "sasl_username"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"},
     "sasl_oauthbearer_token_file"),
])
def test_incomplete_security_settings_are_refused_naming_the_setting(
        overrides: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        load_settings({**BASE, **overrides}, env={})


def test_what_each_protocol_turns_on() -> None:
    plain = load_settings(BASE, env={})
    assert (server_tls(plain), upstream_tls(plain), relays_client_sasl(plain)) == \
        (None, None, False)
    ssl = load_settings({**BASE, "security_protocol": "SSL", "tls_cert": "/c", "tls_key": "/k",
                         "ssl_skip_hostname_check": True}, env={})
    tls = upstream_tls(ssl)
    assert tls is not None and not tls.check_hostname
    assert server_tls(ssl) is not None and not relays_client_sasl(ssl)
    sasl = load_settings(SASL, env={"RACKGUARD_SASL_PASSWORD": "pw"})
    assert relays_client_sasl(sasl) and upstream_tls(sasl) is not None
    assert upstream_tls(sasl).check_hostname  # type: ignore[union-attr]


def test_an_unusable_certificate_refuses_the_start_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from proxy.cli import _serve, run_loop

    missing = tmp_path / "missing.pem"
    settings = load_settings({**BASE, "bootstrap_port": 0, "tls_cert": str(missing),
                              "tls_key": str(missing)}, env={})
    code = run_loop(_serve(settings, lambda: settings))  # as `rackguard serve` runs it
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().count("\n") == 0 and str(missing) in err and "TLS" in err
