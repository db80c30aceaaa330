"""Restarts that lose nothing, on real Apache Kafka: the proxy drained by SIGTERM and
started again on the same ports, ten times, under producers.

An idempotent Java producer and an idempotent librdkafka producer (acks=all, their
default retry and back-off settings) write through a rackguard of this test's own
(min.insync.racks=2) for ``RGTEST_DRAIN_S`` seconds (default 60) while it is restarted
``RGTEST_DRAIN_RESTARTS`` times (default 10) as Kubernetes restarts a container: SIGTERM,
wait for the process to exit (it must exit by itself, status 0, its drain ``clean``, within
``drain_timeout_ms`` plus a margin), then a new process with the same flags and ports.
Then every partition is read back from the beginning, and every record a producer was
told was acknowledged must be there exactly once, at the offset it was acknowledged at.

The producers' worst stall (the longest time between two consecutive acknowledgements,
from the time each was acknowledged) is printed, with each restart's two parts: the old
process's drain and exit, and the new one's start until its port answers; the stall is
those plus the first metadata poll and the client's reconnect back-off.

Needs the local cluster (tests/system/cluster.py), where the proxy can be restarted.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.harness.java import JavaClient, parse_result
from tests.integration.harness.procs import RackguardProxy
from tests.integration.harness.restart import restart
from tests.integration.harness.streams import rdkafka_stream
from tests.system.cluster import BROKER_RACKS

from .rig import SystemRig
from .test_loss_audit_real_kafka import PARTITIONS, read_all

SECONDS = float(os.environ.get("RGTEST_DRAIN_S", "60"))
RESTARTS = int(os.environ.get("RGTEST_DRAIN_RESTARTS", "10"))
RATE = 100  # records per second and producer
DRAIN_MS = 5000


class TimedAcks(dict[str, tuple[int, int]]):
    """librdkafka's acknowledged values, with the time each was acknowledged."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def __setitem__(self, key: str, value: tuple[int, int]) -> None:
        self.times.append(time.time())
        super().__setitem__(key, value)


def worst_gap(times: list[float]) -> float:
    """The longest time between two consecutive acknowledgements."""
    ordered = sorted(times)
    return max((b - a for a, b in zip(ordered, ordered[1:], strict=False)), default=0.0)


def test_restarts_under_producers_lose_nothing(
    rig: SystemRig, java_client: JavaClient, tmp_path: Path
) -> None:
    if rig.cluster is None:
        pytest.skip("needs the local cluster: the test restarts a proxy of its own")
    from kafka.admin import KafkaAdminClient, NewTopic

    proxy = RackguardProxy(rig.cluster.bootstrap, tmp_path, tuple(BROKER_RACKS),
                           ("--min-insync-racks", "2", "--drain-timeout-ms", str(DRAIN_MS)))
    proxy.log_path = tmp_path / "rackguard-0.log"
    proxy.start()
    try:
        bootstrap = proxy.bootstrap
        topic = f"rg-drain-{uuid.uuid4().hex[:8]}"
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
        try:
            admin.create_topics([NewTopic(topic, PARTITIONS, 3,
                                          topic_configs={"min.insync.replicas": "2"})])
        finally:
            admin.close()
        java_acked = tmp_path / "java-acked.txt"
        java = subprocess.Popen(
            java_client.argv("stream", bootstrap=bootstrap, topic=topic,
                             seconds=int(SECONDS), rate=RATE, acked=java_acked, stamped=1),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rd_acked = TimedAcks()
        rd_errors: list[str] = []
        rd = threading.Thread(target=rdkafka_stream,
                              args=(bootstrap, topic, SECONDS, RATE, rd_acked, rd_errors))
        rd.start()
        exits: list[tuple[float, float, str]] = []
        began = time.monotonic()
        for n in range(1, RESTARTS + 1):  # evenly spread, none in the last stretch
            time.sleep(max(0.0, began + n * SECONDS / (RESTARTS + 1.5) - time.monotonic()))
            exits.append(restart(proxy, tmp_path / f"rackguard-{n}.log", DRAIN_MS / 1000))
        rd.join(SECONDS + 200)
        out, err = java.communicate(timeout=SECONDS + 200)
        result = parse_result(out)
        assert result is not None, err[-3000:]

        rows = [line.split() for line in java_acked.read_text().splitlines()]
        acked = {v: (int(p), int(o)) for v, p, o, _ in rows}
        stalls = {"Java": worst_gap([int(ms) / 1000 for *_, ms in rows]),
                  "librdkafka": worst_gap(rd_acked.times)}
        assert len(acked) == result["acked"]
        acked.update(rd_acked)
        found = read_all(bootstrap, topic)
        counts = Counter(v for _, _, v in found)
        where = {v: (p, o) for p, o, v in found}
        lost = [v for v in acked if counts[v] == 0]
        twice = [v for v in acked if counts[v] > 1]
        moved = [v for v, at in acked.items() if counts[v] == 1 and where[v] != at]
        print(f"drain: {RESTARTS} restarts (SIGTERM to exit: "
              f"{', '.join(f'{t:.2f}' for t, _, _ in exits)} s; exit to the new process's "
              f"port: {', '.join(f'{s:.2f}' for _, s, _ in exits)} s; drains "
              f"{dict(Counter(r for _, _, r in exits))}); {len(acked)} acknowledged "
              f"({result['acked']} Java, {len(rd_acked)} librdkafka; not acknowledged: "
              f"{result['failed']} Java, {len(rd_errors)} librdkafka), {len(found)} read back, "
              f"{len(lost)} lost, {len(twice)} doubled, {len(moved)} moved; worst stall: "
              f"Java {stalls['Java']:.2f} s, librdkafka {stalls['librdkafka']:.2f} s")
        assert (lost, twice, moved) == ([], [], []), (len(lost), len(twice), len(moved))
        assert [r for _, _, r in exits] == ["clean"] * RESTARTS
        assert all(t < DRAIN_MS / 1000 + 5 for t, _, _ in exits)
        assert result["acked"] > 0.8 * RATE * SECONDS and len(rd_acked) > 0.8 * RATE * SECONDS, (
            result, len(rd_acked), rd_errors[:5])
    finally:
        proxy.stop()
