"""The security settings (docs/security.md): TLS toward clients, the brokers' listener
(TLS, SASL for the proxy's own connections), and the limits on clients."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, Field, SecretStr, model_validator


class SecurityFields(BaseModel):
    """TLS toward clients, TLS and SASL toward the brokers, and the limits on clients."""

    # ----- TLS toward clients (docs/security.md)
    tls_cert: Path | None = Field(
        default=None,
        description="PEM certificate (chain) the listeners present; set with tls_key to "
        "speak TLS to clients (unset: plaintext)",
        json_schema_extra={"metavar": "FILE"},
    )
    tls_key: Path | None = Field(
        default=None, description="PEM private key of tls_cert",
        json_schema_extra={"metavar": "FILE"},
    )
    tls_client_ca: Path | None = Field(
        default=None,
        description="PEM CA bundle: clients must present a certificate it signed (mTLS)",
        json_schema_extra={"metavar": "FILE"},
    )
    tls_ciphers: str | None = Field(
        default=None,
        description="OpenSSL cipher string for the listeners (TLS 1.2; unset: Python's "
        "defaults)",
    )
    tls_min_version: Literal["1.2", "1.3"] = Field(
        default="1.2", description="Oldest TLS version the listeners accept",
    )
    tls_reload_interval_ms: int = Field(
        default=5_000,
        ge=100,
        description="How often the listeners' certificate, key and client CA files are "
        "checked for changes (also reloaded on SIGHUP)",
    )
    # ----- the brokers' listener: TLS on every upstream connection, SASL for the proxy's own
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT",
        description="Protocol of the brokers' listener: SSL and SASL_SSL use TLS on every "
        "upstream connection; SASL_* logs the proxy's own connections in with sasl_* and "
        "relays each client's own SASL exchange",
    )
    ssl_cafile: Path | None = Field(
        default=None,
        description="PEM CA bundle that signs the brokers' certificates (unset: the system's "
        "trust store)",
        json_schema_extra={"metavar": "FILE"},
    )
    ssl_certfile: Path | None = Field(
        default=None,
        description="PEM client certificate the proxy presents to brokers that require one",
        json_schema_extra={"metavar": "FILE"},
    )
    ssl_keyfile: Path | None = Field(
        default=None, description="PEM private key of ssl_certfile (unset: in ssl_certfile)",
        json_schema_extra={"metavar": "FILE"},
    )
    ssl_ciphers: str | None = Field(
        default=None,
        description="OpenSSL cipher string toward brokers (unset: Python's defaults)",
    )
    ssl_min_version: Literal["1.2", "1.3"] = Field(
        default="1.2", description="Oldest TLS version spoken to brokers",
    )
    ssl_skip_hostname_check: bool = Field(
        default=False,
        description="Do not check that a broker's certificate names its advertised host "
        "(the chain is still verified; logged as a warning at start)",
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] = Field(
        default="PLAIN", description="SASL mechanism of the proxy's own connections",
    )
    sasl_username: str | None = Field(
        default=None, description="User name of the proxy's own connections",
    )
    sasl_password: SecretStr | None = Field(
        default=None,
        description="Password of the proxy's own connections: from the environment or the "
        "TOML file only, never a flag (redacted when printed)",
        json_schema_extra={"flag": False},
    )
    sasl_password_file: Path | None = Field(
        default=None,
        description="File holding the password (read at each login; wins over sasl_password)",
        json_schema_extra={"metavar": "FILE"},
    )
    sasl_oauthbearer_token_file: Path | None = Field(
        default=None,
        description="File holding the OAUTHBEARER token (read at each login)",
        json_schema_extra={"metavar": "FILE"},
    )
    # ----- limits
    max_connections: int = Field(
        default=10_000, ge=0,
        description="Client connections open at once, beyond which new ones are closed at "
        "once (0: no limit)",
    )
    max_connections_per_client: int = Field(
        default=0, ge=0,
        description="Client connections open at once from one address (0: no limit; a "
        "sidecar's clients share one address)",
    )
    first_request_timeout_ms: int = Field(
        default=30_000, ge=100,
        description="A client connection that has not completed its TLS handshake and one "
        "request within this is closed",
    )
    bad_input_log_interval_ms: int = Field(
        default=10_000, ge=100,
        description="Bad input is logged once per client address and reason, then "
        "summarised with a count at this interval",
    )

    @model_validator(mode="after")
    def _security_fits(self) -> Self:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key: give both or neither")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("tls_client_ca: needs tls_cert and tls_key (mTLS is TLS)")
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            raise ValueError("ssl_keyfile: needs ssl_certfile")
        if self.security_protocol.startswith("SASL_"):
            if self.sasl_mechanism == "OAUTHBEARER":
                if self.sasl_oauthbearer_token_file is None:
                    raise ValueError("sasl_oauthbearer_token_file: required by OAUTHBEARER")
            elif self.sasl_username is None or (
                    self.sasl_password is None and self.sasl_password_file is None):
                raise ValueError(f"sasl_username and sasl_password (or sasl_password_file): "
                                 f"required by {self.security_protocol} with "
                                 f"{self.sasl_mechanism}")
        return self
