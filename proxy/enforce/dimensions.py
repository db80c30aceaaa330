"""The rack rule over several dimensions: ``broker.rack`` split into named levels
(``eu-central-1/eu-central-1a`` into region and zone, or ``region=eu,zone=eu-1a``), and
a minimum of distinct in-sync values per level.

KIP-708's idea applied to brokers: a stretch cluster may need its in-sync replicas in
2 regions *and* 3 zones, which one count of distinct racks cannot say (three zones of
one region are three racks). The single-dimension rule (``min.insync.racks``, every rack
string a value) stays the default and is untouched by this module.

Forms of a rack, per :class:`RackDimensions`:

- ``names`` with a ``separator`` (``region/zone``, separator ``/``): the rack's parts in
  order (``eu-central-1/eu-central-1a``); a rack with fewer parts has no value for the
  missing levels;
- key=value pairs (``region=eu-central-1,zone=eu-central-1a``, pairs separated by ``,``):
  read when the rack contains ``=``, whatever the order.

A broker without a rack, or a rack without a value for a level, counts as the value
``""`` of that level (as a rackless broker counts as the rack ``""`` in the
single-dimension rule).

Invariant: pure functions over strings and tuples; no I/O, no state. The refusal names
the first dimension (in the order the minimums are given) that falls short.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


class DimensionError(ValueError):
    """A dimension spec or minimum that cannot be used; the message says which."""


@dataclass(frozen=True, slots=True)
class RackDimensions:
    names: tuple[str, ...]
    separator: str = "/"

    @classmethod
    def parse(cls, spec: str) -> RackDimensions:
        """``region/zone`` (the separator is the first non-name character, ``/`` by
        default): the level names in the order a rack string lists its parts."""
        spec = spec.strip()
        sep = next((c for c in spec if not (c.isalnum() or c in "_-.")), "/")
        names = tuple(n.strip() for n in spec.split(sep))
        if not spec or any(not n for n in names):
            raise DimensionError(f"rack dimensions {spec!r}: give names like region{sep}zone")
        if len(set(names)) != len(names):
            raise DimensionError(f"rack dimensions {spec!r}: a name is given twice")
        return cls(names, sep)

    def values(self, rack: str | None) -> dict[str, str]:
        """The rack's value for each level (``""`` where it has none)."""
        if not rack:
            return dict.fromkeys(self.names, "")
        if "=" in rack:
            pairs = dict(p.split("=", 1) for p in rack.split(",") if "=" in p)
            return {n: pairs.get(n, "").strip() for n in self.names}
        parts = rack.split(self.separator)
        return {n: parts[i].strip() if i < len(parts) else "" for i, n in
                enumerate(self.names)}


def parse_minimums(text: str, dims: RackDimensions) -> dict[str, int]:
    """``region=2,zone=3``: the distinct in-sync values each named level needs."""
    out: dict[str, int] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, sep, number = item.partition("=")
        name = name.strip()
        if not sep or name not in dims.names:
            raise DimensionError(f"{item!r}: give DIMENSION=N with DIMENSION one of "
                                 f"{', '.join(dims.names)}")
        try:
            n = int(number)
        except ValueError:
            raise DimensionError(f"{item!r}: N must be an integer") from None
        if n < 1:
            raise DimensionError(f"{item!r}: N must be >= 1")
        out[name] = n
    return out


@dataclass(frozen=True, slots=True)
class Shortfall:
    """The first dimension whose in-sync values are too few."""

    dimension: str
    values: tuple[str, ...]  # the distinct values the ISR spans in it, sorted
    required: int

    def message(self, topic: str, partition: int, isr: Sequence[int]) -> str:
        seen = ",".join(repr(v) if v == "" else v for v in self.values) or "none"
        return (f"NOT_ENOUGH_RACKS: {topic}-{partition}: in-sync replicas {list(isr)} span "
                f"{len(self.values)} {self.dimension}(s) [{seen}], min.insync.racks."
                f"{self.dimension}={self.required}")


def distinct_values(racks: Iterable[str | None], dims: RackDimensions,
                    levels: Iterable[str]) -> dict[str, set[str]]:
    """The distinct values of each of ``levels`` among ``racks`` (a rack without a value
    for a level counts as the value ``""``, as the rule counts it)."""
    per_level: dict[str, set[str]] = {n: set() for n in levels}
    for rack in racks:
        values = dims.values(rack)
        for name, seen in per_level.items():
            seen.add(values.get(name, ""))
    return per_level


def shortfall(isr_racks: Iterable[str | None], dims: RackDimensions,
              minimums: Mapping[str, int]) -> Shortfall | None:
    """None when the ISR's racks span every level's minimum; else the first level (in
    ``minimums``' order) that falls short."""
    per_level = distinct_values(isr_racks, dims, minimums)
    for name, required in minimums.items():
        if required > 1 and len(per_level[name]) < required:
            return Shortfall(name, tuple(sorted(per_level[name])), required)
    return None


def placement_shortfall(replica_racks: Iterable[str | None], dims: RackDimensions,
                        minimums: Mapping[str, int]) -> Shortfall | None:
    """The same over a partition's replicas: a partition whose replicas span too few
    values of a level can never meet its minimum (unsatisfiable), whatever the ISR."""
    return shortfall(replica_racks, dims, minimums)
