"""rackguard's settings: one pydantic-settings model, four sources.

Invariant: precedence is CLI flags over ``RACKGUARD_*`` environment variables
over the TOML file named by ``--config`` over the defaults below; a
``Settings`` object is immutable once built, and every value in it has been
validated (an invalid one raises :class:`SettingsError` with one line naming
the setting).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

MAX_PORT = 65535
ENV_PREFIX = "RACKGUARD_"
KAFKA_MAX_ASSIGNED_ERROR_CODE = 133  # the highest error code Kafka assigns today


class SettingsError(ValueError):
    """An invalid setting; the message is one line naming it."""


def parse_host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    number = int(port)
    if not 0 < number <= MAX_PORT:
        raise ValueError(f"port out of range in {value!r}")
    return host.strip("[]"), number


def _parse_pairs(value: Any) -> Any:
    """'a=1,b=2' or ['a=1', 'b=2'] -> {'a': '1', 'b': '2'}; dicts pass through."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        out = {}
        for item in value:
            key, sep, val = str(item).partition("=")
            if not sep or not key.strip() or not val.strip():
                raise ValueError(f"expected KEY=VALUE, got {item!r}")
            out[key.strip()] = val.strip()
        return out
    return value


def _split_csv(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


class Settings(BaseSettings):
    """Every setting of rackguard. Field descriptions are the README's table."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="forbid", populate_by_name=True
    )

    upstream: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Bootstrap address(es) of the real Kafka cluster, HOST:PORT[,HOST:PORT...]",
        json_schema_extra={"metavar": "HOST:PORT[,...]"},
    )
    listen_host: str = Field(
        default="127.0.0.1", description="Address the proxy's listeners bind to"
    )
    advertised_host: str | None = Field(
        default=None,
        description="Host name clients are told to connect to (default: listen_host)",
    )
    bootstrap_port: int = Field(
        default=9092, ge=0, le=MAX_PORT, description="Bootstrap port (0: any free port)"
    )
    broker_port_base: int = Field(
        default=9100,
        ge=1,
        le=MAX_PORT,
        description="Broker with node id N is served on port broker_port_base + N",
    )
    max_frame_size: int = Field(
        default=100 * 1024 * 1024,
        ge=1024,
        description="Largest Kafka frame accepted from a client or broker, in bytes",
    )
    write_high_water: int = Field(
        default=4 * 1024 * 1024,
        ge=16 * 1024,
        description="Buffered bytes toward a peer at which the other side stops being read",
    )
    connect_timeout_ms: int = Field(
        default=10_000, ge=100, description="Timeout for connecting to an upstream broker"
    )
    admin_connect_timeout_ms: int = Field(
        default=1_000,
        ge=50,
        description="Timeout for the proxy's own connections to a broker (metadata and "
        "config reads), before it fails over to another",
    )
    admin_request_timeout_ms: int = Field(
        default=2_000,
        ge=50,
        description="Timeout for an answer to the proxy's own requests, before it fails "
        "over to another broker",
    )
    metadata_hedge_delay_ms: int = Field(
        default=500,
        ge=10,
        description="A metadata poll not answered within this also asks a broker in "
        "another rack, and takes the first answer",
    )
    upstream_backoff_ms: int = Field(
        default=500,
        ge=0,
        description="A broker that failed the proxy's own request is not asked again for "
        "this long, doubled per consecutive failure",
    )
    upstream_backoff_max_ms: int = Field(
        default=10_000,
        ge=0,
        description="Longest back-off of a failing broker",
    )
    shutdown_timeout_ms: int = Field(
        default=10_000,
        ge=0,
        description="On SIGTERM/SIGINT, how long in-flight requests may take to finish",
    )
    metadata_refresh_interval_ms: int = Field(
        default=2_000,
        ge=100,
        description="Interval of the proxy's own Metadata poll of the cluster",
    )
    min_insync_racks: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Racks an acks=all produce's ISR must span (1: no check, no cost)",
    )
    topic_min_insync_racks: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description="Per-topic min.insync.racks by exact name, NAME=N[,NAME=N...]",
    )
    topic_prefix_min_insync_racks: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description="Per-topic min.insync.racks by name prefix (longest prefix wins), "
        "PREFIX=N[,...]",
    )
    error_mode: Literal["compat", "dedicated"] = Field(
        default="compat",
        description="compat: reject with NOT_ENOUGH_REPLICAS (19) and a NOT_ENOUGH_RACKS "
        "message; dedicated: reject with not_enough_racks_code",
    )
    not_enough_racks_code: int = Field(
        default=1290,
        description="Error code of NOT_ENOUGH_RACKS in dedicated mode (must not be one "
        "Kafka assigns)",
    )
    observe: bool = Field(
        default=False, description="Decide and record, but forward everything (roll-out)"
    )
    max_metadata_age_ms: int = Field(
        default=10_000,
        ge=100,
        description="Beyond this metadata age, acks=all produces to topics needing > 1 "
        "rack fail closed (METADATA_STALE) unless fail_open",
    )
    fail_open: bool = Field(
        default=False, description="Forward instead of rejecting when metadata is stale"
    )
    unknown_partition_wait_ms: int = Field(
        default=2_000,
        ge=0,
        description="How long a produce naming a partition the proxy does not know waits "
        "for a metadata refresh",
    )
    topic_config_refresh_interval_ms: int = Field(
        default=30_000,
        ge=1_000,
        description="Interval of the proxy's DescribeConfigs read of min.insync.replicas",
    )
    config_topic: str = Field(
        default="__rackguard_configs",
        max_length=249,
        pattern=r"^[A-Za-z0-9._-]*$",
        description="Compacted topic holding min.insync.racks values set through the Admin "
        "API, shared by every rackguard (empty: no such topic, Admin-API changes refused)",
    )
    config_topic_read_only: bool = Field(
        default=False,
        description="Refuse min.insync.racks changes through the Admin API (the config topic "
        "is still read; DescribeConfigs shows the value)",
    )
    broker_racks: Annotated[dict[int, str], NoDecode] = Field(
        default_factory=dict,
        description="Operator-supplied racks for brokers that report none, ID=RACK[,...]",
    )
    broker_racks_override: bool = Field(
        default=False,
        description="Let broker_racks replace racks the brokers do report",
    )
    client_rack: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="Rack (zone) of the host the proxy runs on: filled into consumers' "
        "Fetch, JoinGroup and ConsumerGroupHeartbeat requests that name none (unset: "
        "nothing is changed)",
        json_schema_extra={"metavar": "RACK"},
    )
    client_rack_file: Path | None = Field(
        default=None,
        description="Read client_rack at start from this file (its first line), unless "
        "client_rack is given",
        json_schema_extra={"metavar": "PATH"},
    )
    client_rack_command: str | None = Field(
        default=None,
        description="Run this command at start (no shell) and take client_rack from its "
        "first line of output, e.g. a cloud metadata lookup, unless client_rack or "
        "client_rack_file is given",
        json_schema_extra={"metavar": "COMMAND"},
    )
    client_rack_mode: Literal["fill", "observe"] = Field(
        default="fill",
        description="fill: fill client_rack into requests that name no rack; observe: "
        "change nothing, only count fetch bytes by rack locality",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=MAX_PORT,
        description="Port of the Prometheus /metrics endpoint on listen_host (unset: off)",
    )
    metrics_partition_series: Literal["all", "at_or_under", "none"] = Field(
        default="at_or_under",
        description="Per-partition rack series on /metrics: all partitions, only those at "
        "or under their min.insync.racks, or none",
    )
    ledger_dir: Path | None = Field(
        default=None,
        description="Directory of the decision ledger and cluster snapshots (unset: no "
        "ledger)",
    )
    ledger_rotate_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=4096,
        description="A ledger file is closed and a new one started at this size, in bytes",
    )
    ledger_rotate_seconds: int = Field(
        default=3600,
        ge=1,
        description="A ledger file is closed and a new one started at this age, in seconds",
    )
    ledger_queue_size: int = Field(
        default=100_000,
        ge=1,
        description="Ledger rows waiting for the writer thread beyond which rows are dropped "
        "(and counted)",
    )
    ledger_snapshot_interval_ms: int = Field(
        default=30_000,
        ge=100,
        description="Interval of the cluster snapshots written to ledger_dir",
    )
    instance_id: str | None = Field(
        default=None,
        description="Name of this proxy in ledger rows and file names (default: "
        "HOSTNAME-BOOTSTRAP_PORT)",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="Log level"
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="Log line format: human-readable text or JSON"
    )
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

    @field_validator("upstream", mode="before")
    @classmethod
    def _upstream_csv(cls, value: Any) -> Any:
        return _split_csv(value)

    @field_validator("upstream")
    @classmethod
    def _upstream_valid(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            parse_host_port(item)
        return value

    @field_validator(
        "topic_min_insync_racks", "topic_prefix_min_insync_racks", "broker_racks",
        mode="before",
    )
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        return _parse_pairs(value)

    @field_validator("topic_min_insync_racks", "topic_prefix_min_insync_racks")
    @classmethod
    def _at_least_one(cls, value: dict[str, int]) -> dict[str, int]:
        for name, n in value.items():
            if n < 1:
                raise ValueError(f"min.insync.racks for {name!r} must be >= 1, got {n}")
        return value

    @field_validator("not_enough_racks_code")
    @classmethod
    def _free_code(cls, value: int) -> int:
        if -1 <= value <= KAFKA_MAX_ASSIGNED_ERROR_CODE or not -32768 <= value <= 32767:
            raise ValueError(
                f"{value} is taken by Kafka (codes -1..{KAFKA_MAX_ASSIGNED_ERROR_CODE}) or "
                "does not fit an int16"
            )
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _ports_fit(self) -> Settings:
        if self.advertised_host is None and self.listen_host in ("0.0.0.0", "::", ""):
            raise ValueError(
                "advertised_host: required when listen_host is a wildcard address"
            )
        return self

    @model_validator(mode="after")
    def _failover_fits_the_age_bound(self) -> Settings:
        # a poll must be able to give up on two brokers and still refresh in time
        attempt = self.admin_connect_timeout_ms + self.admin_request_timeout_ms
        if 2 * attempt > self.max_metadata_age_ms:
            raise ValueError(
                f"admin_connect_timeout_ms + admin_request_timeout_ms ({attempt} ms): two "
                f"failed attempts must fit in max_metadata_age_ms "
                f"({self.max_metadata_age_ms} ms)"
            )
        if self.metadata_hedge_delay_ms >= self.admin_request_timeout_ms:
            raise ValueError(
                f"metadata_hedge_delay_ms ({self.metadata_hedge_delay_ms}) must be below "
                f"admin_request_timeout_ms ({self.admin_request_timeout_ms})"
            )
        if self.upstream_backoff_max_ms < self.upstream_backoff_ms:
            raise ValueError("upstream_backoff_max_ms must be at least upstream_backoff_ms")
        return self

    @model_validator(mode="after")
    def _security_fits(self) -> Settings:
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

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.listen_host

    def upstream_addresses(self) -> list[tuple[str, int]]:
        return [parse_host_port(item) for item in self.upstream]

    def broker_port(self, node_id: int) -> int:
        port = self.broker_port_base + node_id
        if not 0 < port <= MAX_PORT or port == self.bootstrap_port:
            raise SettingsError(
                f"broker_port_base: node id {node_id} maps to port {port}, which is unusable"
            )
        return port

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml_path = _TOML_PATH.get("path")
        if toml_path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
        return tuple(sources)


# The TOML path is chosen per load; pydantic-settings builds sources from the
# class, so load_settings passes it through this one-slot holder.
_TOML_PATH: dict[str, Path | None] = {"path": None}


def load_settings(
    overrides: dict[str, Any] | None = None,
    config_file: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> Settings:
    """Build Settings from CLI overrides, the environment and an optional TOML file.

    ``env`` replaces ``os.environ`` as the environment source (for tests).
    """
    path = Path(config_file) if config_file is not None else None
    if path is not None and not path.is_file():
        raise SettingsError(f"config: file {str(path)!r} does not exist")
    # A dict given here must replace, not be merged into, a table from the TOML file
    # (pydantic-settings deep-merges dict values across sources); a read-only mapping
    # is not a dict to that merge but validates the same.
    clean: dict[str, Any] = {
        k: MappingProxyType(v) if isinstance(v, dict) else v
        for k, v in (overrides or {}).items()
        if v is not None
    }
    environment = os.environ if env is None else env
    unknown = sorted(
        key for key in environment
        if key.startswith(ENV_PREFIX) and key[len(ENV_PREFIX):].lower() not in Settings.model_fields
    )
    if unknown:
        raise SettingsError(f"invalid setting {unknown[0]}: no such setting (a typo?)")
    _TOML_PATH["path"] = path
    try:
        if env is not None:
            return _with_env(env, clean)
        return Settings(**clean)
    except ValidationError as exc:
        raise SettingsError(_one_line(exc)) from None
    except ValueError as exc:  # TOML syntax errors and the like
        raise SettingsError(f"config: {exc}") from None
    finally:
        _TOML_PATH["path"] = None


def _with_env(env: dict[str, str], overrides: dict[str, Any]) -> Settings:
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        return Settings(**overrides)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _one_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if not loc:  # a model-level check names its setting itself
        return f"invalid setting {msg}"
    if err.get("type") == "value_error":
        return f"invalid setting {loc}: {msg}"
    return f"invalid setting {loc}: {msg} (got {err.get('input')!r})"
