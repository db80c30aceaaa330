"""Static configuration of the simulated cluster (a TEST DOUBLE, not Kafka).

Invariant: these dataclasses are plain values; nothing here opens sockets or
touches cluster state. Node ids are unique and ports are either explicit or 0
(meaning "let the OS choose, then keep that port across kill/restore").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from simulator.sasl import SaslUsers


@dataclass(frozen=True)
class BrokerSpec:
    """One simulated broker: its node id, rack (None = no rack) and port (0 = OS-chosen)."""

    node_id: int
    rack: str | None = None
    port: int = 0


@dataclass(frozen=True)
class TopicSpec:
    """A topic created when the cluster starts."""

    name: str
    partitions: int = 3
    replication_factor: int = 3
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class SimulatorConfig:
    """Everything `start_cluster` needs."""

    brokers: list[BrokerSpec]
    topics: list[TopicSpec] = field(default_factory=list)
    host: str = "127.0.0.1"
    advertised_host: str | None = None
    cluster_id: str = "rackguard-sim-cluster"
    default_min_insync_replicas: int = 2
    default_partitions: int = 3
    default_replication_factor: int = 3
    auto_create_topics: bool = True
    # auto.leader.rebalance.enable: a restored preferred replica takes leadership back.
    preferred_leader_election: bool = True
    # group.initial.rebalance.delay.ms; Kafka's default is 3000, tests want it short.
    group_initial_rebalance_delay_ms: int = 50
    # replica.selector.class: "leader" (Kafka's default) or "rack_aware"
    # (RackAwareReplicaSelector: a consumer naming its rack is sent to an in-sync replica
    # in that rack, KIP-392). Followers serve consumer fetches (v11+) either way.
    replica_selector: str = "leader"
    control_port: int | None = None
    # TLS on every broker listener (PEM files; a client CA requires client certificates)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    # SASL on every broker listener (None: no authentication)
    sasl: SaslUsers | None = None
    # Client ids refused ALTER_CONFIGS (TOPIC_/CLUSTER_AUTHORIZATION_FAILED), as an ACL
    # would; tests may change it while the cluster runs.
    deny_alter_configs: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        ids = [b.node_id for b in self.brokers]
        if not ids:
            raise ValueError("a simulated cluster needs at least one broker")
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate broker node ids: {ids}")
        if self.replica_selector not in ("leader", "rack_aware"):
            raise ValueError(f"replica_selector: leader or rack_aware, not "
                             f"{self.replica_selector!r}")
        if self.default_min_insync_replicas < 1:
            raise ValueError("default_min_insync_replicas must be >= 1")

    @property
    def public_host(self) -> str:
        return self.advertised_host or self.host


def racked_brokers(
    count: int, racks: list[str] | None, port_base: int = 0, first_node_id: int = 1
) -> list[BrokerSpec]:
    """`count` brokers with node ids first_node_id.., racks assigned round-robin.

    port_base 0 gives every broker an OS-chosen port; otherwise broker i
    (0-based) listens on port_base + i.
    """
    specs = []
    for i in range(count):
        rack = racks[i % len(racks)] if racks else None
        port = port_base + i if port_base else 0
        specs.append(BrokerSpec(node_id=first_node_id + i, rack=rack, port=port))
    return specs
