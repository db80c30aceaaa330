"""The loss watch on real Apache Kafka: the zone-destroyed drill, watched live.

One partition per topic, replicas in racks a, a, b, b, c (brokers 1, 4, 2, 5, 3),
min.insync.replicas 2. Racks b and c die; writes go on (the ISR is the two rack-a
brokers); rack a dies too (its brokers stay down through the election, as a destroyed
zone would: it comes back only after the checks, and truncates to the new leader's log);
b and c return and an unclean election gives the partition back a leader.

- Topic ``X`` through a rackguard in observe mode (min.insync.racks=2 observed, not
  enforced), written by an idempotent Java producer and by librdkafka: the acknowledged
  records of the outage are gone, and the watch reports exactly their offsets (the log
  line's ranges equal the acknowledged offsets found missing by reading the partition
  back; the counter equals their number) within 10 s of the election.
- Topic ``Y`` through the suite's rackguard, enforcing min.insync.racks=2, written by
  librdkafka: the answers acknowledged once the ISR had shrunk to rack a are withdrawn
  (code 20, the acknowledgement recheck and its suspect partitions), the produces sent
  meanwhile are refused, so no acknowledged record is lost.

Racks b and c are killed together, and broker 2, the one the unclean election picks (the
first live replica of the assignment), dies last, once the others are reaped. Killed
one after the other, ~0.1 s apart, a record appended in between reaches rack c's broker
alone and is acknowledged once rack b has left the ISR, on racks a and c (the rule met);
the unclean election picks broker 2, which lacks it, and it is lost although no
acknowledgement broke the rule. Signals sent together still land milliseconds apart: a
CI run lost offset 300 that way once. With broker 2 last, whatever another broker of
racks b and c fetched, broker 2 fetched too. ``RGTEST_DRILL_RACKS_APART=1`` kills the
racks one after the other, rack b first, to see that residue.

Needs the local cluster (tests/system/cluster.py: racks killed and started here).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness.java import JavaClient, parse_result
from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import RackguardProxy
from tests.integration.harness.streams import rdkafka_stream
from tests.prometheus_text import parse_samples, sample
from tests.system.cluster import BROKER_RACKS

from .rig import SystemRig, wait_ready

ASSIGNMENT = [1, 4, 2, 5, 3]  # rack-a, rack-a, rack-b, rack-b, rack-c
ELECTED = 2  # the unclean election's choice: the first live replica once rack a is down
RATE = 50  # records per second and producer
SECONDS = 70  # how long the producers run
REPORT_WITHIN_S = 10.0
LINE = re.compile(r"acknowledged records lost: topic (\S+) partition (\d+): (.*?); leader")
RANGE = re.compile(r"offsets (\d+)\.\.(\d+) \((\d+) record\(s\), acks=(\w+)\)")


def _admin(bootstrap: str):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _create(bootstrap: str, topics: list[str], replicas: list[int], min_isr: int = 2) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)  # kept until the answers are in: its handle ends with it
    futures = admin.create_topics(
        [NewTopic(t, 1, -1, replica_assignment=[replicas],
                  config={"min.insync.replicas": str(min_isr)}) for t in topics],
        request_timeout=30)
    for f in futures.values():
        f.result(60)


def _leader(bootstrap: str, topic: str) -> int:
    meta = _admin(bootstrap).list_topics(topic, timeout=10)
    found = meta.topics.get(topic)
    part = found.partitions.get(0) if found is not None else None
    return int(part.leader) if part is not None else -1  # just created: not known yet


def _wait_leader(bootstrap: str, topic: str, leader: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _leader(bootstrap, topic) != leader:
        assert time.monotonic() < deadline, f"{topic}: leader {leader} was not elected"
        time.sleep(0.5)


def _elect_unclean(bootstrap: str, topics: list[str], timeout: float = 120) -> None:
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    began = time.monotonic()
    deadline = began + timeout
    last: Exception | None = None
    allowed = False
    while time.monotonic() < deadline:
        try:
            admin = _admin(bootstrap)
            if not allowed and time.monotonic() - began > 30:
                # the Admin API's election alone did not do it: allow it on the topics too
                futures = admin.incremental_alter_configs([ConfigResource(
                    ConfigResource.Type.TOPIC, t, incremental_configs=[ConfigEntry(
                        "unclean.leader.election.enable", "true",
                        incremental_operation=AlterConfigOpType.SET)]) for t in topics])
                for f in futures.values():
                    f.result(30)
                allowed = True
            admin.elect_leaders(
                ElectionType.UNCLEAN, [TopicPartition(t, 0) for t in topics]).result(30)
            if all(_leader(bootstrap, t) >= 0 for t in topics):
                return
        except Exception as exc:  # noqa: BLE001 - the restarted brokers may not be ready
            last = exc
        time.sleep(1.0)
    raise AssertionError(f"no unclean election within {timeout:.0f} s: {last}")


def _samples(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return parse_samples(answer.read().decode())


def _lost_metric(url: str, topic: str) -> float:
    samples = _samples(url)
    return sum(sample(samples, "rackguard_acknowledged_records_lost_total", topic=topic,
                      acks=acks) or 0.0 for acks in ("all", "1"))


def _withdrawn_metric(url: str, topic: str) -> float:
    return sample(_samples(url), "rackguard_acknowledgements_withdrawn_total",
                  topic=topic) or 0.0


def _checks(url: str) -> float:
    samples = _samples(url)
    return sum(sample(samples, "rackguard_loss_watch_checks_total", outcome=o) or 0.0
               for o in ("no_loss", "loss"))


def _read_back(bootstrap: str, topic: str) -> dict[int, str]:
    """offset -> value of every record in partition 0."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rg-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: dict[int, str] = {}
        deadline = time.monotonic() + 120
        while (not out or max(out) + 1 < end) and end > 0 and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error() is None:
                    out[msg.offset()] = msg.value().decode()
        return out
    finally:
        consumer.close()


def _lost_offsets(acked: dict[str, tuple[int, int]], found: dict[int, str]) -> set[int]:
    return {offset for value, (_, offset) in acked.items() if found.get(offset) != value}


def _reported(log: Path, topic: str) -> tuple[set[int], list[str]]:
    offsets: set[int] = set()
    lines = []
    for line in log.read_text(errors="replace").splitlines():
        m = LINE.search(line)
        if m is None or m.group(1) != topic:
            continue
        lines.append(line)
        for first, last, _, _ in RANGE.findall(m.group(3)):
            offsets.update(range(int(first), int(last) + 1))
    return offsets, lines


@dataclass
class Observer:
    """rackguard in observe mode (min.insync.racks=2 observed) in front of the cluster."""

    proxy: RackguardProxy
    metrics_url: str


@pytest.fixture(scope="module")
def observer(rig: SystemRig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observer]:
    cluster = rig.cluster
    if cluster is None:
        pytest.skip("these drills kill racks of the suite's own local cluster")
    metrics_port = free_port()
    proxy = RackguardProxy(cluster.bootstrap, tmp_path_factory.mktemp("observer"),
                           tuple(BROKER_RACKS), (
        "--min-insync-racks", "2", "--observe", "--metadata-refresh-interval-ms", "1000",
        "--max-metadata-age-ms", "10000", "--log-level", "INFO",
        "--metrics-port", str(metrics_port)))
    proxy.start()
    try:
        wait_ready(f"http://127.0.0.1:{metrics_port}/readyz", 120)
        yield Observer(proxy, f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        proxy.stop()


def test_zone_destroyed_drill_watch_reports_exactly_the_lost_offsets(
        rig: SystemRig, observer: Observer, java_client: JavaClient, tmp_path: Path) -> None:
    observed, enforced = (f"rg-watch-{kind}-{uuid.uuid4().hex[:6]}"
                          for kind in ("observe", "enforce"))
    _drill(rig, java_client, tmp_path, observer, observed, enforced)


def _drill(rig: SystemRig, java_client: JavaClient, tmp_path: Path, observer: Observer,
           observed: str, enforced: str) -> None:
    proxy = observer.proxy
    cluster = rig.cluster
    assert cluster is not None and rig.metrics_url is not None
    direct = cluster.bootstrap
    _create(direct, [observed, enforced], ASSIGNMENT)
    for topic in (observed, enforced):
        _wait_leader(direct, topic, ASSIGNMENT[0])
    java_acked = tmp_path / "java-acked.txt"
    java = subprocess.Popen(
        java_client.argv("stream", bootstrap=proxy.bootstrap, topic=observed, seconds=SECONDS,
                         rate=RATE, acked=java_acked),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acked_x: dict[str, tuple[int, int]] = {}
    acked_y: dict[str, tuple[int, int]] = {}
    errors: list[str] = []
    streams = [threading.Thread(target=rdkafka_stream, args=(
        bootstrap, topic, SECONDS, RATE, acked, errors), kwargs={"client.id": client})
        for bootstrap, topic, acked, client in (
            (proxy.bootstrap, observed, acked_x, "rdkafka-observed"),
            (rig.bootstrap, enforced, acked_y, "rdkafka-enforced"))]
    for s in streams:
        s.start()
    began = time.monotonic()

    def at(second: float) -> None:
        time.sleep(max(0.0, began + second - time.monotonic()))

    at(6)
    # together, broker 2 last: a record the others fetched and it did not could be
    # acknowledged on racks a and c (the rule met), and the unclean election below, which
    # picks broker 2, would drop it
    if os.environ.get("RGTEST_DRILL_RACKS_APART"):  # to see that residue again
        for rack in ("rack-b", "rack-c"):
            rig.kill_rack(rack)
    else:
        rig.kill_racks(["rack-b", "rack-c"], last=ELECTED)
    at(24)  # about 14 s of writes acknowledged by rack a alone (the ISR shrinks in ~4 s)
    rig.kill_rack("rack-a")
    restarts = [threading.Thread(target=rig.start_rack, args=(rack,))
                for rack in ("rack-b", "rack-c")]
    for t in restarts:
        t.start()
    for t in restarts:
        t.join(240)
    _elect_unclean(cluster.bootstrap_of("rack-b"), [observed, enforced])
    elected = time.monotonic()
    url = observer.metrics_url
    while _lost_metric(url, observed) == 0 and time.monotonic() - elected < 30:
        time.sleep(0.25)
    reported_after = time.monotonic() - elected

    for s in streams:
        s.join(SECONDS + 200)
    out, err = java.communicate(timeout=SECONDS + 200)
    result = parse_result(out)
    assert result is not None, err[-3000:]
    for line in java_acked.read_text().splitlines():
        value, partition, offset = line.split()
        acked_x[value] = (int(partition), int(offset))
    lost_x = _lost_offsets(acked_x, _read_back(direct, observed))
    lost_y = _lost_offsets(acked_y, _read_back(direct, enforced))
    reported_x, lines = _reported(proxy.log_path, observed)
    summary = (f"observe mode: {len(acked_x)} acknowledged ({result['acked']} Java, "
               f"{len(acked_x) - result['acked']} librdkafka), {len(lost_x)} lost "
               f"({min(lost_x, default=-1)}..{max(lost_x, default=-1)}), reported "
               f"{len(reported_x)} after {reported_after:.1f} s; enforcing: "
               f"{len(acked_y)} acknowledged, {len(lost_y)} lost, "
               f"{_withdrawn_metric(rig.metrics_url, enforced):.0f} acknowledgements "
               "withdrawn (code 20)")
    print(summary)
    for line in lines:
        print(line)
    assert lost_x, f"the drill lost nothing: {summary}"
    assert reported_x == lost_x, (summary, sorted(reported_x ^ lost_x)[:20])
    assert _lost_metric(url, observed) == len(lost_x)
    assert reported_after <= REPORT_WITHIN_S, summary
    # enforcing: nothing acknowledged is lost. The answers the shrink of the ISR to rack a
    # released are withdrawn (code 20: the slow ones, and every answer of the partition
    # from then until a view fetched after that moment is in), the produces decided
    # meanwhile wait for that view and are refused; whatever the watch would see lost
    # is reported (none)
    print(f"enforcing: {_withdrawn_metric(rig.metrics_url, enforced):.0f} acknowledgements "
          f"withdrawn, {len(lost_y)} lost")
    assert _lost_metric(rig.metrics_url, enforced) == len(lost_y), summary
    assert not lost_y, (summary, sorted(lost_y)[:20])


def test_acks_one_leader_kill_reports_only_what_cannot_be_read(
        rig: SystemRig, observer: Observer) -> None:
    """acks=1 writes at 1,500 records/s, the followers' racks hung for 1.5 s (they stay in
    the ISR), the leader's rack killed: the clean election to a follower loses what it had
    not fetched. Whatever the watch reports lost is exactly what reading the partition
    cannot find."""
    cluster = rig.cluster
    assert cluster is not None
    topic = f"rg-watch-acks1-{uuid.uuid4().hex[:6]}"
    _create(cluster.bootstrap, [topic], [1, 2, 3], min_isr=1)
    _wait_leader(cluster.bootstrap, topic, 1)
    acked: dict[str, tuple[int, int]] = {}
    errors: list[str] = []
    writer = threading.Thread(target=rdkafka_stream, args=(
        observer.proxy.bootstrap, topic, 20, 1500, acked, errors), kwargs={
        "acks": "1", "enable.idempotence": False, "linger.ms": 0,
        "client.id": "rdkafka-acks1"})
    writer.start()
    time.sleep(8)
    # the followers hang for 1.5 s (too short to leave the ISR: 4 s), the leader acknowledges
    # on, then dies with what they had not fetched; they come back and one of them leads
    for rack in ("rack-b", "rack-c"):
        rig.freeze_rack(rack)
    time.sleep(1.5)
    rig.kill_rack("rack-a")
    for rack in ("rack-b", "rack-c"):
        rig.thaw_rack(rack)
    writer.join(300)
    deadline = time.monotonic() + 30
    before = _checks(observer.metrics_url)
    while time.monotonic() < deadline and _checks(observer.metrics_url) == before and \
            _lost_metric(observer.metrics_url, topic) == 0:
        time.sleep(0.5)
    time.sleep(6)  # two readings of the new leader
    lost = _lost_offsets(acked, _read_back(rig.bootstrap, topic))
    reported, lines = _reported(observer.proxy.log_path, topic)
    print(f"acks=1 leader kill: {len(acked)} acknowledged, {len(lost)} not readable, "
          f"{len(reported)} reported lost; {lines}")
    assert reported == lost, sorted(reported ^ lost)[:20]
    assert _lost_metric(observer.metrics_url, topic) == len(lost)


def test_no_false_alarm_through_rack_kills_hangs_elections_and_reassignment(
        rig: SystemRig, observer: Observer) -> None:
    """Continuous acks=all writes through rack kills and restores, a hung rack, a
    preferred-leader election and a reassignment: leaders move many times, each move is
    checked, and nothing is reported lost."""
    from confluent_kafka import ElectionType, TopicPartition
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient

    cluster = rig.cluster
    assert cluster is not None
    topic = f"rg-watch-calm-{uuid.uuid4().hex[:6]}"
    _create(cluster.bootstrap, [topic], [1, 2, 3])
    _wait_leader(cluster.bootstrap, topic, 1)
    acked: dict[str, tuple[int, int]] = {}
    errors: list[str] = []
    checks_before = _checks(observer.metrics_url)
    writer = threading.Thread(target=rdkafka_stream, args=(
        observer.proxy.bootstrap, topic, 75, 100, acked, errors),
        kwargs={"client.id": "rdkafka-calm"})
    writer.start()
    time.sleep(5)
    rig.kill_rack("rack-a")  # leader 1 goes: a clean election
    time.sleep(8)
    rig.start_rack("rack-a")
    time.sleep(5)
    admin = _admin(cluster.bootstrap)
    try:
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    except Exception as exc:  # noqa: BLE001 - the preferred leader may not be in the ISR yet
        print(f"preferred-leader election: {exc}")
    time.sleep(5)
    rig.freeze_rack("rack-b")  # hung: sockets open, nothing answers
    time.sleep(10)
    rig.thaw_rack("rack-b")
    time.sleep(5)
    reassigner = KafkaAdminClient(bootstrap_servers=cluster.bootstrap,
                                  request_timeout_ms=30000)
    try:
        reassigner.alter_partition_reassignments({KpTopicPartition(topic, 0): [5, 6, 4]})
    finally:
        reassigner.close()
    writer.join(300)
    time.sleep(6)
    lost = _lost_offsets(acked, _read_back(rig.bootstrap, topic))
    checks = _checks(observer.metrics_url) - checks_before
    reported, lines = _reported(observer.proxy.log_path, topic)
    print(f"no false alarm: {len(acked)} acknowledged, {len(lost)} lost, {checks:.0f} "
          f"checks, {len(reported)} reported lost")
    assert not lost and not reported and not lines
    assert _lost_metric(observer.metrics_url, topic) == 0
    assert checks >= 2, "the leader changes were never checked"
