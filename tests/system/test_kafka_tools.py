"""Kafka's own command-line tools through rackguard, unchanged: kafka-topics,
kafka-configs and kafka-consumer-groups, run from the resolved release's jars
with ``--bootstrap-server`` naming the proxy.

Needs the local Maven cluster (the jars carry the tools); skips on other rigs.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest

from tests.system import kafka_dist

from .rig import SystemRig

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def config_command(version: str) -> str:
    # moved from core (Scala) to the tools module in Kafka 4.0
    return ("org.apache.kafka.tools.ConfigCommand" if int(version.split(".")[0]) >= 4
            else "kafka.admin.ConfigCommand")


def run_tool(rig: SystemRig, main: str, *args: str,
             bootstrap: str | None = None) -> subprocess.CompletedProcess[str]:
    """One of Kafka's command-line tools (``main``, a class of the resolved release) against
    ``bootstrap`` (default: the rig's, that is through the proxy)."""
    assert rig.cluster is not None
    return subprocess.run(
        ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-cp",
         kafka_dist.classpath(rig.cluster.kafka_version), main,
         "--bootstrap-server", bootstrap or rig.bootstrap, *args],
        capture_output=True, text=True, timeout=120)


def tool(rig: SystemRig, main: str, *args: str, bootstrap: str | None = None) -> str:
    """A tool's output; it must succeed."""
    done = run_tool(rig, main, *args, bootstrap=bootstrap)
    assert done.returncode == 0, f"{main} {args}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def topic(rig: SystemRig) -> Iterator[str]:
    if rig.cluster is None:
        pytest.skip("the Kafka tools come with the locally resolved release")
    name = f"rg-tools-{uuid.uuid4().hex[:8]}"
    created = tool(rig, TOPIC_COMMAND, "--create", "--topic", name, "--partitions", "3",
                   "--replication-factor", "3", "--config", "min.insync.replicas=2")
    assert f"Created topic {name}." in created
    yield name
    tool(rig, TOPIC_COMMAND, "--delete", "--topic", name)


def test_kafka_topics_lists_and_describes(rig: SystemRig, topic: str) -> None:
    assert topic in tool(rig, TOPIC_COMMAND, "--list").split()
    described = tool(rig, TOPIC_COMMAND, "--describe", "--topic", topic)
    assert "PartitionCount: 3" in described and "ReplicationFactor: 3" in described
    rows = [line for line in described.splitlines() if "Partition: " in line
            and "Leader: " in line]
    assert len(rows) == 3
    assert all("Isr: " in r for r in rows)


def test_kafka_configs_describes_the_topic(rig: SystemRig, topic: str) -> None:
    assert rig.cluster is not None
    out = tool(rig, config_command(rig.cluster.kafka_version), "--describe", "--entity-type",
               "topics", "--entity-name", topic)
    assert "min.insync.replicas=2" in out


def test_kafka_consumer_groups_describes_a_group(rig: SystemRig, topic: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    group = f"rg-tools-group-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(bootstrap_servers=rig.bootstrap, acks="all")
    for i in range(6):
        producer.send(topic, f"tools-{i}".encode(), partition=i % 3)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=rig.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=15000)
    read = 0
    for _ in consumer:
        read += 1
        if read == 6:
            break
    consumer.commit()
    consumer.close()
    assert read == 6
    assert group in tool(rig, GROUP_COMMAND, "--list").split()
    described = tool(rig, GROUP_COMMAND, "--describe", "--group", group)
    rows = [line.split() for line in described.splitlines() if line.startswith(group)]
    assert sorted(int(r[2]) for r in rows if r[1] == topic) == [0, 1, 2]
    assert sum(int(r[3]) for r in rows if r[1] == topic) == 6  # committed offsets
