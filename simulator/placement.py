"""Rack-aware round-robin replica placement for the simulator (a TEST DOUBLE).

Invariant: pure functions of their arguments. For every partition the
replica list has `replication_factor` distinct brokers, and the replicas span
min(replication_factor, number of racks) racks. Brokers without a rack all
count as the one rack "" (as in the rackguard rule). Leaders (first replicas)
rotate over the rack-alternated broker list, so they spread across racks.
"""

from __future__ import annotations

from collections.abc import Sequence


def rack_key(rack: str | None) -> str:
    """The rack a broker counts as: rackless brokers share the rack ""."""
    return rack or ""


def rack_alternated(brokers: Sequence[tuple[int, str | None]]) -> list[int]:
    """Broker ids ordered rack by rack in turn: a1, b1, c1, a2, b2, c2, ...

    Racks are taken in sorted order, brokers within a rack by node id.
    """
    by_rack: dict[str, list[int]] = {}
    for node_id, rack in sorted(brokers):
        by_rack.setdefault(rack_key(rack), []).append(node_id)
    columns = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    depth = max((len(c) for c in columns), default=0)
    for i in range(depth):
        out.extend(c[i] for c in columns if i < len(c))
    return out


def assign_replicas(
    brokers: Sequence[tuple[int, str | None]],
    partitions: int,
    replication_factor: int,
    start_index: int = 0,
) -> list[list[int]]:
    """Replica lists (preferred leader first) for `partitions` partitions.

    `brokers` is (node_id, rack) for every broker that may hold a replica.
    Raises ValueError when the replication factor cannot be met.
    """
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    if replication_factor < 1:
        raise ValueError("replication factor must be >= 1")
    if replication_factor > len(brokers):
        raise ValueError(
            f"replication factor {replication_factor} larger than the "
            f"{len(brokers)} available brokers"
        )
    racks = {node_id: rack_key(rack) for node_id, rack in brokers}
    ordered = rack_alternated(brokers)
    n = len(ordered)
    assignment: list[list[int]] = []
    for p in range(partitions):
        first = (start_index + p) % n
        # Shift followers by round so that the same pairs don't always co-locate.
        shift = ((start_index + p) // n) % max(n - 1, 1)
        chosen = [ordered[first]]
        per_rack = {racks[ordered[first]]: 1}
        while len(chosen) < replication_factor:
            best: int | None = None
            best_load = 0
            for k in range(n):
                cand = ordered[(first + 1 + shift + k) % n]
                if cand in chosen:
                    continue
                load = per_rack.get(racks[cand], 0)
                if best is None or load < best_load:
                    best, best_load = cand, load
            assert best is not None
            chosen.append(best)
            per_rack[racks[best]] = per_rack.get(racks[best], 0) + 1
        assignment.append(chosen)
    return assignment
