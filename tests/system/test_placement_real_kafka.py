"""Replica placement on real Kafka (six brokers, rack-a: 1, 4; rack-b: 2, 5; rack-c: 3, 6)
behind rackguard (min.insync.racks 2):

- a topic created straight at the cluster with one rack per partition for three of its
  four partitions (RF 2): ``rackguard placement audit`` through the proxy counts them;
- ``rackguard placement plan --fix`` (sizes from the brokers' DescribeLogDirs) is
  executed with Kafka's own kafka-reassign-partitions through the proxy; once it has
  completed the audit finds nothing unsatisfiable, leaders kept, replicas as planned;
- the creation guard: the same assignment asked through the proxy is refused per topic
  with INVALID_REPLICA_ASSIGNMENT, the broker never sees it.

Needs the local Maven cluster (the tool jars come with it); skips on other rigs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from .rig import SystemRig
from .test_kafka_tools import tool

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
SKEWED = {0: [1, 4], 1: [2, 5], 2: [3, 6], 3: [1, 2]}  # Kafka wants one RF


def placement(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy.cli", "placement", *args],
                          capture_output=True, text=True, timeout=120)


def reassign(rig: SystemRig, *args: str) -> str:
    return tool(rig, REASSIGN, *args)


@pytest.fixture(scope="module")
def skewed(rig: SystemRig) -> Iterator[str]:
    if rig.cluster is None:
        pytest.skip("kafka-reassign-partitions comes with the locally resolved release")
    name = f"rg-place-{uuid.uuid4().hex[:8]}"
    direct = KafkaAdminClient(bootstrap_servers=rig.cluster.bootstrap)
    try:
        direct.create_topics([NewTopic(name, -1, -1, replica_assignments=SKEWED)])
    finally:
        direct.close()
    producer = KafkaProducer(bootstrap_servers=rig.bootstrap, acks=1)
    for i in range(400):
        producer.send(name, b"x" * 1000, partition=i % 4)
    producer.flush(60)
    producer.close()
    yield name
    direct = KafkaAdminClient(bootstrap_servers=rig.cluster.bootstrap)
    try:
        direct.delete_topics([name])
    finally:
        direct.close()


def audit(rig: SystemRig, topic: str) -> dict[str, int]:
    done = placement("audit", "--bootstrap", rig.bootstrap, "--topic", topic,
                     "--min-insync-racks", "2", "--json")
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)["topics"]
    return {k: found[k] for k in ("unsatisfiable", "fragile", "healthy")}


def test_audit_plan_reassign_audit_again(rig: SystemRig, skewed: str, tmp_path: Path) -> None:
    assert audit(rig, skewed) == {"unsatisfiable": 3, "fragile": 1, "healthy": 0}
    out = tmp_path / "fix.json"
    plan = placement("plan", "--fix", "--bootstrap", rig.bootstrap, "--topic", skewed,
                     "--min-insync-racks", "2", "--out", str(out))
    assert plan.returncode == 0, plan.stderr
    assert "3 partitions to reassign, 3 replica moves" in plan.stderr
    assert "unknown to copy" not in plan.stderr  # sizes from DescribeLogDirs
    planned = {p["partition"]: p["replicas"] for p in json.loads(out.read_text())["partitions"]}
    assert sorted(planned) == [0, 1, 2]
    assert all(planned[p][0] == SKEWED[p][0] for p in planned)  # leaders kept

    reassign(rig, "--reassignment-json-file", str(out), "--execute")
    deadline = time.monotonic() + 120
    while "is still in progress" in (verify := reassign(rig, "--reassignment-json-file", str(out),
                                                        "--verify")):
        assert time.monotonic() < deadline, verify
        time.sleep(1)
    assert "complete" in verify
    time.sleep(2)  # the proxy's view and the brokers' metadata catch up
    assert audit(rig, skewed) == {"unsatisfiable": 0, "fragile": 4, "healthy": 0}
    admin = KafkaAdminClient(bootstrap_servers=rig.bootstrap)
    try:
        (described,) = admin.describe_topics([skewed])
    finally:
        admin.close()
    now = {p["partition_index"]: p["replica_nodes"] for p in described["partitions"]}
    assert {p: now[p] for p in planned} == planned


def test_creation_guard_on_real_kafka(rig: SystemRig) -> None:
    name = f"rg-guard-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=rig.bootstrap)
    try:
        result = admin.create_topics([NewTopic(name, -1, -1, replica_assignments=SKEWED)],
                                     raise_errors=False)
        (topic,) = result["topics"]
        assert topic["error_code"] == 39
        assert "partition 0 replicas [1, 4] span 1 rack(s) (rack-a)" in topic["error_message"]
        assert name not in admin.list_topics()
    finally:
        admin.close()
