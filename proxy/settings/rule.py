"""The rule's settings: min.insync.racks and its overrides, the answer to a refused
produce, the metadata age bound, the config topic and broker racks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

from proxy.settings.values import KAFKA_MAX_ASSIGNED_ERROR_CODE, parse_pairs


class RuleFields(BaseModel):
    """The rack rule (min.insync.racks), its error mode and the cluster facts it reads."""

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
    ack_recheck_after_ms: int = Field(
        default=500,
        ge=0,
        description="Enforcing mode: an acks=all answer slower than this makes its "
        "partitions suspect: their answers and produces wait for metadata fetched after it, "
        "and a success the rule would then refuse becomes NOT_ENOUGH_REPLICAS_AFTER_APPEND; "
        "a produce sent to a broker the view does not show as leader waits for a lookup "
        "too; 0: off",
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

    @field_validator(
        "topic_min_insync_racks", "topic_prefix_min_insync_racks", "broker_racks",
        mode="before",
    )
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        return parse_pairs(value)

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
