"""The loss watch's settings (docs/losswatch.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class LossWatchFields(BaseModel):
    """The live watch for acknowledged records Kafka lost."""

    loss_watch: Literal["on", "off"] = Field(
        default="on",
        description="Watch for acknowledged records the cluster lost (the highest "
        "acknowledged offsets per written partition, checked against the leader after "
        "every leader change): on or off",
    )
    loss_watch_idle_ms: int = Field(
        default=3_600_000,
        ge=1000,
        description="A partition not written through the proxy for this long is no longer "
        "tracked by the loss watch (unless it is being checked)",
    )
    loss_watch_check_interval_ms: int = Field(
        default=60_000,
        ge=0,
        description="Interval of the loss watch's periodic check of partitions written "
        "within it (0: off; leader changes in the view are checked at once either way)",
    )
    loss_watch_confirm_delay_ms: int = Field(
        default=2000,
        ge=100,
        description="Time between the two readings of a partition's leader that a loss "
        "must survive before it is reported",
    )
