"""The rack-locality settings: the client rack and where it comes from."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class LocalityFields(BaseModel):
    """The host's rack, for clients that name none (docs/locality.md)."""

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
