"""The placement audit: which partitions' replicas can meet min.insync.racks.

Invariant: a pure function of frozen inputs (see :mod:`.model`). Per
partition of a topic with ``N = required(topic)`` and ``R`` the distinct racks
of its replicas (all of them, offline ones included: placement is about where
the replicas live, the ISR metrics are about where they are in sync):

* unsatisfiable: ``R < N`` - acks=all is refused even with every broker up;
* fragile: ``R == N`` - losing any one of those racks refuses it;
* healthy: ``R > N``.

Where racks have dimensions (``rack_dimensions``: region/zone...) and the topic a
minimum per dimension (:class:`Spread`), the same holds per dimension with ``R`` the
distinct values of that dimension among the replicas' racks; a partition's status is
the worst of its levels, and a finding names the dimension that made it so (None:
the racks themselves, which win a tie).

Leaders are counted per broker and per rack from the current leader (a
partition without one is counted as leaderless); replicas per broker, per
rack, and per rack of each topic. Topics are ordered worst first: most
unsatisfiable partitions, then most fragile, then by name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from proxy.enforce.dimensions import RackDimensions
from proxy.placement.model import (
    PartitionReplicas,
    Racks,
    Topics,
    counted_rack,
    rack_label,
    replica_racks,
)


class Status(Enum):
    UNSATISFIABLE = "unsatisfiable"
    FRAGILE = "fragile"
    HEALTHY = "healthy"


_RANK = {Status.UNSATISFIABLE: 0, Status.FRAGILE: 1, Status.HEALTHY: 2}


@dataclass(frozen=True, slots=True)
class Spread:
    """The rule over several dimensions: how racks split, and a topic's minimums."""

    dimensions: RackDimensions
    minimums: Callable[[str], Mapping[str, int] | None]  # None: the topic has none

    def values(self, racks: frozenset[str] | tuple[str, ...], dimension: str
               ) -> tuple[str, ...]:
        """The distinct values of ``dimension`` the racks span, sorted."""
        return tuple(sorted({self.dimensions.values(r)[dimension] for r in racks}))


@dataclass(frozen=True, slots=True)
class DimensionFinding:
    """The dimension whose spread decided a partition's status."""

    dimension: str
    values: tuple[str, ...]  # the distinct values its replicas span
    required: int


def worst_dimension(spanned: frozenset[str], status: Status, spread: Spread | None,
                    minimums: Mapping[str, int] | None
                    ) -> tuple[Status, DimensionFinding | None]:
    """The partition's status over every level: the racks' ``status``, made worse by a
    dimension whose replicas span too few values (the first such, in order)."""
    found = None
    if spread is None or not minimums:
        return status, None
    for name, n in minimums.items():
        if n <= 1:
            continue
        values = spread.values(spanned, name)
        level = classify(len(values), n)
        if _RANK[level] < _RANK[status]:
            status, found = level, DimensionFinding(name, values, n)
    return status, found


def classify(rack_count: int, required: int) -> Status:
    if rack_count < required:
        return Status.UNSATISFIABLE
    if rack_count == required:
        return Status.FRAGILE
    return Status.HEALTHY


@dataclass(frozen=True, slots=True)
class PartitionFinding:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    racks: tuple[str, ...]
    required: int
    status: Status
    offline: tuple[int, ...]
    unknown: tuple[int, ...]  # replicas on brokers the broker map does not know
    dimension: DimensionFinding | None = None  # where a dimension decided the status

    def to_json(self) -> dict[str, Any]:
        out = {"topic": self.topic, "partition": self.partition,
               "replicas": list(self.replicas), "racks": list(self.racks),
               "min_insync_racks": self.required, "status": self.status.value,
               "offline": list(self.offline), "unknown_brokers": list(self.unknown)}
        if self.dimension is not None:
            out["dimension"] = {"name": self.dimension.dimension,
                                "values": list(self.dimension.values),
                                "min_insync_racks": self.dimension.required}
        return out


@dataclass(frozen=True, slots=True)
class TopicAudit:
    topic: str
    required: int
    partitions: int
    unsatisfiable: int
    fragile: int
    offline_replicas: int
    replicas_per_rack: dict[str, int]
    leaders_per_rack: dict[str, int]
    findings: tuple[PartitionFinding, ...]  # unsatisfiable and fragile partitions, by id

    @property
    def healthy(self) -> int:
        return self.partitions - self.unsatisfiable - self.fragile

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "min_insync_racks": self.required,
                "partitions": self.partitions, "unsatisfiable": self.unsatisfiable,
                "fragile": self.fragile, "healthy": self.healthy,
                "offline_replicas": self.offline_replicas,
                "replicas_per_rack": _labelled(self.replicas_per_rack),
                "leaders_per_rack": _labelled(self.leaders_per_rack),
                "partitions_at_risk": [f.to_json() for f in self.findings]}


@dataclass(frozen=True, slots=True)
class Audit:
    topics: tuple[TopicAudit, ...]  # worst first
    brokers: dict[int, str]  # broker -> the rack it counts as
    leaders_per_broker: dict[int, int]
    leaders_per_rack: dict[str, int]
    replicas_per_broker: dict[int, int]
    replicas_per_rack: dict[str, int]
    leaderless: int

    @property
    def partitions(self) -> int:
        return sum(t.partitions for t in self.topics)

    @property
    def unsatisfiable(self) -> int:
        return sum(t.unsatisfiable for t in self.topics)

    @property
    def fragile(self) -> int:
        return sum(t.fragile for t in self.topics)

    def to_json(self) -> dict[str, Any]:
        return {
            "partitions": self.partitions, "unsatisfiable": self.unsatisfiable,
            "fragile": self.fragile, "leaderless": self.leaderless,
            "brokers": {str(b): rack_label(r) for b, r in sorted(self.brokers.items())},
            "leaders_per_broker": {str(b): n for b, n in sorted(self.leaders_per_broker.items())},
            "leaders_per_rack": _labelled(self.leaders_per_rack),
            "replicas_per_broker": {str(b): n
                                    for b, n in sorted(self.replicas_per_broker.items())},
            "replicas_per_rack": _labelled(self.replicas_per_rack),
            "topics": [t.to_json() for t in self.topics],
        }


def _labelled(counts: dict[str, int]) -> dict[str, int]:
    return {rack_label(r): n for r, n in sorted(counts.items())}


def audit(racks: Racks, topics: Topics, required: Callable[[str], int],
          spread: Spread | None = None) -> Audit:
    """Audit every partition of ``topics`` against ``required(topic)`` racks (and,
    with ``spread``, against each dimension's minimum of the topic)."""
    brokers = {b: counted_rack(racks, b) or "" for b in racks}
    leaders_b: Counter[int] = Counter(dict.fromkeys(racks, 0))
    replicas_b: Counter[int] = Counter(dict.fromkeys(racks, 0))
    leaders_r: Counter[str] = Counter(dict.fromkeys(brokers.values(), 0))
    replicas_r: Counter[str] = Counter(dict.fromkeys(brokers.values(), 0))
    leaderless = 0
    audits: list[TopicAudit] = []
    for name, partitions in topics.items():
        n = required(name)
        t = _audit_topic(name, n, racks, partitions, spread)
        audits.append(t)
        for p in partitions.values():
            if p.leader < 0:
                leaderless += 1
            else:
                leaders_b[p.leader] += 1
            replicas_b.update(p.replicas)
        leaders_r.update(t.leaders_per_rack)
        replicas_r.update(t.replicas_per_rack)
    audits.sort(key=lambda t: (-t.unsatisfiable, -t.fragile, t.topic))
    return Audit(tuple(audits), brokers, dict(leaders_b), dict(leaders_r), dict(replicas_b),
                 dict(replicas_r), leaderless)


def _audit_topic(name: str, required: int, racks: Racks,
                 partitions: Mapping[int, PartitionReplicas],
                 spread: Spread | None = None) -> TopicAudit:
    minimums = spread.minimums(name) if spread is not None else None
    findings: list[PartitionFinding] = []
    counts = Counter[Status]()
    per_rack: Counter[str] = Counter()
    leaders: Counter[str] = Counter()
    offline = 0
    for index in sorted(partitions):
        p = partitions[index]
        spanned = replica_racks(racks, p.replicas)
        status, dimension = worst_dimension(spanned, classify(len(spanned), required),
                                            spread, minimums)
        counts[status] += 1
        offline += len(p.offline)
        for broker in p.replicas:
            rack = counted_rack(racks, broker)
            if rack is not None:
                per_rack[rack] += 1
        leader_rack = counted_rack(racks, p.leader) if p.leader >= 0 else None
        if leader_rack is not None:
            leaders[leader_rack] += 1
        if status is not Status.HEALTHY:
            unknown = tuple(b for b in p.replicas if b not in racks)
            findings.append(PartitionFinding(name, index, p.replicas, tuple(sorted(spanned)),
                                             required, status, p.offline, unknown,
                                             dimension))
    return TopicAudit(name, required, len(partitions), counts[Status.UNSATISFIABLE],
                      counts[Status.FRAGILE], offline, dict(per_rack), dict(leaders),
                      tuple(findings))
