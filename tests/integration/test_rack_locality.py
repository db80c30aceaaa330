"""Same-rack fetching through the sidecar (KIP-392): what client_rack saves, measured.

The simulator (six brokers, rack-a: 1 and 4, rack-b: 2 and 5, rack-c: 3 and 6) runs
Kafka's RackAwareReplicaSelector; topic ``loc`` has 6 partitions with a replica in every
rack and its leaders spread over the racks. In each rack a kafka-python consumer (no
client.rack of its own) reads the whole topic through that rack's ``rackguard serve``:

- client_rack unset: the consumers read from the leaders, so about two thirds of the
  bytes cross racks (by the simulator's own count of who served what);
- client_rack set, ``observe``: nothing changes on the wire (the same two thirds), and
  the proxies' ``rackguard_fetch_bytes_total{locality}`` (bytes of Fetch response
  frames) says the same as the simulator's count of the frames it sent;
- client_rack set, ``fill``: the leaders send each consumer to its own rack's replica,
  and cross-rack bytes are near zero, by the metric and by the simulator alike.

A consumer that names its own rack keeps it: through rack-a's proxy it still reads from
rack-b, where it said it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from simulator.config import SimulatorConfig, TopicSpec, racked_brokers
from simulator.threaded import ThreadedCluster
from tests.prometheus_text import by_label, metrics_url, read_samples

from . import kip_support as ks
from .harness import wire
from .harness.ports import free_port, free_port_block
from .harness.procs import RackguardProxy

pytestmark = pytest.mark.integration

TOPIC = "loc"
PARTITIONS = 6
RECORDS_PER_PARTITION = 150
VALUE = b"v" * 1000
RACK_NODES = {"rack-a": (1, 4), "rack-b": (2, 5), "rack-c": (3, 6)}
RACK_OF = {n: rack for rack, nodes in RACK_NODES.items() for n in nodes}


@pytest.fixture(scope="module")
def cluster() -> Iterator[ThreadedCluster]:
    base = free_port_block(range(len(ks.NODE_IDS)))
    config = SimulatorConfig(
        brokers=racked_brokers(len(ks.NODE_IDS), list(ks.RACKS), port_base=base),
        topics=[TopicSpec(TOPIC, PARTITIONS, 3)], default_min_insync_replicas=1,
        replica_selector="rack_aware")
    with ThreadedCluster(config) as c:
        leaders = [c.partition_info(TOPIC, p)["leader"] for p in range(PARTITIONS)]
        assert sorted(RACK_OF[n] for n in leaders) == sorted(list(RACK_NODES) * 2), leaders
        for p in range(PARTITIONS):
            assert {RACK_OF[n] for n in c.partition_info(TOPIC, p)["replicas"]} == set(
                RACK_NODES)
        producer = KafkaProducer(bootstrap_servers=c.bootstrap_servers, acks=1,
                                 linger_ms=5)
        for p in range(PARTITIONS):
            for _ in range(RECORDS_PER_PARTITION):
                producer.send(TOPIC, VALUE, partition=p)
        producer.flush()
        producer.close()
        yield c


def consume_all(bootstrap: str, client_id: str, client_rack: str = "") -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id,
                             client_rack=client_rack, enable_auto_commit=False,
                             fetch_max_bytes=64 * 1024, max_partition_fetch_bytes=16 * 1024)
    try:
        parts = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        seen = 0
        for _ in range(400):
            for records in consumer.poll(timeout_ms=200).values():
                seen += len(records)
            if seen >= PARTITIONS * RECORDS_PER_PARTITION:
                break
        return seen
    finally:
        consumer.close()


def proxy_for(cluster: ThreadedCluster, tmp_path: Path, extra: tuple[str, ...]
              ) -> tuple[RackguardProxy, int]:
    ports = ks.broker_ports(cluster)
    metrics_port = free_port()
    proxy = RackguardProxy(",".join(f"127.0.0.1:{p}" for p in ports), tmp_path, ks.NODE_IDS,
                           ("--metrics-port", str(metrics_port), *extra))
    proxy.start()
    for n in ks.NODE_IDS:
        wire.wait_for_port(*proxy.broker_address(n), 15, proc=proxy.proc)
    return proxy, metrics_port


def fetch_bytes(metrics_port: int) -> dict[str, float]:
    return by_label(read_samples(metrics_url(metrics_port)), "rackguard_fetch_bytes_total",
                    "locality")


def simulator_split(cluster: ThreadedCluster, client_ids: dict[str, str], frames: bool = False
                    ) -> tuple[int, int]:
    """(same-rack, cross-rack) record bytes the simulator served to these clients, or the
    bytes of the Fetch response frames it sent them (``frames``)."""
    counts = cluster.call(lambda c: dict(c.core.fetch_frame_bytes if frames
                                         else c.core.fetched_bytes))
    same = cross = 0
    for (client_id, node), n in counts.items():
        rack = client_ids.get(client_id)
        if rack is None:
            continue
        if RACK_OF[node] == rack:
            same += n
        else:
            cross += n
    return same, cross


@pytest.mark.parametrize("mode", ["unset", "observe", "fill"])
def test_cross_rack_bytes_by_client_rack(cluster: ThreadedCluster, tmp_path: Path,
                                         mode: str) -> None:
    client_ids = {f"{mode}-{rack}": rack for rack in RACK_NODES}
    proxies: list[RackguardProxy] = []
    metrics: dict[str, int] = {}
    try:
        for rack in RACK_NODES:
            extra: tuple[str, ...] = ()
            if mode != "unset":
                extra = ("--client-rack", rack, "--client-rack-mode", mode)
            proxy, metrics[rack] = proxy_for(cluster, tmp_path, extra)
            proxies.append(proxy)
        for proxy, (client_id, _) in zip(proxies, client_ids.items(), strict=True):
            assert consume_all(proxy.bootstrap, client_id) == PARTITIONS * RECORDS_PER_PARTITION
        same, cross = simulator_split(cluster, client_ids)
        share = cross / (same + cross)
        frames = simulator_split(cluster, client_ids, frames=True)
        by_metric = [fetch_bytes(port) for port in metrics.values()]
    finally:
        for proxy in proxies:
            proxy.stop()
    print(f"\n{mode}: simulator records same={same} cross={cross} cross share={share:.3f}; "
          f"frames {frames}; proxies {by_metric}")
    if mode == "unset":
        assert 0.55 <= share <= 0.78
        assert by_metric == [{}, {}, {}]  # no locality hook, no series
        return
    m_same = sum(m["same_rack"] for m in by_metric)
    m_cross = sum(m["cross_rack"] for m in by_metric)
    assert sum(m["unknown"] for m in by_metric) == 0
    # The metric is the simulator's count of frames, but for the fetches in flight when a
    # consumer closes (sent by the simulator after the proxy closed the pair: at most one
    # empty answer per broker and consumer).
    for counted, sent in ((m_same, frames[0]), (m_cross, frames[1])):
        assert 0 <= sent - counted <= len(RACK_NODES) * len(RACK_OF) * 200
    m_share = m_cross / (m_same + m_cross)
    if mode == "observe":
        assert 0.55 <= share <= 0.78 and 0.55 <= m_share <= 0.78
    else:
        assert share <= 0.05 and m_share <= 0.05


def test_a_clients_own_rack_is_kept(cluster: ThreadedCluster, tmp_path: Path) -> None:
    proxy, _ = proxy_for(cluster, tmp_path, ("--client-rack", "rack-a"))
    try:
        assert consume_all(proxy.bootstrap, "own-rack-b", client_rack="rack-b") == (
            PARTITIONS * RECORDS_PER_PARTITION)
    finally:
        proxy.stop()
    same, cross = simulator_split(cluster, {"own-rack-b": "rack-b"})
    assert cross / (same + cross) <= 0.05
