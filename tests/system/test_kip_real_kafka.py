"""KIP-1290's test plan against REAL Apache Kafka brokers, through rackguard, with real clients.

Needs a cluster of brokers in three racks behind rackguard with
min.insync.racks=2: the repository's docker-compose.yml where a Docker engine
runs, or an existing one named by RGTEST_* variables (see tests/system/rig.py
and docs/testing.md). Without either, every test here skips with
the reason.

    .venv/bin/python -m pytest -m system tests/system -v

Topics: replication factor = every broker (so each partition has two replicas
in the rack that stays up) and min.insync.replicas=2; a second topic with
min.insync.replicas=3 shows the broker's own NOT_ENOUGH_REPLICAS. The outage
stops the last rack, then every rack but the first: the ISR shrinks to the
first rack's two brokers, two members in one rack.

Clients: raw Produce requests, kafka-python, confluent-kafka (librdkafka) and the
official Java client (idempotent).

Plan item -> test:
  acks=all succeeds while the ISR spans enough racks   test_every_rack_up
  rejected with NOT_ENOUGH_RACKS when racks are down,
  both thresholds independent, acks=1 untouched,
  restoring the racks lets acks=all succeed again     test_rack_outage_and_restore
"""

from __future__ import annotations

import os
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from protocol.metadata import (
    MetadataSnapshot,
    PartitionMetadata,
    TopicMetadata,
    read_metadata,
)
from tests.integration.harness.java import JavaClient
from tests.integration.harness.wire import RawKafkaConnection
from tests.integration.kip_support import (
    NOT_ENOUGH_REPLICAS,
    RACKS_PREFIX,
    make_producer,
    raw_produce_to,
)
from tests.prometheus_text import Samples, read_samples

from .rig import SystemRig

pytestmark = pytest.mark.system

PARTITIONS = 3
CLIENTS = ("kafka-python", "confluent-kafka")
WAIT_S = float(os.environ.get("RGTEST_WAIT_S", "120"))
# after the cluster's metadata shows a change: a few of the proxy's polls (2 s each)
SETTLE_S = float(os.environ.get("RGTEST_SETTLE_S", "6"))


def metadata(rig: SystemRig, topics: list[str] | None) -> MetadataSnapshot:
    with RawKafkaConnection(*rig.host_port, timeout=10.0, client_id="rg-system") as conn:
        raw, _ = conn.request(MetadataRequest(version=5, topics=topics,
                                              allow_auto_topic_creation=False),
                              MetadataResponse, 5)
    return read_metadata(struct.pack(">i", len(raw)) + raw, 5)


def racks_of(snapshot: MetadataSnapshot) -> dict[int, str]:
    return {b.node_id: b.rack or "" for b in snapshot.brokers}


def wait_until(check: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(1.0)


def isr_racks(rig: SystemRig, topic: str, racks: dict[int, str]) -> list[set[str]]:
    snap = metadata(rig, [topic])
    return [{racks.get(n, "?") for n in PartitionMetadata(*p).isr}
            for t in snap.topics for p in TopicMetadata(*t).partitions]


def wait_isr_racks(rig: SystemRig, topics: list[str], racks: dict[int, str],
                   expected: set[str]) -> None:
    def ok() -> bool:
        return all(r == expected for t in topics for r in isr_racks(rig, t, racks))
    wait_until(ok, f"every ISR of {topics} to span exactly {sorted(expected)}")
    time.sleep(SETTLE_S)


def leader_address(rig: SystemRig, topic: str, partition: int) -> tuple[str, int]:
    """The proxy's address for the partition's leader, as the proxy's Metadata gives it."""
    snap = metadata(rig, [topic])
    leader = next(p.leader for t in snap.topics
                  for p in map(PartitionMetadata._make, TopicMetadata(*t).partitions)
                  if p.partition_index == partition)
    broker = next(b for b in snap.brokers if b.node_id == leader)
    return broker.host, broker.port


def produce_each(rig: SystemRig, topic: str, acks: int = -1) -> list[tuple[int, str | None]]:
    """One raw Produce per partition to its leader (through the proxy): (code, message)."""
    out = []
    for p in range(PARTITIONS):
        [result] = raw_produce_to(leader_address(rig, topic, p),
                                  [(topic, p, [b"system-" + str(p).encode()])], acks=acks)
        out.append((result.error_code, result.error_message))
    return out


def client_outcomes(rig: SystemRig, client: str, topic: str, **opts: Any) -> list[Any]:
    producer = make_producer(client, rig.bootstrap, "all", **opts)
    try:
        return [o for p in range(PARTITIONS)
                for o in producer.send(topic, p, [f"{client}-{p}".encode()])]
    finally:
        producer.close()


def no_retries(client: str) -> dict[str, Any]:
    return {"retries": 0} if client == "kafka-python" else {"retries": 0,
                                                             "message.timeout.ms": 10000}


def scrape(rig: SystemRig) -> Samples | None:
    return None if rig.metrics_url is None else read_samples(rig.metrics_url, 10)


@pytest.fixture(scope="module")
def topics(rig: SystemRig) -> Iterator[tuple[str, str, dict[int, str]]]:
    from kafka.admin import KafkaAdminClient, NewTopic

    snap = metadata(rig, None)
    racks = racks_of(snap)
    kept = rig.racks[0]
    if sum(1 for r in racks.values() if r == kept) < 2:
        pytest.skip(f"rack {kept} needs two brokers (has {sorted(racks)} -> {racks})")
    if set(racks.values()) != set(rig.racks):
        pytest.skip(f"the cluster's racks {sorted(set(racks.values()))} are not {rig.racks}")
    suffix = uuid.uuid4().hex[:8]
    main, strict = f"rg-system-{suffix}", f"rg-system-minisr3-{suffix}"
    admin = KafkaAdminClient(bootstrap_servers=rig.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([
            NewTopic(main, PARTITIONS, len(racks), topic_configs={"min.insync.replicas": "2"}),
            NewTopic(strict, PARTITIONS, len(racks),
                     topic_configs={"min.insync.replicas": "3"}),
        ])
        wait_isr_racks(rig, [main, strict], racks, set(rig.racks))
        yield main, strict, racks
    finally:
        try:  # best effort: a cluster just back from an outage may still refuse it
            admin.delete_topics([main, strict])
        except Exception as exc:  # noqa: BLE001
            print(f"deleting {main}, {strict} failed: {exc!r}")
        finally:
            admin.close()


def java_produce(java_client: JavaClient, rig: SystemRig, topic: str, n: int,
                 **opts: Any) -> dict[str, Any]:
    r = java_client.run("produce", timeout=90, bootstrap=rig.bootstrap, topic=topic, n=n,
                        **opts)
    assert r.result is not None, str(r)
    return r.result


def test_every_rack_up(rig: SystemRig, topics: tuple[str, str, dict[int, str]],
                       java_client: JavaClient) -> None:
    main, _, _ = topics
    assert produce_each(rig, main) == [(0, None)] * PARTITIONS
    for client in CLIENTS:
        outcomes = client_outcomes(rig, client, main)
        assert all(o.ok for o in outcomes), (client, outcomes)
    result = java_produce(java_client, rig, main, 6)
    assert (result["acked"], result["errors"]) == (6, []), result


def test_rack_outage_and_restore(rig: SystemRig, topics: tuple[str, str, dict[int, str]],
                                 java_client: JavaClient) -> None:
    main, strict, racks = topics
    first, *middle, last = rig.racks

    # the last rack goes: every ISR still spans min.insync.racks=2 racks (at the minimum)
    rig.stop_rack(last)
    wait_isr_racks(rig, [main], racks, {first, *middle})
    assert produce_each(rig, main) == [(0, None)] * PARTITIONS
    samples = scrape(rig)
    if samples is not None:
        for p in range(PARTITIONS):
            key = ("rackguard_at_min_rack_isr", (("partition", str(p)), ("topic", main)))
            assert samples.get(key) == 1, key

    # every rack but the first goes: ISRs shrink to two members in one rack
    for rack in reversed(middle):
        rig.stop_rack(rack)
    wait_isr_racks(rig, [main, strict], racks, {first})
    for code, message in produce_each(rig, main):
        assert code == NOT_ENOUGH_REPLICAS  # compat mode: 19 on the wire...
        assert message is not None and message.startswith(RACKS_PREFIX)  # ...named
    for client in CLIENTS:
        outcomes = client_outcomes(rig, client, main, **no_retries(client))
        assert all(not o.ok and o.code == NOT_ENOUGH_REPLICAS for o in outcomes), (
            client, outcomes)
    # the Java client retries the refusal (code 19) until its delivery timeout, then fails
    result = java_produce(java_client, rig, main, 3, delivery_timeout_ms=12000)
    assert result["acked"] == 0 and len(result["errors"]) == 3, result
    # acks=1 is never touched
    assert [c for c, _ in produce_each(rig, main, acks=1)] == [0] * PARTITIONS
    # min.insync.replicas=3 with two in-sync replicas: the broker's own answer, not the proxy's
    for code, message in produce_each(rig, strict):
        assert code == NOT_ENOUGH_REPLICAS
        assert not (message or "").startswith(RACKS_PREFIX)
    samples = scrape(rig)
    if samples is not None:
        for p in range(PARTITIONS):
            key = ("rackguard_under_min_rack_isr", (("partition", str(p)), ("topic", main)))
            assert samples.get(key) == 1, key
        rejected = ("rackguard_produce_partitions_total", (
            ("decision", "rejected"), ("reason", "NOT_ENOUGH_RACKS"), ("topic", main)))
        assert (samples.get(rejected) or 0) >= PARTITIONS

    # the racks come back: ISRs recover and acks=all succeeds again
    rig.restore_all()
    wait_isr_racks(rig, [main, strict], racks, set(rig.racks))
    assert produce_each(rig, main) == [(0, None)] * PARTITIONS
    assert produce_each(rig, strict) == [(0, None)] * PARTITIONS
    for client in CLIENTS:
        outcomes = client_outcomes(rig, client, main)
        assert all(o.ok for o in outcomes), (client, outcomes)
    result = java_produce(java_client, rig, main, 6)
    assert (result["acked"], result["errors"]) == (6, []), result
