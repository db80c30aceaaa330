"""Loss audit on real Apache Kafka: no acknowledged record is lost through rack kills.

An idempotent Java producer and an idempotent librdkafka producer (acks=all)
write through rackguard (min.insync.racks=2) for ``RGTEST_LOSS_AUDIT_S``
seconds (default 60) while racks are killed (SIGKILL) and started again one
after the other; then every partition is read from the beginning through the
proxy, and every record a producer was told was acknowledged must be there
exactly once, at the offset it was acknowledged at.

Needs a rig that can kill and start racks (tests/system/rig.py).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from tests.integration.harness.java import JavaClient, parse_result
from tests.integration.harness.streams import rdkafka_stream

from .rig import SystemRig

SECONDS = float(os.environ.get("RGTEST_LOSS_AUDIT_S", "60"))
RATE = 100  # records per second and producer
PARTITIONS = 6


def read_all(bootstrap: str, topic: str) -> list[tuple[int, int, str]]:
    """Every record of the topic, from the beginning to the end offsets of now."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rg-audit-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: list[tuple[int, int, str]] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 120
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error() is not None:
                    continue
                out.append((msg.partition(), msg.offset(), msg.value().decode()))
                if msg.offset() + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
        assert len(done) == PARTITIONS, f"read to the end of {sorted(done)} only: {ends}"
        return out
    finally:
        consumer.close()


def test_every_acknowledged_record_survives_rack_kills(
    rig: SystemRig, java_client: JavaClient, tmp_path: Path
) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"rg-loss-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=rig.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 3,
                                      topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    java_acked = tmp_path / "java-acked.txt"
    java = subprocess.Popen(
        java_client.argv("stream", bootstrap=rig.bootstrap, topic=topic, seconds=int(SECONDS),
                         rate=RATE, acked=java_acked),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rd_acked: dict[str, tuple[int, int]] = {}
    rd_errors: list[str] = []
    rd = threading.Thread(target=rdkafka_stream,
                          args=(rig.bootstrap, topic, SECONDS, RATE, rd_acked, rd_errors))
    rd.start()
    began = time.monotonic()
    # a rack killed and brought back, then another: each time every partition keeps two racks
    for at, action, rack in ((0.15, "kill", rig.racks[2]), (0.4, "start", rig.racks[2]),
                             (0.55, "kill", rig.racks[1]), (0.8, "start", rig.racks[1])):
        time.sleep(max(0.0, began + at * SECONDS - time.monotonic()))
        rig.kill_rack(rack) if action == "kill" else rig.start_rack(rack)
    rd.join(SECONDS + 200)
    out, err = java.communicate(timeout=SECONDS + 200)
    result = parse_result(out)
    assert result is not None, err[-3000:]

    acked = {v: (int(p), int(o)) for v, p, o in
             (line.split() for line in java_acked.read_text().splitlines())}
    assert len(acked) == result["acked"]
    acked.update(rd_acked)
    assert result["acked"] > 0.8 * RATE * SECONDS and len(rd_acked) > 0.8 * RATE * SECONDS, (
        result, len(rd_acked), rd_errors[:5])
    found = read_all(rig.bootstrap, topic)
    counts = Counter(v for _, _, v in found)
    where = {v: (p, o) for p, o, v in found}
    lost = [v for v in acked if counts[v] == 0]
    twice = [v for v in acked if counts[v] > 1]
    moved = [v for v, at in acked.items() if counts[v] == 1 and where[v] != at]
    assert (lost, twice, moved) == ([], [], []), (len(lost), len(twice), len(moved))
    print(f"loss audit: {len(acked)} acknowledged ({result['acked']} Java, {len(rd_acked)} "
          f"librdkafka; not acknowledged: {result['failed']} Java, {len(rd_errors)} "
          f"librdkafka), {len(found)} read back, none lost or doubled")
