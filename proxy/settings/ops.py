"""Operations' settings: the metrics endpoint, the decision ledger, logging, the drain."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from proxy.settings.values import MAX_PORT


class OpsFields(BaseModel):
    """Metrics, the decision ledger and logs."""

    metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=MAX_PORT,
        description="Port of the Prometheus /metrics endpoint on listen_host (unset: off)",
    )
    metrics_host: str | None = Field(
        default=None,
        description="Address the operations endpoint (/metrics, /healthz, /readyz) binds "
        "to (default: listen_host); in a pod, 0.0.0.0 for the kubelet's probes and "
        "Prometheus while the Kafka listeners stay on 127.0.0.1",
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
        description="Interval of the ledger's ticks (the proxy was up, on this view); the "
        "view itself is written when it changes",
    )
    ledger_flush_interval_ms: int = Field(
        default=5000,
        ge=10,
        le=60_000,
        description="The ledger's writer appends what is queued this often (and sooner "
        "when half of ledger_queue_size is queued): a crash loses at most this interval's "
        "rows; a flush costs mostly a fixed amount, so a shorter interval costs more CPU",
    )
    ledger_max_bytes: int | None = Field(
        default=1024 * 1024 * 1024,
        ge=1024 * 1024,
        description="The oldest closed ledger files are deleted while this instance's files "
        "exceed this size, in bytes (unset: no bound)",
    )
    ledger_max_age_seconds: int | None = Field(
        default=7 * 24 * 3600,
        ge=60,
        description="Closed ledger files older than this are deleted, in seconds (unset: "
        "kept)",
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
    config_watch_interval_ms: int = Field(
        default=5_000,
        ge=0,
        description="How often the --config file is checked for a new content, applied as "
        "on SIGHUP (a mounted ConfigMap's change without a restart; 0: only on SIGHUP)",
    )
    drain_timeout_ms: int = Field(
        default=10_000,
        ge=0,
        description="On SIGTERM/SIGINT the proxy stops accepting and reading requests, "
        "answers those in flight and closes each connection once answered; past this, the "
        "rest are closed and it exits (keep terminationGracePeriodSeconds above it)",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value
