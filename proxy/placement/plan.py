"""The placement planner's ``--fix``: the fewest replica moves to span enough racks.

Invariant: a pure function of frozen inputs (see :mod:`.model`). For every
partition of a topic with ``N = required(topic)`` (``RF`` replicas, ``R``
racks spanned now, ``K`` racks in the cluster) the target is ``N``, raised to
``N + 1`` where ``RF`` and ``K`` allow (``spare``: one rack loss then leaves
``N``). A partition below its target gets exactly ``target - R`` moves, the
minimum (a move adds at most one rack): each move replaces, in place, one
replica that adds no rack (on a broker the map does not know, or sharing its
rack with another replica) by a broker of a rack the partition lacks. In
place means the replica list keeps its order, so the preferred leader (first
replica) stays unless it is itself on an unknown broker. Among the choices,
the source is the follower on the most loaded broker of the most crowded
rack, the destination the least loaded broker (replicas, then leaders) of a
missing rack, so replicas and leaders stay balanced per broker; loads are
updated as moves are planned. Nothing else moves.

``PlacementError`` refuses a request no move can satisfy: a topic requires
more racks than the cluster has. A partition with fewer replicas than ``N``
cannot be fixed by moves (its replication factor must grow); it is reported
in ``Plan.unfixable`` and left out of the plan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from proxy.placement.kip36 import PlacementError
from proxy.placement.model import (
    PartitionReplicas,
    Racks,
    Topics,
    counted_rack,
    replica_racks,
)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Reassignment:
    topic: str
    partition: int
    before: tuple[int, ...]
    after: tuple[int, ...]
    racks_before: int
    racks_after: int
    size_bytes: int | None  # the partition's size, where the cluster reported it

    @property
    def moves(self) -> int:
        return len(set(self.after) - set(self.before))

    @property
    def bytes_to_move(self) -> int | None:
        return None if self.size_bytes is None else self.size_bytes * self.moves


@dataclass(frozen=True, slots=True)
class Unfixable:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    required: int
    reason: str


@dataclass(frozen=True, slots=True)
class Plan:
    reassignments: tuple[Reassignment, ...]
    unfixable: tuple[Unfixable, ...]

    @property
    def moves(self) -> int:
        return sum(r.moves for r in self.reassignments)

    @property
    def bytes_to_move(self) -> int | None:
        """Total bytes to copy; None when some moved partition's size is unknown."""
        sizes = [r.bytes_to_move for r in self.reassignments]
        return None if any(s is None for s in sizes) else sum(s or 0 for s in sizes)

    def reassignment_json(self) -> dict[str, Any]:
        """The input of ``kafka-reassign-partitions.sh --execute``."""
        return reassignment_file((r.topic, r.partition, r.after) for r in self.reassignments)

    def rollback_json(self) -> dict[str, Any]:
        """The current assignment of every partition the plan moves."""
        return reassignment_file((r.topic, r.partition, r.before) for r in self.reassignments)


def reassignment_file(rows: Any) -> dict[str, Any]:
    return {"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": list(replicas)}
        for topic, partition, replicas in rows]}


def target_racks(required: int, replication_factor: int, cluster_racks: int,
                 spare: bool) -> int:
    if not spare:
        return required
    return max(required, min(required + 1, replication_factor, cluster_racks))


def plan_fix(
    racks: Racks,
    topics: Topics,
    required: Callable[[str], int],
    spare: bool = True,
    sizes: Mapping[TopicPartition, int] | None = None,
) -> Plan:
    """Reassignments that bring every partition to its target racks with fewest moves."""
    rack_names = {counted_rack(racks, b) or "" for b in racks}
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(counted_rack(racks, broker) or "", []).append(broker)
    too_many = sorted((required(t), t) for t in topics if required(t) > len(rack_names))
    if too_many:
        n, topic = too_many[-1]
        raise PlacementError(
            f"min.insync.racks {n} (topic {topic!r}) is more than the {len(rack_names)} "
            f"racks of the cluster ({', '.join(sorted(rack_names)) or 'none'}): "
            "no placement can satisfy it")
    loads: Counter[int] = Counter(dict.fromkeys(racks, 0))
    leaders: Counter[int] = Counter(dict.fromkeys(racks, 0))
    for partitions in topics.values():
        for p in partitions.values():
            loads.update(b for b in p.replicas if b in racks)
            if p.replicas and p.replicas[0] in racks:
                leaders[p.replicas[0]] += 1
    out: list[Reassignment] = []
    unfixable: list[Unfixable] = []
    for name in sorted(topics):
        n = required(name)
        for index in sorted(topics[name]):
            p = topics[name][index]
            rf = len(p.replicas)
            if rf < n:
                unfixable.append(Unfixable(
                    name, index, p.replicas, n,
                    f"{rf} replica(s) cannot span {n} racks: raise the replication factor"))
                continue
            goal = target_racks(n, rf, len(rack_names), spare)
            before = len(replica_racks(racks, p.replicas))
            if before >= goal:
                continue
            after = _fix_partition(p, goal, racks, by_rack, loads, leaders)
            size = (sizes or {}).get((name, index))
            out.append(Reassignment(name, index, p.replicas, after, before,
                                    len(replica_racks(racks, after)), size))
    return Plan(tuple(out), tuple(unfixable))


def _fix_partition(
    p: PartitionReplicas,
    goal: int,
    racks: Racks,
    by_rack: Mapping[str, list[int]],
    loads: Counter[int],
    leaders: Counter[int],
) -> tuple[int, ...]:
    replicas = list(p.replicas)
    while len(replica_racks(racks, replicas)) < goal:
        position = _source(replicas, racks, loads)
        have = replica_racks(racks, replicas)
        is_leader = position == 0
        candidates = [b for rack, brokers in by_rack.items() if rack not in have
                      for b in brokers]
        dest = min(candidates, key=lambda b: (
            (leaders[b], loads[b]) if is_leader else (loads[b], leaders[b]), b))
        old = replicas[position]
        if old in racks:
            loads[old] -= 1
            if is_leader:
                leaders[old] -= 1
        loads[dest] += 1
        if is_leader:
            leaders[dest] += 1
        replicas[position] = dest
    return tuple(replicas)


def _source(replicas: list[int], racks: Racks, loads: Counter[int]) -> int:
    """Position of the replica to move: one adding no rack, a follower where possible."""
    per_rack = Counter(counted_rack(racks, b) for b in replicas)
    movable = []
    for position, broker in enumerate(replicas):
        rack = counted_rack(racks, broker)
        if rack is None:  # a broker the map does not know: moving it loses nothing
            movable.append((0, position != 0, 0, 0, position))
        elif per_rack[rack] > 1:
            movable.append((1, position != 0, per_rack[rack], loads[broker], position))
    if not movable:  # cannot happen while the goal is at most RF and the cluster's racks
        raise PlacementError(f"no replica of {replicas} can move without losing a rack")
    # unknown brokers first, then followers, the most crowded rack, the most loaded broker
    best = min(movable, key=lambda m: (m[0], not m[1], -m[2], -m[3], -m[4]))
    return best[4]
