"""From the settings model to the security values the rest of the proxy uses.

Invariants: pure functions of :class:`Settings` (the password file is read by
the credentials when a login starts, not here); the password leaves its
``SecretStr`` only inside :class:`SaslCredentials`, whose repr omits it.
"""

from __future__ import annotations

from pathlib import Path

from proxy.security.sasl_login import SaslCredentials, SaslLoginError
from proxy.security.tls import VERSIONS, ServerTls, UpstreamTls
from proxy.settings import Settings


def server_tls(settings: Settings) -> ServerTls | None:
    """What the listeners present, or None for plaintext listeners."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    return ServerTls(settings.tls_cert, settings.tls_key, settings.tls_client_ca,
                     settings.tls_ciphers, VERSIONS[settings.tls_min_version])


def upstream_tls(settings: Settings) -> UpstreamTls | None:
    """How upstream connections speak TLS, or None when the brokers' listener is plaintext."""
    if settings.security_protocol not in ("SSL", "SASL_SSL"):
        return None
    return UpstreamTls(settings.ssl_cafile, settings.ssl_certfile,
                       settings.ssl_keyfile, not settings.ssl_skip_hostname_check,
                       settings.ssl_ciphers, VERSIONS[settings.ssl_min_version])


def relays_client_sasl(settings: Settings) -> bool:
    """Clients authenticate themselves to the brokers through the proxy."""
    return settings.security_protocol.startswith("SASL_")


def read_password(settings: Settings) -> str:
    if settings.sasl_password_file is not None:
        return _read_secret(settings.sasl_password_file)
    if settings.sasl_password is not None:
        return settings.sasl_password.get_secret_value()
    return ""


def sasl_credentials(settings: Settings) -> SaslCredentials | None:
    """The proxy's own credentials (the password file read now), or None without SASL."""
    if not relays_client_sasl(settings):
        return None
    return SaslCredentials(settings.sasl_mechanism, settings.sasl_username or "",
                           read_password(settings), settings.sasl_oauthbearer_token_file)


def _read_secret(path: Path) -> str:
    try:
        return path.read_text().rstrip("\r\n")
    except OSError as exc:
        raise SaslLoginError(f"{path}: {exc.strerror or exc}") from None
