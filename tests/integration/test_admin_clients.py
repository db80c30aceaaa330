"""min.insync.racks through real admin clients: kafka-python's KafkaAdminClient,
confluent-kafka's AdminClient and the Java AdminClient, through ``rackguard serve``
to the simulator (six brokers in three racks, which like Kafka refuses the config
name itself), with the config topic in the simulator.

Invariants under test: each client sets, reads back (with the right source) and, for
the KIP's outage item, lowers the value so that a producer refused while a rack is
out succeeds within 2 s without reconnecting; a bad value is refused with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from simulator.threaded import ThreadedCluster

from .harness import java
from .kip_support import (
    KafkaPythonProducer,
    KipProxy,
    start_cluster,
    topic,
    wait_until,
)

pytestmark = pytest.mark.integration
R = "min.insync.racks"


@pytest.fixture
def rig(it_logs: Path) -> Iterator[tuple[ThreadedCluster, KipProxy]]:
    cluster = start_cluster(topic("orders"), topic("other"))
    proxy = KipProxy(cluster, it_logs)
    try:
        proxy.start()
        yield cluster, proxy
    finally:
        proxy.stop()
        cluster.stop()


def kafka_python_admin(proxy: KipProxy) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=proxy.bootstrap, request_timeout_ms=10000)


def test_kafka_python_admin(rig: tuple[ThreadedCluster, KipProxy]) -> None:
    _, proxy = rig
    admin = kafka_python_admin(proxy)
    try:
        for incremental, value in ((True, "1"), (False, "3")):
            result = admin.alter_configs([KConfigResource(
                ConfigResourceType.TOPIC, "orders", configs={R: value})], incremental=incremental)
            assert result == {"topic": {"orders": "OK"}}
            shown = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "orders")])
            assert shown["topic"]["orders"][R]["value"] == value
            assert shown["topic"]["orders"][R]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        refused = admin.alter_configs([KConfigResource(
            ConfigResourceType.TOPIC, "orders", configs={R: "x"})])
        assert "must be an integer >= 1" in refused["topic"]["orders"]
    finally:
        admin.close()


def set_racks(admin: AdminClient, name: str, value: str) -> None:
    resource = ConfigResource("topic", name, incremental_configs=[
        ConfigEntry(R, value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)


def test_kip_outage_item(rig: tuple[ThreadedCluster, KipProxy]) -> None:
    """A rack is down, acks=all produces are refused; an Admin call lowers the topic to 1;
    the same producer, without reconnecting, succeeds within 2 s; restored to 2, refused.

    The topic's replicas are in rack-a and rack-c, so rack-c down leaves its ISR in one
    rack; the config topic (three racks) keeps two in-sync replicas and takes the write.
    """
    cluster, proxy = rig
    cluster.call(lambda c: c.core.state.create_topic(
        "zonal", 1, 4, {"min.insync.replicas": "2"}, [[1, 3, 4, 6]]))
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    producer = KafkaPythonProducer(proxy.bootstrap, "all", retries=1000,
                                   retry_backoff_ms=50, delivery_timeout_ms=20000,
                                   request_timeout_ms=5000)
    try:
        assert producer.send("zonal", 0, [b"before"])[0].ok
        assert cluster.kill_rack("rack-c") == [3, 6]  # the ISR is now [1, 4]: one rack
        proxy.refreshed_since(time.monotonic())  # the proxy's view follows
        producer.start_send("zonal", 0, [b"during"])
        wait_until(lambda: proxy.rejection_lines("zonal"), 10, "a refusal")  # retrying
        lowered = time.monotonic()
        set_racks(admin, "zonal", "1")
        outcome = producer.finish()[0]
        assert outcome.ok, outcome
        assert time.monotonic() - lowered < 2.0  # the same producer, not reconnected
        set_racks(admin, "zonal", "2")
        refusals = len(proxy.rejection_lines("zonal"))
        producer.start_send("zonal", 0, [b"again"])
        wait_until(lambda: len(proxy.rejection_lines("zonal")) > refusals, 10, "a refusal")
        cluster.restore_rack("rack-c")
        assert producer.finish()[0].ok  # the rack is back
    finally:
        producer.close()


def test_confluent_admin_client(rig: tuple[ThreadedCluster, KipProxy]) -> None:
    _, proxy = rig
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    resource = ConfigResource("topic", "other", incremental_configs=[
        ConfigEntry(R, "1", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    described = admin.describe_configs([ConfigResource("topic", "other")])
    entries = next(iter(described.values())).result(timeout=15)
    assert entries[R].value == "1"
    assert entries[R].source == 1  # DYNAMIC_TOPIC_CONFIG
    bad = ConfigResource("topic", "other", incremental_configs=[
        ConfigEntry(R, "0", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="must be an integer >= 1"):
        admin.incremental_alter_configs([bad])[bad].result(timeout=15)
    gone = ConfigResource("topic", "other", incremental_configs=[
        ConfigEntry(R, None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([gone])[gone].result(timeout=15)
    entries = next(iter(admin.describe_configs(
        [ConfigResource("topic", "other")]).values())).result(timeout=15)
    assert entries[R].value == "2" and entries[R].source == 4  # the proxy's own flag


def test_java_admin_client(rig: tuple[ThreadedCluster, KipProxy],
                           java_client: java.JavaClient) -> None:
    _, proxy = rig
    run = java_client.run("configs", bootstrap=proxy.bootstrap, topic="java-made",
                          value="2", lowered="1")
    assert run.returncode == 0 and run.result is not None, str(run)
    assert run.result["created"] == {"value": "2", "source": "DYNAMIC_TOPIC_CONFIG",
                                     "synonyms": 3}
    assert run.result["altered"]["value"] == "1"
    assert "InvalidConfigurationException" in run.result["refused"]
    assert "must be an integer >= 1" in run.result["refused"]
    wait_until(lambda: proxy.count("min.insync.racks of topic 'java-made'") >= 2, 5,
               "the two changes in the proxy log")
