"""Same-rack fetching through the sidecar against REAL Apache Kafka (KIP-392).

The local rig's brokers (tests/system/cluster.py: six in three racks) run
RackAwareReplicaSelector. A topic of 6 partitions, replication factor 3 (Kafka puts a
replica in every rack); in each rack a kafka-python consumer without a rack of its own
reads it all through a ``rackguard serve`` of that rack with ``--client-rack``:
``observe`` first (nothing changed: about two thirds of the bytes cross racks, by the
proxies' rackguard_fetch_bytes_total), then ``fill`` (the leaders send each consumer to
its rack's replica: cross-rack bytes near zero).

Needs the rig this repository starts (the proxies are started here, in front of its
brokers); an existing deployment named by RGTEST_* variables skips.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.harness import wire
from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import RackguardProxy

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
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {s.labels["locality"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "rackguard_fetch_bytes_total"}


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
