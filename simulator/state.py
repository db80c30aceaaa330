"""Cluster model of the simulator (a TEST DOUBLE): brokers, racks, topics, ISR, leaders.

Invariants (pure data, no I/O, mutated only on the event-loop thread):
- a partition's replicas are distinct known brokers, the preferred leader first;
- its ISR is a subset of its replicas and never empty;
- its leader is -1 (offline) or a live ISR member; every leader change bumps
  the leader epoch;
- a dead broker leaves every ISR except where it is the last member (as in
  Kafka, the ISR then keeps naming it and the partition has no leader until
  it, or another ISR member, comes back: there is no unclean election).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from simulator import errors
from simulator.config import BrokerSpec
from simulator.log import PartitionLog
from simulator.placement import assign_replicas

NO_LEADER = -1
MIN_INSYNC_REPLICAS = "min.insync.replicas"


def _validate_configs(configs: dict[str, str]) -> None:
    if MIN_INSYNC_REPLICAS in configs:
        try:
            if int(configs[MIN_INSYNC_REPLICAS]) < 1:
                raise ValueError
        except ValueError:
            raise StateError(errors.INVALID_CONFIG, "min.insync.replicas must be >= 1") from None


class StateError(Exception):
    """A control or admin operation that cannot be applied; carries a Kafka error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Broker:
    node_id: int
    rack: str | None
    port: int
    alive: bool = True


@dataclass
class Partition:
    topic: str
    index: int
    replicas: list[int]
    isr: list[int]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    log: PartitionLog = field(default_factory=PartitionLog)


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition]
    configs: dict[str, str]


class ClusterState:
    """Brokers and topics, with the transitions the control API exposes."""

    def __init__(
        self,
        brokers: list[BrokerSpec],
        default_min_insync_replicas: int = 2,
        preferred_leader_election: bool = True,
    ) -> None:
        self.brokers: dict[int, Broker] = {
            b.node_id: Broker(b.node_id, b.rack, b.port) for b in brokers
        }
        self.topics: dict[str, Topic] = {}
        self.topic_ids: dict[uuid.UUID, str] = {}
        self.default_min_insync_replicas = default_min_insync_replicas
        self.preferred_leader_election = preferred_leader_election
        self._placement_start = 0

    # -- queries ---------------------------------------------------------

    def live_brokers(self) -> list[Broker]:
        return [b for _, b in sorted(self.brokers.items()) if b.alive]

    def coordinator(self) -> int | None:
        """The broker that hosts the group coordinator."""
        live = self.live_brokers()
        return live[0].node_id if live else None

    def racks(self) -> list[str | None]:
        seen: list[str | None] = []
        for b in self.brokers.values():
            if b.rack not in seen:
                seen.append(b.rack)
        return seen

    def partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def require_partition(self, topic: str, index: int) -> Partition:
        p = self.partition(topic, index)
        if p is None:
            raise StateError(
                errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {topic}-{index}"
            )
        return p

    def min_insync_replicas(self, topic: str) -> int:
        t = self.topics.get(topic)
        if t is not None and MIN_INSYNC_REPLICAS in t.configs:
            return int(t.configs[MIN_INSYNC_REPLICAS])
        return self.default_min_insync_replicas

    def all_partitions(self) -> list[Partition]:
        return [p for t in self.topics.values() for p in t.partitions]

    # -- topics ----------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignment: list[list[int]] | None = None,
    ) -> Topic:
        if not name or len(name) > 249 or name in (".", ".."):
            raise StateError(errors.INVALID_TOPIC_EXCEPTION, f"invalid topic name {name!r}")
        if name in self.topics:
            raise StateError(errors.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        configs = dict(configs or {})
        _validate_configs(configs)
        if assignment is None:
            if partitions < 1:
                raise StateError(errors.INVALID_PARTITIONS, "partitions must be >= 1")
            # Like KRaft, place replicas on live (unfenced) brokers only.
            candidates = [(b.node_id, b.rack) for b in self.live_brokers()]
            try:
                assignment = assign_replicas(
                    candidates, partitions, replication_factor, self._placement_start
                )
            except ValueError as exc:
                raise StateError(errors.INVALID_REPLICATION_FACTOR, str(exc)) from None
            self._placement_start += 1
        else:
            for replicas in assignment:
                if len(set(replicas)) != len(replicas) or not set(replicas) <= set(self.brokers):
                    raise StateError(errors.INVALID_REQUEST, f"bad replica assignment {replicas}")
        topic = Topic(name, uuid.uuid4(), [], configs)
        for index, replicas in enumerate(assignment):
            alive = [r for r in replicas if self.brokers[r].alive]
            part = Partition(name, index, list(replicas), alive or [replicas[0]])
            self._elect(part)
            topic.partitions.append(part)
        self.topics[name] = topic
        self.topic_ids[topic.topic_id] = name
        return topic

    def add_partitions(self, name: str, count: int,
                       assignment: list[list[int]] | None = None) -> None:
        """Grow ``name`` to ``count`` partitions (CreatePartitions); new replicas as given
        or placed like a new topic's, with the topic's replication factor."""
        topic = self.topics.get(name)
        if topic is None:
            raise StateError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        have = len(topic.partitions)
        if count <= have:
            raise StateError(errors.INVALID_PARTITIONS,
                             f"topic {name!r} has {have} partitions, asked for {count}")
        rf = len(topic.partitions[0].replicas)
        if assignment is None:
            candidates = [(b.node_id, b.rack) for b in self.live_brokers()]
            try:
                assignment = assign_replicas(candidates, count - have, rf,
                                             self._placement_start)
            except ValueError as exc:
                raise StateError(errors.INVALID_REPLICATION_FACTOR, str(exc)) from None
        if len(assignment) != count - have:
            raise StateError(errors.INVALID_REPLICA_ASSIGNMENT,
                             f"{len(assignment)} assignments for {count - have} new partitions")
        for replicas in assignment:
            self._check_replicas(replicas)
        for index, replicas in enumerate(assignment, start=have):
            alive = [r for r in replicas if self.brokers[r].alive]
            part = Partition(name, index, list(replicas), alive or [replicas[0]])
            self._elect(part)
            topic.partitions.append(part)

    def _check_replicas(self, replicas: list[int]) -> None:
        if not replicas or len(set(replicas)) != len(replicas) \
                or not set(replicas) <= set(self.brokers):
            raise StateError(errors.INVALID_REPLICA_ASSIGNMENT,
                             f"bad replica assignment {replicas}")

    def alter_topic_configs(self, name: str, configs: dict[str, str | None], replace: bool) -> None:
        """Set (value) or delete (None) topic configs; `replace` drops unnamed ones."""
        topic = self.topics.get(name)
        if topic is None:
            raise StateError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        new = {} if replace else dict(topic.configs)
        for key, value in configs.items():
            if value is None:
                new.pop(key, None)
            else:
                new[key] = value
        _validate_configs(new)
        topic.configs = new

    # -- ISR and leadership -------------------------------------------------

    def _elect(self, part: Partition, prefer: bool = False) -> None:
        """Keep or choose a leader among live ISR members (clean election only)."""
        candidates = [
            r for r in part.replicas if r in part.isr and self.brokers[r].alive
        ]
        current = part.leader
        if prefer and candidates and candidates[0] == part.replicas[0]:
            new = candidates[0]
        elif current in candidates:
            new = current
        else:
            new = candidates[0] if candidates else NO_LEADER
        if new != current:
            part.leader = new
            part.leader_epoch += 1

    def set_isr(self, topic: str, index: int, isr: list[int]) -> Partition:
        part = self.require_partition(topic, index)
        if not isr:
            raise StateError(errors.INVALID_REQUEST, "an ISR cannot be empty")
        if len(set(isr)) != len(isr) or not set(isr) <= set(part.replicas):
            raise StateError(
                errors.INVALID_REQUEST, f"ISR {isr} is not a subset of replicas {part.replicas}"
            )
        part.isr = list(isr)
        self._elect(part)
        return part

    def set_leader(self, topic: str, index: int, leader: int) -> Partition:
        part = self.require_partition(topic, index)
        if leader not in part.isr or not self.brokers[leader].alive:
            raise StateError(errors.INVALID_REQUEST, f"{leader} is not a live ISR member")
        if part.leader != leader:
            part.leader = leader
            part.leader_epoch += 1
        return part

    def kill_broker(self, node_id: int) -> None:
        broker = self._broker(node_id)
        broker.alive = False
        for part in self.all_partitions():
            if node_id in part.isr and len(part.isr) > 1:
                part.isr.remove(node_id)
            self._elect(part)

    def restore_broker(self, node_id: int) -> None:
        broker = self._broker(node_id)
        broker.alive = True
        for part in self.all_partitions():
            if node_id not in part.replicas:
                continue
            was_offline = part.leader == NO_LEADER
            if part.leader == NO_LEADER and node_id not in part.isr:
                continue  # no leader to catch up from: wait for an ISR member
            if node_id not in part.isr:
                part.isr.append(node_id)
            self._elect(part, prefer=self.preferred_leader_election)
            if was_offline and part.leader != NO_LEADER:
                # Replicas that were waiting for a leader catch up and rejoin.
                for r in part.replicas:
                    if r not in part.isr and self.brokers[r].alive:
                        part.isr.append(r)
            self._order_isr(part)

    @staticmethod
    def _order_isr(part: Partition) -> None:
        part.isr.sort(key=part.replicas.index)

    def brokers_in_rack(self, rack: str | None) -> list[int]:
        ids = [b.node_id for b in self.brokers.values() if b.rack == rack]
        if not ids:
            raise StateError(errors.INVALID_REQUEST, f"no broker in rack {rack!r}")
        return sorted(ids)

    def _broker(self, node_id: int) -> Broker:
        broker = self.brokers.get(node_id)
        if broker is None:
            raise StateError(errors.INVALID_REQUEST, f"unknown broker {node_id}")
        return broker

    # -- views -----------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready picture of brokers, racks and partitions."""
        return {
            "brokers": [
                {"node_id": b.node_id, "rack": b.rack, "port": b.port, "alive": b.alive}
                for _, b in sorted(self.brokers.items())
            ],
            "coordinator": self.coordinator(),
            "topics": {
                t.name: {
                    "topic_id": str(t.topic_id),
                    "configs": dict(t.configs),
                    "min_insync_replicas": self.min_insync_replicas(t.name),
                    "partitions": [
                        {
                            "partition": p.index,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replicas": list(p.replicas),
                            "isr": list(p.isr),
                            "isr_racks": sorted(
                                {self.brokers[r].rack or "" for r in p.isr}
                            ),
                            "log_start_offset": p.log.log_start_offset,
                            "high_watermark": p.log.high_watermark,
                        }
                        for p in t.partitions
                    ],
                }
                for t in self.topics.values()
            },
        }
