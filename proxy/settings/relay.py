"""The relay's settings: listeners, the upstream cluster, timeouts and back-off."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import NoDecode

from proxy.settings.values import MAX_PORT, SettingsError, parse_host_port, split_csv


class RelayFields(BaseModel):
    """Where the proxy listens, which cluster it fronts, and how it talks to it."""

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
    metadata_refresh_interval_ms: int = Field(
        default=2_000,
        ge=100,
        description="Interval of the proxy's own Metadata poll of the cluster",
    )
    view_scope: Literal["watched", "cluster"] = Field(
        default="watched",
        description="watched: the proxy's view and polls cover the topics its clients "
        "use (a sidecar; cost per watched partition); cluster: every topic (a shared "
        "gateway, placement metrics; cost per cluster partition)",
    )
    watch_idle_ms: int = Field(
        default=600_000,
        ge=1_000,
        description="A topic no request has named for this long leaves the watched set "
        "(view_scope watched)",
    )

    @field_validator("upstream", mode="before")
    @classmethod
    def _upstream_csv(cls, value: Any) -> Any:
        return split_csv(value)

    @field_validator("upstream")
    @classmethod
    def _upstream_valid(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            parse_host_port(item)
        return value

    @model_validator(mode="after")
    def _ports_fit(self) -> Self:
        if self.advertised_host is None and self.listen_host in ("0.0.0.0", "::", ""):
            raise ValueError(
                "advertised_host: required when listen_host is a wildcard address"
            )
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
