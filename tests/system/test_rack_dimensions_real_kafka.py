"""The rack rule over two dimensions (region and zone) on REAL Apache Kafka.

The suite's brokers are in rack-a, rack-b and rack-c; a ``rackguard serve`` in front of
them labels them by region and zone (``--broker-rack`` with ``--broker-racks-override``):
rack-a and rack-b are two zones of eu-central-1, rack-c the one zone of eu-west-1. A
topic that needs 2 regions (and 2 racks) and a topic that needs 2 racks only, each with
a replica in every rack and min.insync.replicas=2. KIP-1290's plan, per dimension:

- every rack up: acks=all succeeds on both;
- eu-west-1 down (rack-c stopped): the ISR still spans 2 racks, so the plain topic's
  acks=all succeeds, but it spans 1 region, so the region topic's is refused
  NOT_ENOUGH_RACKS naming the region; acks=1 is untouched; the rack coverage metrics
  say so per dimension (every region-topic partition under its region minimum);
- the same minimum through the Admin API, with Kafka's own kafka-configs through the
  proxy (``min.insync.racks.region``, kept in the config topic): lowered to 1 on the
  region topic, its acks=all succeeds, ``--describe`` shows the dynamic value over the
  proxy's flag; raised to 2 on the plain topic, its acks=all is refused naming the
  region; a dimension rack_dimensions does not name is refused; a topic created through
  the proxy with ``min.insync.racks.region=2`` among its configs is refused likewise;
- rack-c back: acks=all succeeds on both again.

Needs the rig this repository starts (the proxy here is started in front of its brokers).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from protocol.metadata import MetadataSnapshot, PartitionMetadata, TopicMetadata, read_metadata
from tests.integration.harness import wire
from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import RackguardProxy
from tests.integration.harness.wire import RawKafkaConnection
from tests.integration.kip_support import NOT_ENOUGH_REPLICAS, raw_produce_to
from tests.prometheus_text import metrics_url, read_samples, sample, total

from .cluster import BROKER_RACKS
from .rig import SystemRig
from .test_kafka_tools import config_command, run_tool, tool

pytestmark = pytest.mark.system

PARTITIONS = 3
REGION = "min.insync.racks.region"
REGION_ZONE = {"rack-a": "eu-central-1/eu-central-1a", "rack-b": "eu-central-1/eu-central-1b",
               "rack-c": "eu-west-1/eu-west-1a"}


@pytest.fixture
def proxy(rig: SystemRig, tmp_path: Path) -> Iterator[tuple[RackguardProxy, str, str, int]]:
    if rig.cluster is None:
        pytest.skip("needs the Kafka cluster this repository starts (tests/system/cluster.py)")
    from kafka.admin import KafkaAdminClient, NewTopic

    suffix = uuid.uuid4().hex[:8]
    regional, plain = f"dims-region-{suffix}", f"dims-plain-{suffix}"
    admin = KafkaAdminClient(bootstrap_servers=rig.cluster.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(t, PARTITIONS, 3,
                                      topic_configs={"min.insync.replicas": "2"})
                             for t in (regional, plain)])
    finally:
        admin.close()
    metrics_port = free_port()
    labels = [a for n, r in BROKER_RACKS.items() for a in ("--broker-rack",
                                                          f"{n}={REGION_ZONE[r]}")]
    p = RackguardProxy(rig.cluster.bootstrap, tmp_path, tuple(BROKER_RACKS), (
        "--min-insync-racks", "2", *labels, "--broker-racks-override",
        "--rack-dimensions", "region/zone",
        "--topic-min-insync-racks-by-dimension", f"{regional}/region=2",
        "--metadata-refresh-interval-ms", "1000", "--metrics-port", str(metrics_port)))
    p.start()
    try:
        for n in BROKER_RACKS:
            wire.wait_for_port(*p.broker_address(n), 30, proc=p.proc)
        yield p, regional, plain, metrics_port
    finally:
        p.stop()


def metadata(p: RackguardProxy, topics: list[str]) -> MetadataSnapshot:
    with RawKafkaConnection("127.0.0.1", p.bootstrap_port, timeout=10.0,
                            client_id="rg-dims") as conn:
        raw, _ = conn.request(MetadataRequest(version=5, topics=topics,
                                              allow_auto_topic_creation=False),
                              MetadataResponse, 5)
    return read_metadata(struct.pack(">i", len(raw)) + raw, 5)


def produce(p: RackguardProxy, topic: str, acks: int = -1) -> list[tuple[int, str | None]]:
    snap = metadata(p, [topic])
    brokers = {b.node_id: (b.host, b.port) for b in snap.brokers}
    out = []
    for t in snap.topics:
        for raw in TopicMetadata(*t).partitions:
            part = PartitionMetadata(*raw)
            [r] = raw_produce_to(brokers[part.leader], [(topic, part.partition_index, [b"x"])],
                                 acks=acks)
            out.append((r.error_code, r.error_message))
    return out


def until(check: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(1.0)


def isr_sizes(p: RackguardProxy, topic: str) -> list[int]:
    return [len(PartitionMetadata(*raw).isr) for t in metadata(p, [topic]).topics
            for raw in TopicMetadata(*t).partitions]


def test_a_region_minimum_on_real_kafka(rig: SystemRig,
                                        proxy: tuple[RackguardProxy, str, str, int]) -> None:
    p, regional, plain, metrics_port = proxy
    until(lambda: all(n == 3 for t in (regional, plain) for n in isr_sizes(p, t)),
          "full ISRs")
    until(lambda: all(code == 0 for t in (regional, plain) for code, _ in produce(p, t)),
          "acks=all to succeed with every rack up")

    rig.stop_rack("rack-c")  # the region eu-west-1
    until(lambda: all(n == 2 for t in (regional, plain) for n in isr_sizes(p, t)),
          "ISRs without rack-c")
    until(lambda: all(code == NOT_ENOUGH_REPLICAS for code, _ in produce(p, regional)),
          "the region topic to be refused")
    refused = produce(p, regional)
    for code, message in refused:
        assert code == NOT_ENOUGH_REPLICAS
        assert message is not None and message.startswith("NOT_ENOUGH_RACKS:")
        assert "span 1 region(s) [eu-central-1]" in message
        assert message.endswith("min.insync.racks.region=2")
    print(f"\nrack-c (eu-west-1) down: {refused[0][1]}")
    assert all(code == 0 for code, _ in produce(p, plain))  # 2 racks: enough for it
    assert all(code == 0 for code, _ in produce(p, regional, acks=1))  # acks=1 untouched
    got = read_samples(metrics_url(metrics_port))
    assert (sample(got, "rackguard_produce_dimension_refusals_total", topic=regional,
                   dimension="region", decision="rejected") or 0) >= PARTITIONS
    # the rack coverage per dimension: every partition of the region topic is under its
    # region minimum (1 region in sync), none of the plain topic (no region minimum)
    for i in range(PARTITIONS):
        assert sample(got, "rackguard_under_min_dimension_isr", topic=regional,
                      partition=str(i), dimension="region") == 1
        assert sample(got, "rackguard_isr_dimension_count", topic=regional,
                      partition=str(i), dimension="region") == 1
        assert sample(got, "rackguard_isr_dimension_count", topic=plain,
                      partition=str(i), dimension="region") is None
    assert total(got, "rackguard_under_min_dimension_isr_partitions",
                 dimension="region") == PARTITIONS

    try:
        through_the_admin_api(rig, p, regional, plain)
    finally:
        rig.start_rack("rack-c")
    until(lambda: all(n == 3 for t in (regional, plain) for n in isr_sizes(p, t)),
          "full ISRs again", timeout=180)
    for t in (regional, plain):
        configs(rig, p, "--alter", "--entity-name", t, "--delete-config", REGION)
    until(lambda: all(code == 0 for code, _ in produce(p, regional)),
          "acks=all to succeed again")


def configs(rig: SystemRig, p: RackguardProxy, *args: str) -> str:
    assert rig.cluster is not None
    return tool(rig, config_command(rig.cluster.kafka_version), "--entity-type", "topics",
                *args, bootstrap=p.bootstrap)


def through_the_admin_api(rig: SystemRig, p: RackguardProxy, regional: str,
                          plain: str) -> None:
    """While eu-west-1 is down: the region minimum changed with kafka-configs."""
    assert rig.cluster is not None
    configs(rig, p, "--alter", "--entity-name", regional, "--add-config", f"{REGION}=1")
    until(lambda: all(code == 0 for code, _ in produce(p, regional)),
          "acks=all to the region topic once its minimum is lowered", timeout=10)
    shown = configs(rig, p, "--describe", "--entity-name", regional)
    assert f"DYNAMIC_TOPIC_CONFIG:{REGION}=1" in shown, shown
    assert f"STATIC_BROKER_CONFIG:{REGION}=2" in shown, shown  # the proxy's own flag
    print(f"\nkafka-configs --describe through the proxy:\n{shown}")

    configs(rig, p, "--alter", "--entity-name", plain, "--add-config", f"{REGION}=2")
    until(lambda: all(code == NOT_ENOUGH_REPLICAS for code, _ in produce(p, plain)),
          "the plain topic refused once it needs 2 regions", timeout=10)
    for _code, message in produce(p, plain):
        assert message is not None and message.endswith(f"{REGION}=2"), message

    bad = run_tool(rig, config_command(rig.cluster.kafka_version), "--entity-type", "topics",
                   "--alter", "--entity-name", plain, "--add-config",
                   "min.insync.racks.rack=2", bootstrap=p.bootstrap)
    assert bad.returncode != 0 and "not a rack dimension" in bad.stdout + bad.stderr, bad

    from kafka.admin import KafkaAdminClient, NewTopic

    created = f"dims-created-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=p.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(created, 1, 2, topic_configs={
            "min.insync.replicas": "2", REGION: "2"})])
        until(lambda: all(code == NOT_ENOUGH_REPLICAS for code, _ in produce(p, created)),
              "the topic created with a region minimum refused", timeout=30)
        admin.delete_topics([created])
    finally:
        admin.close()

    # the placement command pointed at the cluster reads the values set through the Admin
    # API from the config topic (the proxies' own), unless told to leave them out
    configs(rig, p, "--alter", "--entity-name", regional, "--add-config", "min.insync.racks=3")
    try:
        got = placement_minimums(p, regional, plain)
        assert got[0] == {regional: 3, plain: 2}, got
        assert "from the config topic __rackguard_configs" in got[1]
        assert placement_minimums(p, regional, plain, "--ignore-config-topic")[0] == {
            regional: 2, plain: 2}
        print(f"\nplacement audit through the proxy: {got[1].strip()}")
    finally:
        configs(rig, p, "--alter", "--entity-name", regional, "--delete-config",
                "min.insync.racks")


def placement_minimums(p: RackguardProxy, *topics: str) -> tuple[dict[str, int], str]:
    """min.insync.racks per topic as ``rackguard placement audit --bootstrap`` sees them
    (flags: the topics, and any after them), and what it said on stderr."""
    argv = [sys.executable, "-m", "proxy.cli", "placement", "audit", "--bootstrap",
            p.bootstrap, "--json"]
    for t in topics:
        argv += ["--topic", t] if not t.startswith("--") else [t]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return ({t["topic"]: t["min_insync_racks"] for t in json.loads(done.stdout)["topics"]},
            done.stderr)
