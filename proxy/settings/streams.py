"""The Kafka Streams audit's settings (docs/streams.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

from proxy.settings.values import split_csv


class StreamsFields(BaseModel):
    """What the proxy reads of Kafka Streams' rebalances (KIP-708 standby spread)."""

    streams_audit: Literal["on", "off"] = Field(
        default="on",
        description="on: read Kafka Streams' JoinGroup and SyncGroup data as it passes "
        "(nothing is changed) and export the standby spread of the applications whose "
        "group leader comes through this proxy; off: leave them unread",
    )
    streams_tags: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="The client tag keys Kafka Streams' assignor uses "
        "(rack.aware.assignment.tags), KEY[,KEY...]; empty: every key the instances carry",
        json_schema_extra={"metavar": "KEY[,KEY...]"},
    )
    streams_zone_tag: str = Field(
        default="zone",
        min_length=1,
        max_length=255,
        description="The client tag that names a Kafka Streams instance's zone: an "
        "instance behind this proxy whose value differs from client_rack is reported "
        "(a configuration copied from another zone)",
        json_schema_extra={"metavar": "KEY"},
    )

    @field_validator("streams_tags", mode="before")
    @classmethod
    def _tags_csv(cls, value: Any) -> Any:
        return split_csv(value)
