"""Replica placement end to end: ``rackguard serve`` in front of the simulator (six
brokers; rack-a: 1, 4; rack-b: 2, 5; rack-c: 3, 6) with min.insync.racks 2.

- the creation guard, through kafka-python's and confluent-kafka's admin clients:
  explicit assignments that cannot span 2 racks are refused per topic with
  INVALID_REPLICA_ASSIGNMENT, the others and topics without assignments are created,
  validate_only gets the same verdicts and creates nothing, CreatePartitions alike;
- the audit, the --fix plan and its execution: ``rackguard placement audit`` and
  ``plan --fix`` read the cluster through the proxy, the plan is applied with
  AlterPartitionReassignments, and the audit afterwards finds nothing unsatisfiable;
  the proxy's placement metrics follow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from simulator.threaded import ThreadedCluster
from tests.prometheus_text import Samples, metrics_url, read_samples

from . import kip_support as ks
from .harness.java import JavaClient
from .harness.ports import free_port

pytestmark = pytest.mark.integration
INVALID_REPLICA_ASSIGNMENT = 39


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ThreadedCluster,
                                                                   ks.KipProxy, int]]:
    cluster = ks.start_cluster(ks.topic("existing", partitions=2, rf=2))
    metrics_port = free_port()
    proxy = ks.KipProxy(cluster, tmp_path_factory.mktemp("placement"), min_insync_racks=2,
                        extra=("--metrics-port", str(metrics_port), "--view-scope", "cluster"))
    try:
        proxy.start()
        yield cluster, proxy, metrics_port
    finally:
        proxy.stop()
        cluster.stop()


def _admin(proxy: ks.KipProxy) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=proxy.bootstrap, request_timeout_ms=10000)


def test_kafka_python_create_topics_refused_per_topic(rig: tuple[ThreadedCluster,
                                                                  ks.KipProxy, int]) -> None:
    cluster, proxy, _ = rig
    admin = _admin(proxy)
    try:
        topics = [
            NewTopic("kp-bad", -1, -1, replica_assignments={0: [1, 2], 1: [1, 4]}),
            NewTopic("kp-good", -1, -1, replica_assignments={0: [1, 2], 1: [3, 4]}),
            NewTopic("kp-auto", 2, 2),
        ]
        for validate_only in (True, False):
            result = admin.create_topics(topics, validate_only=validate_only,
                                         raise_errors=False)
            errors = {t["name"]: (t["error_code"], t["error_message"])
                      for t in result["topics"]}
            assert errors["kp-bad"][0] == INVALID_REPLICA_ASSIGNMENT
            assert "partition 1 replicas [1, 4] span 1 rack(s) (rack-a)" in errors["kp-bad"][1]
            assert errors["kp-good"][0] == 0 and errors["kp-auto"][0] == 0
            created = {"kp-good", "kp-auto"} <= set(cluster.cluster.core.state.topics)
            assert created is not validate_only
        assert "kp-bad" not in cluster.cluster.core.state.topics
        answer = admin.create_partitions(
            {"kp-good": {"count": 4, "assignments": [[2, 5], [3, 1]]}}, raise_errors=False)
        (entry,) = answer.results
        assert entry.error_code == INVALID_REPLICA_ASSIGNMENT
        assert "partition 2 replicas [2, 5]" in entry.error_message
        admin.create_partitions({"kp-good": {"count": 3, "assignments": [[2, 6]]}})
        assert cluster.partition_info("kp-good", 2)["replicas"] == [2, 6]
    finally:
        admin.close()


def test_confluent_kafka_create_topics_refused_per_topic(
    rig: tuple[ThreadedCluster, ks.KipProxy, int],
) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import NewTopic as CNewTopic

    cluster, proxy, _ = rig
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    futures = admin.create_topics([
        CNewTopic("ck-bad", 2, replica_assignment=[[2, 5], [3, 6]]),
        CNewTopic("ck-good", 2, replica_assignment=[[2, 3], [3, 4]]),
    ], request_timeout=10)
    futures["ck-good"].result(timeout=15)
    with pytest.raises(KafkaException) as refused:
        futures["ck-bad"].result(timeout=15)
    error = refused.value.args[0]
    assert error.code() == INVALID_REPLICA_ASSIGNMENT
    assert "min.insync.racks 2" in error.str()
    assert "ck-good" in cluster.cluster.core.state.topics
    assert "ck-bad" not in cluster.cluster.core.state.topics


def test_java_admin_client_create_topics_and_partitions(
    rig: tuple[ThreadedCluster, ks.KipProxy, int], java_client: JavaClient,
) -> None:
    cluster, proxy, _ = rig
    topics = cluster.cluster.core.state.topics
    run = java_client.run
    refused = run("create-assigned", bootstrap=proxy.bootstrap, topic="jv-bad",
                  assignment="1,4;2,3", validate=1).result
    assert refused is not None and refused["error"] == "InvalidReplicaAssignmentException"
    assert "partition 0 replicas [1, 4] span 1 rack(s) (rack-a)" in refused["message"]
    validated = run("create-assigned", bootstrap=proxy.bootstrap, topic="jv-good",
                    assignment="1,2;2,3", validate=1).result
    assert validated is not None and validated["error"] is None and "jv-good" not in topics
    created = run("create-assigned", bootstrap=proxy.bootstrap, topic="jv-good",
                  assignment="1,2;2,3").result
    assert created is not None and created["error"] is None and "jv-good" in topics
    grown = run("create-assigned", bootstrap=proxy.bootstrap, topic="jv-good",
                kind="partitions", count=3, assignment="3,6").result
    assert grown is not None and grown["error"] == "InvalidReplicaAssignmentException"
    assert len(topics["jv-good"].partitions) == 2


def _placement(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy.cli", "placement", *args],
                          capture_output=True, text=True, timeout=60)


def _scrape(port: int) -> Samples:
    return read_samples(metrics_url(port))


def test_audit_and_plan_through_the_proxy(rig: tuple[ThreadedCluster, ks.KipProxy, int],
                                          tmp_path: Path) -> None:
    """What the proxy and its placement command read and write; executing the plan and
    the audit after it are proven on real Kafka (tests/system/test_placement_real_kafka.py:
    the simulator does not simulate reassignments)."""
    cluster, proxy, metrics_port = rig
    # one rack per partition: what an assignment made behind the proxy's back can leave
    direct = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        direct.create_topics([NewTopic("skewed", -1, -1, replica_assignments={
            0: [1, 4], 1: [2, 5], 2: [3, 6]})])
    finally:
        direct.close()
    unsat = ("rackguard_placement_unsatisfiable_partitions", (("topic", "skewed"),))
    ks.wait_until(lambda: _scrape(metrics_port).get(unsat) == 3, 10, "metrics to see skewed")

    audit = _placement("audit", "--bootstrap", proxy.bootstrap, "--topic", "skewed", "--json")
    assert audit.returncode == 0, audit.stderr
    (skewed,) = json.loads(audit.stdout)["topics"]
    assert (skewed["unsatisfiable"], skewed["fragile"]) == (3, 0)

    out = tmp_path / "plan.json"
    plan = _placement("plan", "--fix", "--bootstrap", proxy.bootstrap, "--topic", "skewed",
                      "--out", str(out))
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(out.read_text())
    assert doc["version"] == 1 and len(doc["partitions"]) == 3
    rollback = json.loads(out.with_suffix(".rollback.json").read_text())
    assert [p["replicas"] for p in rollback["partitions"]] == [[1, 4], [2, 5], [3, 6]]
    for p in doc["partitions"]:  # two racks each, the leader kept
        racks = {ks.rack_of(n) for n in p["replicas"]}
        assert len(racks) == 2, p
        assert p["replicas"][0] == rollback["partitions"][p["partition"]]["replicas"][0]
    guard = _scrape(metrics_port)
    assert guard[("rackguard_placement_guard_topics_total",
                  (("api", "CreateTopics"), ("decision", "refused")))] >= 2
