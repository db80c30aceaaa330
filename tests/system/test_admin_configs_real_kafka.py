"""min.insync.racks with Kafka's own kafka-configs, through rackguard, on REAL Apache Kafka.

The KIP's outage procedure, as an operator runs it: a topic whose replicas are in
rack-a and rack-c; rack-c stops, so its ISR is in one rack and acks=all produces are
refused; ``kafka-configs --alter --topic T --add-config min.insync.racks=1`` lets
them through without a restart; a second rackguard started later has the value (it
reads the config topic in the cluster) and ``--describe`` through it shows it as
DYNAMIC_TOPIC_CONFIG; restoring 2 refuses them again.

Needs the local Maven cluster (the jars carry kafka-configs); skips on other rigs.
"""

from __future__ import annotations

import struct
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from protocol.metadata import PartitionMetadata, TopicMetadata, read_metadata
from tests.integration.harness.java import JavaClient
from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import RackguardProxy
from tests.integration.harness.wire import RawKafkaConnection
from tests.integration.kip_support import NOT_ENOUGH_REPLICAS, RACKS_PREFIX, raw_produce_to
from tests.system.cluster import BROKER_RACKS

from .rig import PROXY_ARGS, SystemRig
from .test_kafka_tools import TOPIC_COMMAND, config_command, run_tool, tool
from .test_kip_real_kafka import wait_until

pytestmark = pytest.mark.system
R = "min.insync.racks"


def configs(rig: SystemRig, *args: str, bootstrap: str | None = None,
            entity: str = "topics") -> str:
    assert rig.cluster is not None
    return tool(rig, config_command(rig.cluster.kafka_version), "--entity-type", entity, *args,
                bootstrap=bootstrap)


def refused(rig: SystemRig, *args: str) -> str:
    """kafka-configs' output for a change that must fail."""
    assert rig.cluster is not None
    done = run_tool(rig, config_command(rig.cluster.kafka_version), *args)
    assert done.returncode != 0, done.stdout
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def zonal(rig: SystemRig) -> Iterator[str]:
    """One partition on brokers 1, 3, 4, 6: rack-a and rack-c only."""
    if rig.cluster is None:
        pytest.skip("kafka-configs comes with the locally resolved release")
    name = f"rg-zonal-{uuid.uuid4().hex[:8]}"
    assert [BROKER_RACKS[n] for n in (1, 3, 4, 6)] == ["rack-a", "rack-c", "rack-a", "rack-c"]
    tool(rig, TOPIC_COMMAND, "--create", "--topic", name,
         "--replica-assignment", "1:3:4:6", "--config", "min.insync.replicas=2")
    yield name
    tool(rig, TOPIC_COMMAND, "--delete", "--topic", name)


def produce(bootstrap: str, name: str, value: bytes) -> tuple[int, str]:
    """One acks=all record to the partition's leader through the proxy at ``bootstrap``
    (the leader's address as that proxy's Metadata gives it)."""
    host, port = bootstrap.rsplit(":", 1)
    deadline = time.monotonic() + 10  # a topic just created reaches every broker shortly after
    while True:
        with RawKafkaConnection(host, int(port), timeout=10.0, client_id="rg-system") as conn:
            raw, _ = conn.request(MetadataRequest(version=5, topics=[name],
                                                  allow_auto_topic_creation=False),
                                  MetadataResponse, 5)
        snap = read_metadata(struct.pack(">i", len(raw)) + raw, 5)
        if TopicMetadata(*snap.topics[0]).partitions or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    leader = first_leader(snap.topics)
    broker = next(b for b in snap.brokers if b.node_id == leader)
    result = raw_produce_to((broker.host, broker.port), [(name, 0, [value])])[0]
    return result.error_code, result.error_message or ""


def wait_ready(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} not ready within {timeout:.0f} s")
        time.sleep(0.5)


def config_metrics(rig: SystemRig) -> dict[str, float]:
    """The rig's proxy's config-topic counters: changes applied, read failures."""
    assert rig.metrics_url is not None
    with urllib.request.urlopen(rig.metrics_url, timeout=5) as r:
        text = r.read().decode()
    out = {"changes": 0.0, "read_failures": 0.0}
    for line in text.splitlines():
        if line.startswith("rackguard_config_changes_total{"):
            out["changes"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("rackguard_config_topic_read_failures_total"):
            out["read_failures"] += float(line.rsplit(" ", 1)[1])
    return out


def test_kafka_configs_during_a_rack_outage(rig: SystemRig, zonal: str,
                                           tmp_path: Path) -> None:
    assert rig.cluster is not None
    first = rig.bootstrap
    assert produce(first, zonal, b"before") == (0, "")
    rig.stop_rack("rack-c")  # the ISR: brokers 1 and 4, one rack
    wait_until(lambda: produce(first, zonal, b"refused")[0] == NOT_ENOUGH_REPLICAS,
               "acks=all refused with the racks of one rack")
    code, message = produce(first, zonal, b"refused")
    assert code == NOT_ENOUGH_REPLICAS and message.startswith(RACKS_PREFIX)

    configs(rig, "--alter", "--entity-name", zonal, "--add-config", f"{R}=1")
    lowered = time.monotonic()
    assert produce(first, zonal, b"lowered") == (0, "")
    assert time.monotonic() - lowered < 2.0  # no restart, no reconnect of the proxy

    # a second rackguard, started now: it reads the value from the cluster
    metrics_port = free_port()
    second = RackguardProxy(rig.cluster.bootstrap, tmp_path, tuple(BROKER_RACKS),
                            (*PROXY_ARGS, "--metrics-port", str(metrics_port)))
    second.start()
    try:
        wait_ready(f"http://127.0.0.1:{metrics_port}/readyz")
        shown = configs(rig, "--describe", "--entity-name", zonal, bootstrap=second.bootstrap)
        assert f"{R}=1" in shown and f"DYNAMIC_TOPIC_CONFIG:{R}=1" in shown, shown
        assert f"STATIC_BROKER_CONFIG:{R}=2" in shown, shown  # the proxy's own flag
        assert produce(second.bootstrap, zonal, b"second") == (0, "")

        before = config_metrics(rig)
        configs(rig, "--alter", "--entity-name", zonal, "--add-config", f"{R}=2",
                bootstrap=second.bootstrap)
        stored = time.monotonic()  # the second proxy answered: the change is stored
        # the first proxy's reader long-polls the config topic: the leader answers it as
        # soon as the record is committed, not when its wait ends
        while (now := config_metrics(rig))["changes"] == before["changes"]:
            assert time.monotonic() - stored < 5, (
                f"the change was not applied by the first proxy within 5 s ({now})")
            time.sleep(0.05)
        print(f"applied by the first proxy {time.monotonic() - stored:.2f} s after "
              f"kafka-configs returned through the second ({now})")
        wait_until(lambda: produce(first, zonal, b"x")[0] == NOT_ENOUGH_REPLICAS,
                   "the restored value in force on the first proxy", timeout=5)
    finally:
        second.stop()
        rig.start_rack("rack-c")
    configs(rig, "--alter", "--entity-name", zonal, "--delete-config", R)
    assert f"{R}=" not in configs(rig, "--describe", "--entity-name", zonal)


def test_cluster_default_and_bad_values(rig: SystemRig, zonal: str) -> None:
    configs(rig, "--alter", "--entity-default", "--add-config", f"{R}=1", entity="brokers")
    shown = configs(rig, "--describe", "--entity-default", entity="brokers")
    assert f"{R}=1" in shown and "DYNAMIC_DEFAULT_BROKER_CONFIG" in shown, shown
    configs(rig, "--alter", "--entity-default", "--delete-config", R, entity="brokers")
    assert f"{R}=" not in configs(rig, "--describe", "--entity-default", entity="brokers")
    out = refused(rig, "--entity-type", "topics", "--alter", "--entity-name", zonal,
                  "--add-config", f"{R}=0")
    assert "must be an integer >= 1" in out, out


def first_leader(topics: Sequence[tuple[Any, ...]]) -> int:
    """The leader of the first partition of the first topic of a read Metadata answer."""
    return PartitionMetadata(*TopicMetadata(*topics[0]).partitions[0]).leader


def config_topic_leader_rack(rig: SystemRig) -> str:
    host, port = rig.host_port
    with RawKafkaConnection(host, port, timeout=10.0, client_id="rg-system") as conn:
        raw, _ = conn.request(MetadataRequest(version=5, topics=["__rackguard_configs"],
                                              allow_auto_topic_creation=False),
                              MetadataResponse, 5)
    snap = read_metadata(struct.pack(">i", len(raw)) + raw, 5)
    return BROKER_RACKS[first_leader(snap.topics)]


def test_a_change_while_the_config_topics_rack_hangs(rig: SystemRig, zonal: str,
                                                    tmp_path: Path) -> None:
    """A zone failure is usually a hang: the rack leading the config topic stops answering
    (SIGSTOP, sockets open). Kafka moves the leadership; a change made meanwhile, retried as
    an operator would, is stored and in force on the proxy within the retries."""
    if rig.freeze_rack_fn is None:
        pytest.skip("this rig cannot freeze a rack")
    rack = config_topic_leader_rack(rig)
    quick = tmp_path / "admin.properties"
    quick.write_text("request.timeout.ms=5000\ndefault.api.timeout.ms=15000\n")
    rig.freeze_rack(rack)
    started = time.monotonic()

    def retried(*args: str) -> str:
        """A tool call retried as an operator would (its client may pick a hung broker)."""
        while True:
            try:
                return configs(rig, "--command-config", str(quick), *args)
            except AssertionError:
                assert time.monotonic() - started < 90, f"{args} did not succeed within 90 s"

    try:
        retried("--alter", "--entity-name", zonal, "--add-config", f"{R}=1")
        took = time.monotonic() - started
        shown = retried("--describe", "--entity-name", zonal)
        assert f"DYNAMIC_TOPIC_CONFIG:{R}=1" in shown, shown
    finally:
        rig.thaw_rack(rack)
    print(f"stored {took:.1f} s after {rack} (the config topic's leader) froze")
    configs(rig, "--alter", "--entity-name", zonal, "--delete-config", R)


def test_create_topics_with_the_config(rig: SystemRig, java_client: JavaClient) -> None:
    """The Java AdminClient creates a topic with min.insync.racks in its configs (the
    proxy takes it out before the broker, which does not know the name); kafka-topics
    cannot: it checks topic config names itself and never sends the request."""
    name = f"rg-created-{uuid.uuid4().hex[:8]}"
    run = java_client.run("configs", bootstrap=rig.bootstrap, topic=name, value="3",
                          lowered="1")
    try:
        assert run.returncode == 0 and run.result is not None, str(run)
        assert run.result["created"]["value"] == "3"
        assert run.result["created"]["source"] == "DYNAMIC_TOPIC_CONFIG"
        assert run.result["altered"]["value"] == "1"
        assert "must be an integer >= 1" in run.result["refused"]
        shown = configs(rig, "--describe", "--entity-name", name)
        assert f"{R}=1" in shown, shown
    finally:
        tool(rig, TOPIC_COMMAND, "--delete", "--topic", name)
    done = run_tool(rig, TOPIC_COMMAND, "--create", "--topic", name + "-cli",
                    "--replication-factor", "3", "--partitions", "1", "--config", f"{R}=2")
    assert done.returncode != 0
    assert f"Unknown topic config name: {R}" in done.stdout + done.stderr
