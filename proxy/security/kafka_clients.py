"""The proxy's own TLS and SASL settings as client library options (aiokafka), for the
config topic's producer, consumer and admin client (proxy/admin/store.py).

Invariants: a pure function of the settings but for the secret files: the password file
is read when the options are built (aiokafka takes a string), the OAUTHBEARER token
file at every login (the token provider reads it); nothing here logs a secret.
"""

from __future__ import annotations

from typing import Any

from aiokafka.abc import AbstractTokenProvider

from proxy.security.sasl_login import SaslCredentials
from proxy.security.settings_map import sasl_credentials, upstream_tls
from proxy.security.tls import upstream_context
from proxy.settings import Settings


class _TokenFile(AbstractTokenProvider):
    """The OAUTHBEARER token, read from its file at each login."""

    def __init__(self, credentials: SaslCredentials) -> None:
        self._credentials = credentials

    async def token(self) -> str:
        return self._credentials.token()


def aiokafka_options(settings: Settings) -> dict[str, Any]:
    """security_protocol, ssl_context and sasl_* options for an aiokafka client."""
    options: dict[str, Any] = {"security_protocol": settings.security_protocol}
    tls = upstream_tls(settings)
    if tls is not None:
        options["ssl_context"] = upstream_context(tls)
    credentials = sasl_credentials(settings)
    if credentials is not None:
        options["sasl_mechanism"] = credentials.mechanism
        if credentials.mechanism == "OAUTHBEARER":
            options["sasl_oauth_token_provider"] = _TokenFile(credentials)
        else:
            options["sasl_plain_username"] = credentials.username
            options["sasl_plain_password"] = credentials.password
    return options
