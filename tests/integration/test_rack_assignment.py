"""Rack-aware consumer group assignment (KIP-881) for clients that name no rack.

One consumer group of three clients, none configured with a rack: the official Java
client (3.9, whose range and cooperative-sticky assignors are rack-aware since 3.5),
confluent-kafka (librdkafka)
and kafka-python, each through its own ``rackguard serve``, standing in rack-a, rack-b
and rack-c. Topic ``assign`` has 6 partitions of one replica each, two per rack. The
Java client joins first, so it leads the group and runs the assignment.

- Each proxy with its ``client_rack``: every JoinGroup's subscription names the rack (the
  kafka-python one raised from v0 to v3), and every member gets exactly the partitions
  whose replica is in its rack.
- Without ``client_rack``: the plain range assignment by member id, as without a proxy.

The assignments are read from the simulator's coordinator: what the leader sent.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from simulator.config import SimulatorConfig, TopicSpec, racked_brokers
from simulator.threaded import ThreadedCluster

from . import kip_support as ks
from .harness import wire
from .harness.java import JavaClient
from .harness.ports import free_port_block
from .harness.procs import RackguardProxy

pytestmark = [pytest.mark.integration, pytest.mark.java]

TOPIC = "assign"
PARTITIONS = 6
RACK_OF = {1: "rack-a", 4: "rack-a", 2: "rack-b", 5: "rack-b", 3: "rack-c", 6: "rack-c"}
MEMBERS = {"m1-java": "rack-a", "m2-rdkafka": "rack-b", "m3-python": "rack-c"}
RUN_S = 60  # the Java member's longest stay; it is stopped once the test has read


@pytest.fixture(scope="module")
def cluster() -> Iterator[ThreadedCluster]:
    base = free_port_block(range(len(ks.NODE_IDS)))
    config = SimulatorConfig(
        brokers=racked_brokers(len(ks.NODE_IDS), list(ks.RACKS), port_base=base),
        topics=[TopicSpec(TOPIC, PARTITIONS, 1)], default_min_insync_replicas=1)
    with ThreadedCluster(config) as c:
        yield c


def partition_racks(cluster: ThreadedCluster) -> dict[int, str]:
    return {p: RACK_OF[cluster.partition_info(TOPIC, p)["replicas"][0]]
            for p in range(PARTITIONS)}


def group_state(cluster: ThreadedCluster, group: str, assignor: str = "range"
                ) -> tuple[str, int, dict[str, tuple[list[int], bytes]]]:
    """(state, generation, client id -> (assigned partitions, subscription bytes))."""
    def read(c: object) -> tuple[str, int, dict[str, tuple[list[int], bytes]]]:
        g = c.core.groups.groups.get(group)  # type: ignore[attr-defined]
        if g is None:
            return "none", 0, {}
        out = {}
        for member_id, m in g.members.items():
            parts = []
            if m.assignment:
                decoded = ConsumerProtocolAssignment.decode(m.assignment)
                parts = sorted(p for t, ps in decoded.assigned_partitions for p in ps)
            out[member_id.rsplit("-", 5)[0]] = (parts, dict(m.protocols).get(assignor, b""))
        return g.state, g.generation, out
    return cluster.call(read)


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def run_group(cluster: ThreadedCluster, java_client: JavaClient, tmp_path: Path,
              group: str, with_racks: bool, assignor: str = "range"
              ) -> dict[str, tuple[list[int], bytes]]:
    ports = ks.broker_ports(cluster)
    upstream = ",".join(f"127.0.0.1:{p}" for p in ports)
    proxies = {}
    stop = threading.Event()
    threads: list[threading.Thread] = []
    java = None
    try:
        for client_id, rack in MEMBERS.items():
            extra = ("--client-rack", rack) if with_racks else ()
            proxy = RackguardProxy(upstream, tmp_path, ks.NODE_IDS, extra)
            proxy.start()
            for n in ks.NODE_IDS:
                wire.wait_for_port(*proxy.broker_address(n), 15, proc=proxy.proc)
            proxies[client_id] = proxy
        java = subprocess.Popen(
            java_client.argv("member", bootstrap=proxies["m1-java"].bootstrap, topic=TOPIC,
                             group=group, seconds=RUN_S, client_id="m1-java",
                             assignor=assignor),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: group_state(cluster, group)[0] == "Stable", 30, "the Java member")
        threads = [
            threading.Thread(target=rdkafka_member, args=(
                proxies["m2-rdkafka"].bootstrap, group, stop, assignor)),
            threading.Thread(target=python_member, args=(
                proxies["m3-python"].bootstrap, group, stop, assignor)),
        ]
        for t in threads:
            t.start()
            time.sleep(1.0)  # join one at a time: the Java member stays the leader

        def settled() -> bool:
            state, _, members = group_state(cluster, group, assignor)
            return state == "Stable" and len(members) == 3 and all(
                parts for parts, _ in members.values())

        wait_for(settled, 30, "three members with assignments")
        time.sleep(1.0)
        state, generation, members = group_state(cluster, group, assignor)
        assert settled(), (state, members)
        return members
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        if java is not None:  # its assignment is read: no need to wait out RUN_S
            java.terminate()
            try:
                java.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                java.kill()
        for proxy in proxies.values():
            proxy.stop()


def rdkafka_member(bootstrap: str, group: str, stop: threading.Event, assignor: str
                   ) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "client.id": "m2-rdkafka", "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 500, "partition.assignment.strategy": assignor,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        while not stop.is_set():
            consumer.poll(0.1)
    finally:
        consumer.close()


def python_member(bootstrap: str, group: str, stop: threading.Event, assignor: str
                  ) -> None:
    strategy = (CooperativeStickyAssignor if assignor == "cooperative-sticky"
                else RangePartitionAssignor)
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group,
                             client_id="m3-python", session_timeout_ms=6000,
                             heartbeat_interval_ms=500, enable_auto_commit=False,
                             partition_assignment_strategy=(strategy,))
    try:
        while not stop.is_set():
            consumer.poll(timeout_ms=100)
    finally:
        consumer.close()


def plain_range() -> dict[str, list[int]]:
    per = PARTITIONS // len(MEMBERS)
    return {client_id: list(range(i * per, (i + 1) * per))
            for i, client_id in enumerate(sorted(MEMBERS))}


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_assignments_follow_the_proxies_racks(cluster: ThreadedCluster,
                                              java_client: JavaClient, tmp_path: Path,
                                              unique: str, assignor: str) -> None:
    racks = partition_racks(cluster)
    assert sorted(racks.values()) == sorted(ks.RACKS * 2), racks
    members = run_group(cluster, java_client, tmp_path, f"racks-{unique}", with_racks=True,
                        assignor=assignor)
    for client_id, (parts, subscription) in members.items():
        rack = MEMBERS[client_id]
        assert ConsumerProtocolSubscription.decode(subscription).rack_id == rack
        assert parts == sorted(p for p, r in racks.items() if r == rack), (client_id, members)
    if assignor == "range":
        assert {c: p for c, (p, _) in members.items()} != plain_range()


def test_without_client_rack_the_assignment_is_unchanged(
        cluster: ThreadedCluster, java_client: JavaClient, tmp_path: Path,
        unique: str) -> None:
    members = run_group(cluster, java_client, tmp_path, f"plain-{unique}", with_racks=False)
    for _, subscription in members.values():
        assert not ConsumerProtocolSubscription.decode(subscription).rack_id
    assert {c: p for c, (p, _) in members.items()} == plain_range()
