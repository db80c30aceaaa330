"""Zones failing in every way while a producer writes: the proxy's view stays fresh and it
keeps acknowledging through the racks that answer.

This proves the proxy's own behaviour (how fast its view follows a fault, that it stays
ready and never refuses for a stale view). That acknowledged records survive a zone's loss
is a property of real brokers, proven on real Apache Kafka only
(tests/system/test_loss_audit_real_kafka.py; a hung rack:
tests/system/test_zone_hang_real_kafka.py): the simulator keeps one shared copy of each
partition log, so loss cannot happen in it.

``rackguard serve`` in front of the simulator (six brokers, rack-a: 1 and 4, rack-b: 2 and
5, rack-c: 3 and 6), its bootstrap list naming rack-a's brokers only. An idempotent
librdkafka producer (acks=all) writes throughout, as load, while each
rack in turn is killed, hung, blackholed and cut off from the proxy (simulator/faults.py)
for ``RGTEST_ZONE_FAULT_S`` seconds (default 4: more than the 3 s age bound, so a poller
stuck on the failed rack would show as METADATA_STALE) and then restored. The faults on
rack-a have the bootstrap servers inside the failed rack; those on rack-b and rack-c,
outside it. For a hung or blackholed rack the test also does what Kafka's controller does
after its session timeout: the rack's brokers leave the ISRs and leadership.

During every fault, sampled every 250 ms: rackguard_metadata_age_seconds <= 2 x the
refresh interval and /readyz 200; over the run: no METADATA_STALE refusal, and records
acknowledged through the proxy. The same with 30 s faults and real time figures:
benchmarks/zone_faults.py.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from simulator.faults import Fault
from simulator.threaded import ThreadedCluster
from tests.prometheus_text import Samples, http_status, metrics_url, read_samples

from . import kip_support as ks
from .harness import wire
from .harness.ports import free_port
from .harness.procs import RackguardProxy
from .harness.streams import rdkafka_stream

pytestmark = pytest.mark.integration

FAULT_S = float(os.environ.get("RGTEST_ZONE_FAULT_S", "4"))
REFRESH_S = 0.5
TOPIC = "zones"
PARTITIONS = 6
RATE = 40
MODES = ("kill", "hang", "blackhole", "partition-proxy")
RACK_NODES = {"rack-a": (1, 4), "rack-b": (2, 5), "rack-c": (3, 6)}


def scrape(port: int) -> tuple[Samples, int]:
    """(the metrics, the /readyz status)."""
    return read_samples(metrics_url(port), 2), http_status(f"http://127.0.0.1:{port}/readyz")


def leave(cluster: ThreadedCluster, nodes: tuple[int, ...]) -> None:
    """What Kafka's controller does to brokers that stopped answering."""
    for p in range(PARTITIONS):
        info = cluster.partition_info(TOPIC, p)
        cluster.set_isr(TOPIC, p, [n for n in info["isr"] if n not in nodes] or info["isr"])


def rejoin(cluster: ThreadedCluster) -> None:
    for p in range(PARTITIONS):
        cluster.set_isr(TOPIC, p, list(cluster.partition_info(TOPIC, p)["replicas"]))


def test_the_view_stays_fresh_through_every_zone_fault(tmp_path: Path) -> None:
    cluster = ks.start_cluster(ks.topic(TOPIC, partitions=PARTITIONS, rf=3))
    ports = ks.broker_ports(cluster)
    metrics_port = free_port()
    proxy = RackguardProxy(
        ",".join(f"127.0.0.1:{ports[n - 1]}" for n in RACK_NODES["rack-a"]), tmp_path,
        ks.NODE_IDS,
        ("--min-insync-racks", "2", "--metadata-refresh-interval-ms", str(int(REFRESH_S * 1000)),
         "--max-metadata-age-ms", "3000", "--admin-connect-timeout-ms", "300",
         "--admin-request-timeout-ms", "600", "--metadata-hedge-delay-ms", "100",
         "--metrics-port", str(metrics_port)))
    try:
        proxy.start()
        for n in ks.NODE_IDS:
            wire.wait_for_port(*proxy.broker_address(n), 15, proc=proxy.proc)
        seconds = len(MODES) * len(RACK_NODES) * (FAULT_S + 1.5) + 3
        rd_acked: dict[str, tuple[int, int]] = {}
        rd_errors: list[str] = []
        rd = threading.Thread(target=rdkafka_stream, args=(
            proxy.bootstrap, TOPIC, seconds, RATE, rd_acked, rd_errors),
            kwargs={"socket.timeout.ms": 5000})
        rd.start()
        time.sleep(1.5)
        worst: dict[str, float] = {}
        unready: list[str] = []
        for mode in MODES:
            for rack, nodes in RACK_NODES.items():
                if mode == "kill":
                    cluster.kill_rack(rack)
                else:
                    cluster.fault_rack(rack, Fault(mode))
                    if mode in ("hang", "blackhole"):
                        leave(cluster, nodes)
                end = time.monotonic() + FAULT_S
                while time.monotonic() < end:
                    samples, status = scrape(metrics_port)
                    age = samples.get(("rackguard_metadata_age_seconds", ()), float("inf"))
                    key = f"{mode} {rack}"
                    worst[key] = max(worst.get(key, 0.0), age)
                    if status != 200:
                        unready.append(key)
                    time.sleep(0.25)
                if mode == "kill":
                    cluster.restore_rack(rack)
                else:
                    cluster.fault_rack(rack, None)
                    rejoin(cluster)
                time.sleep(1.5)
        rd.join(seconds + 200)
        samples, _ = scrape(metrics_port)
    finally:
        proxy.stop()
        cluster.stop()

    print("worst metadata age per fault: " + ", ".join(f"{k} {v:.2f} s"
                                                       for k, v in worst.items()))
    assert max(worst.values()) <= 2 * REFRESH_S, worst
    assert unready == []
    stale = sum(v for (name, labels), v in samples.items()
                if name == "rackguard_produce_partitions_total"
                and ("reason", "METADATA_STALE") in labels)
    assert stale == 0
    assert rd_acked, rd_errors[:5]  # the proxy kept acknowledging through the faults
