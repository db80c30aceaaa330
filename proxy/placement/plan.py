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

Where racks have dimensions and a topic a minimum per dimension (``spread``), each
dimension's target is its minimum, raised by one likewise, and is met first: a move
replaces a replica whose value of the dimension another replica shares (or on an
unknown broker) by a broker of a value the partition lacks, never lowering the racks
spanned or another dimension below its target; the racks' target is met after that
(such moves keep every dimension's values).

``PlacementError`` refuses a request no move can satisfy: a topic requires
more racks (or values of a dimension) than the cluster has. A partition with
fewer replicas than ``N`` cannot be fixed by moves (its replication factor must
grow); it is reported in ``Plan.unfixable`` and left out of the plan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from proxy.placement.audit import Spread
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
    spread: Spread | None = None,
) -> Plan:
    """Reassignments that bring every partition to its target racks (and values of each
    dimension, with ``spread``) with fewest moves."""
    rack_names = {counted_rack(racks, b) or "" for b in racks}
    minimums = _minimums(topics, spread, frozenset(rack_names))
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
            mins = minimums.get(name, {})
            short = [(d, m) for d, m in mins.items() if rf < m]
            if short:
                d, m = short[0]
                unfixable.append(Unfixable(
                    name, index, p.replicas, n, f"{rf} replica(s) cannot span {m} values of "
                    f"{d}: raise the replication factor"))
                continue
            goal = target_racks(n, rf, len(rack_names), spare)
            goals = {d: target_racks(m, rf, len(spread.values(frozenset(rack_names), d)), spare)
                     for d, m in mins.items()} if spread is not None else {}
            before = len(replica_racks(racks, p.replicas))
            if before >= goal and all(_count(spread, racks, p.replicas, d) >= g
                                      for d, g in goals.items()):
                continue
            after = p.replicas
            if spread is not None and goals:
                after = _spread_partition(after, goals, spread, racks, loads, leaders)
            after = _fix_partition(PartitionReplicas(after), goal, racks, by_rack, loads,
                                   leaders)
            if after == p.replicas:
                continue
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


def _minimums(topics: Topics, spread: Spread | None, cluster_racks: frozenset[str]
              ) -> dict[str, dict[str, int]]:
    """Each topic's minimums above 1 per dimension; PlacementError where the cluster has
    fewer values of a dimension than a topic requires."""
    if spread is None:
        return {}
    out: dict[str, dict[str, int]] = {}
    for topic in topics:
        mins = {d: m for d, m in (spread.minimums(topic) or {}).items() if m > 1}
        for d, m in mins.items():
            values = spread.values(cluster_racks, d)
            if m > len(values):
                raise PlacementError(
                    f"min.insync.racks.{d} {m} (topic {topic!r}) is more than the "
                    f"{len(values)} value(s) of {d} in the cluster ({', '.join(values)}): "
                    "no placement can satisfy it")
        if mins:
            out[topic] = mins
    return out


def _count(spread: Spread | None, racks: Racks, replicas: tuple[int, ...] | list[int],
           dimension: str) -> int:
    assert spread is not None
    return len(spread.values(replica_racks(racks, replicas), dimension))


def _spread_partition(
    replicas_in: tuple[int, ...],
    goals: Mapping[str, int],
    spread: Spread,
    racks: Racks,
    loads: Counter[int],
    leaders: Counter[int],
) -> tuple[int, ...]:
    """Moves, one at a time, until every dimension spans its goal (where a move can)."""
    replicas = list(replicas_in)
    for dimension, goal in goals.items():
        while _count(spread, racks, replicas, dimension) < goal:
            move = _best_move(replicas, dimension, goals, spread, racks, loads)
            if move is None:
                break
            position, dest = move
            old = replicas[position]
            if old in racks:
                loads[old] -= 1
                if position == 0:
                    leaders[old] -= 1
            loads[dest] += 1
            if position == 0:
                leaders[dest] += 1
            replicas[position] = dest
    return tuple(replicas)


def _best_move(replicas: list[int], dimension: str, goals: Mapping[str, int],
               spread: Spread, racks: Racks, loads: Counter[int]) -> tuple[int, int] | None:
    """(position, destination) of the move that adds a value of ``dimension`` and loses
    nothing needed: a follower first, the most loaded source, the least loaded target."""
    have = {d: _count(spread, racks, replicas, d) for d in goals}
    spanned = len(replica_racks(racks, replicas))
    present = set(spread.values(replica_racks(racks, replicas), dimension))
    dests = [b for b in sorted(racks) if b not in replicas
             and spread.dimensions.values(counted_rack(racks, b) or "")[dimension]
             not in present]
    best: tuple[tuple[int, int, int, int], tuple[int, int]] | None = None
    for position, old in enumerate(replicas):
        for dest in dests:
            trial = replicas[:position] + [dest] + replicas[position + 1:]
            if len(replica_racks(racks, trial)) < spanned:
                continue
            if any(_count(spread, racks, trial, d) < min(g, have[d])
                   for d, g in goals.items()):
                continue
            key = (position == 0, -loads[old] if old in racks else -1 << 30, loads[dest], dest)
            if best is None or key < best[0]:
                best = (key, (position, dest))
    return None if best is None else best[1]
