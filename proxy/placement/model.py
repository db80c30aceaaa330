"""The frozen inputs of the placement audit and planner.

Invariant: plain values only (no cluster view, no I/O), so every source (the
proxy's cluster view, a live Metadata answer, a ledger snapshot, an
assignment file) is turned into these once and the logic is tested with
literals. Racks are counted as the rack rule counts them (docs/enforcement.md, "The rule"):
a broker without a rack counts as the rack ``""``; a replica on a broker not in
the broker map (gone, or never seen) counts as no rack at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

NO_RACK = ""
NO_RACK_LABEL = "(none)"  # how the rack "" is printed


@dataclass(frozen=True, slots=True)
class PartitionReplicas:
    """One partition's assignment: ``replicas`` preferred leader first; ``leader`` the
    current leader (-1: none, as in Metadata); ``offline`` the replicas Metadata
    reports offline."""

    replicas: tuple[int, ...]
    leader: int = -1
    offline: tuple[int, ...] = ()


Racks = Mapping[int, str | None]  # broker id -> rack (None: the broker has no rack)
Topics = Mapping[str, Mapping[int, PartitionReplicas]]


def counted_rack(racks: Racks, broker: int) -> str | None:
    """The rack a replica on ``broker`` counts for; None for a broker not in ``racks``."""
    if broker not in racks:
        return None
    rack = racks[broker]
    return NO_RACK if rack is None else rack


def replica_racks(racks: Racks, replicas: Iterable[int]) -> frozenset[str]:
    """Distinct racks the replicas span (brokers not in ``racks`` count for none)."""
    out = set()
    for broker in replicas:
        rack = counted_rack(racks, broker)
        if rack is not None:
            out.add(rack)
    return frozenset(out)


def rack_label(rack: str) -> str:
    return rack if rack != NO_RACK else NO_RACK_LABEL
