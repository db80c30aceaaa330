"""Same-rack fetching through the sidecar against REAL Apache Kafka (KIP-392).

The local rig's brokers (tests/system/cluster.py: six in three racks) run
RackAwareReplicaSelector. A topic of 6 partitions, replication factor 3 (Kafka puts a
replica in every rack); in each rack a kafka-python consumer without a rack of its own
reads it all through a ``rackguard serve`` of that rack with ``--client-rack``:
``observe`` first (nothing changed: about two thirds of the bytes cross racks, by the
proxies' rackguard_fetch_bytes_total), then ``fill`` (the leaders send each consumer to
its rack's replica: cross-rack bytes near zero).

A KIP-848 member (the Java client, group.protocol=consumer, no client.rack) through a
proxy with client_rack joins with that rack in its ConsumerGroupHeartbeat: the broker's
ConsumerGroupDescribe shows it; the same client connected directly shows none.

Needs the rig this repository starts (the proxies are started here, in front of its
brokers); an existing deployment named by RGTEST_* variables skips.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from protocol.primitives import encode_array_len, encode_string, read_uvarint
from tests.integration.harness import wire
from tests.integration.harness.java import JavaClient
from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import RackguardProxy
from tests.prometheus_text import by_label, metrics_url, read_samples

from .cluster import BROKER_RACKS, RACKS
from .rig import SystemRig

pytestmark = pytest.mark.system

PARTITIONS = 6
RECORDS_PER_PARTITION = 200
VALUE = b"v" * 1000


@pytest.fixture(scope="module")
def topic(rig: SystemRig) -> Iterator[str]:
    if rig.cluster is None:
        pytest.skip("needs the Kafka cluster this repository starts (tests/system/cluster.py)")
    from kafka.admin import KafkaAdminClient, NewTopic

    name = f"locality-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=rig.cluster.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(name, PARTITIONS, 3)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=rig.cluster.bootstrap, acks="all", linger_ms=5)
    for p in range(PARTITIONS):
        for _ in range(RECORDS_PER_PARTITION):
            producer.send(name, VALUE, partition=p)
    producer.flush(60)
    producer.close()
    yield name


def consume_all(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             max_partition_fetch_bytes=16 * 1024, fetch_max_bytes=64 * 1024)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        seen = 0
        deadline = time.monotonic() + 120
        while seen < PARTITIONS * RECORDS_PER_PARTITION and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                seen += len(records)
        return seen
    finally:
        consumer.close()


def fetch_bytes(metrics_port: int) -> dict[str, float]:
    return by_label(read_samples(metrics_url(metrics_port)), "rackguard_fetch_bytes_total",
                    "locality")


@pytest.mark.parametrize("mode", ["observe", "fill"])
def test_cross_rack_share_real_kafka(rig: SystemRig, topic: str, tmp_path: Path,
                                     mode: str) -> None:
    assert rig.cluster is not None
    totals = {"same_rack": 0.0, "cross_rack": 0.0, "unknown": 0.0}
    for rack in RACKS:
        metrics_port = free_port()
        proxy = RackguardProxy(rig.cluster.bootstrap, tmp_path, tuple(BROKER_RACKS),
                               ("--client-rack", rack, "--client-rack-mode", mode,
                                "--metrics-port", str(metrics_port)))
        proxy.start()
        try:
            for n in BROKER_RACKS:
                wire.wait_for_port(*proxy.broker_address(n), 30, proc=proxy.proc)
            assert consume_all(proxy.bootstrap, topic) == PARTITIONS * RECORDS_PER_PARTITION
            for where, value in fetch_bytes(metrics_port).items():
                totals[where] += value
        finally:
            proxy.stop()
    share = totals["cross_rack"] / (totals["same_rack"] + totals["cross_rack"])
    print(f"\nreal Kafka, {mode}: {totals}, cross-rack share {share:.3f}")
    assert totals["unknown"] == 0
    if mode == "observe":
        assert 0.4 <= share <= 0.9
    else:
        assert share <= 0.05


# ----- KIP-848: a ConsumerGroupHeartbeat member gets the proxy's rack

def _compact_string(data: bytes, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(data, pos)
    if n == 0:
        return None, pos
    return data[pos:pos + n - 1].decode(), pos + n - 1


def describe_racks(port: int, group: str) -> dict[str, str | None] | None:
    """ConsumerGroupDescribe v0 to one broker: member id -> RackId, None when that broker
    is not the group's coordinator (or the group has no members yet)."""
    body = encode_array_len(1, True) + encode_string(group, True) + b"\x00" + b"\x00"
    header = struct.pack(">hhih", 69, 0, 7, 4) + b"test" + b"\x00"
    with socket.create_connection(("127.0.0.1", port), 10) as s:
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = s.recv(size, socket.MSG_WAITALL)
    pos = 4 + 1 + 4  # correlation id, header tags, throttle
    groups, pos = read_uvarint(data, pos)
    assert groups == 2
    error = struct.unpack_from(">h", data, pos)[0]
    if error:
        return None
    pos += 2
    for _ in range(3):  # error message, group id, group state
        _, pos = _compact_string(data, pos)
    pos += 8  # group epoch, assignment epoch
    _, pos = _compact_string(data, pos)  # assignor name
    members, pos = read_uvarint(data, pos)
    racks: dict[str, str | None] = {}
    for _ in range(members - 1):
        member_id, pos = _compact_string(data, pos)
        _, pos = _compact_string(data, pos)  # instance id
        rack, pos = _compact_string(data, pos)
        racks[member_id or ""] = rack
        break  # the fields after RackId are not needed: one member per group here
    return racks or None


def test_kip848_member_gets_the_proxys_rack(rig: SystemRig, topic: str, tmp_path: Path,
                                            java_client: JavaClient) -> None:
    assert rig.cluster is not None
    proxy = RackguardProxy(rig.cluster.bootstrap, tmp_path, tuple(BROKER_RACKS),
                           ("--client-rack", "rack-c"))
    proxy.start()
    members: list[subprocess.Popen[str]] = []
    groups = {"via-proxy": f"k848-proxy-{uuid.uuid4().hex[:6]}",
              "direct": f"k848-direct-{uuid.uuid4().hex[:6]}"}
    try:
        for n in BROKER_RACKS:
            wire.wait_for_port(*proxy.broker_address(n), 30, proc=proxy.proc)
        for where, group in groups.items():
            bootstrap = proxy.bootstrap if where == "via-proxy" else rig.cluster.bootstrap
            members.append(subprocess.Popen(
                java_client.argv("member", bootstrap=bootstrap, topic=topic, group=group,
                                 seconds=60, group_protocol="consumer"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        seen: dict[str, str | None] = {}
        deadline = time.monotonic() + 90
        while len(seen) < len(groups) and time.monotonic() < deadline:
            for where, group in groups.items():
                for node in rig.cluster.brokers:
                    racks = describe_racks(node.port, group)
                    if racks:
                        seen[where] = next(iter(racks.values()))
            time.sleep(1)
        assert set(seen) == set(groups), (seen, [m.poll() for m in members])
        assert seen["via-proxy"] == "rack-c"
        assert not seen["direct"]  # the client named none, and nothing filled it in
    finally:
        for m in members:
            m.terminate()
            try:
                m.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                m.kill()
        proxy.stop()
