"""The rack rule over several dimensions: how broker.rack splits into named levels, and
the distinct in-sync values each level needs (docs/enforcement.md)."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import NoDecode

from proxy.settings.values import parse_pairs


class DimensionFields(BaseModel):
    """Unset (the default), the rack rule is the single-dimension min.insync.racks."""

    rack_dimensions: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="How broker.rack splits into named dimensions, e.g. region/zone for "
        "racks like eu-central-1/eu-central-1a (racks of key=value pairs, "
        "region=...,zone=..., are read by name); unset: racks are one dimension",
        json_schema_extra={"metavar": "NAME/NAME"},
    )
    min_insync_racks_by_dimension: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description="Distinct in-sync values an acks=all produce's ISR must span per "
        "dimension, for every topic, DIMENSION=N[,...] (needs rack_dimensions)",
    )
    topic_min_insync_racks_by_dimension: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description="The same per topic, TOPIC/DIMENSION=N[,...] (a topic's own values "
        "replace the defaults of every dimension)",
    )

    @field_validator("min_insync_racks_by_dimension", "topic_min_insync_racks_by_dimension",
                     mode="before")
    @classmethod
    def _dimension_pairs(cls, value: Any) -> Any:
        return parse_pairs(value)

    @model_validator(mode="after")
    def _dimensions_known(self) -> Self:
        from proxy.enforce.dimensions import DimensionError, RackDimensions

        given = {**self.min_insync_racks_by_dimension,
                 **{k.rpartition("/")[2]: v
                    for k, v in self.topic_min_insync_racks_by_dimension.items()}}
        if not given:
            return self
        if self.rack_dimensions is None:
            raise ValueError("min_insync_racks_by_dimension and "
                             "topic_min_insync_racks_by_dimension need rack_dimensions")
        try:
            dims = RackDimensions.parse(self.rack_dimensions)
        except DimensionError as exc:
            raise ValueError(f"rack_dimensions: {exc}") from None
        for key in self.topic_min_insync_racks_by_dimension:
            if "/" not in key:
                raise ValueError(f"topic_min_insync_racks_by_dimension: {key!r} is not "
                                 "TOPIC/DIMENSION")
        for name, n in given.items():
            if name not in dims.names:
                raise ValueError(f"min.insync.racks by dimension: {name!r} is not one of "
                                 f"rack_dimensions {', '.join(dims.names)}")
            if n < 1:
                raise ValueError(f"min.insync.racks.{name} must be >= 1, got {n}")
        return self
