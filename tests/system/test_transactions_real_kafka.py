"""Transactions through rackguard, on real Apache Kafka: a librdkafka transactional
producer (its coordinator found and reached through the proxy's ports) commits one
transaction and aborts another, and a read_committed consumer through the proxy sees the
committed records only, while a read_uncommitted one sees both.

The simulator does not simulate transactions (it refuses them): how transactional
clients and brokers behave through the proxy is shown here only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .rig import SystemRig


@pytest.fixture
def topic(rig: SystemRig) -> Iterator[str]:
    name = f"rg-txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": rig.bootstrap})
    admin.create_topics([NewTopic(name, 3, 3, config={"min.insync.replicas": "2"})])[
        name].result(60)
    yield name
    admin.delete_topics([name])[name].result(60)


def read(rig: SystemRig, topic: str, isolation: str, expect: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": rig.bootstrap, "group.id": f"rg-txn-{isolation}",
                         "auto.offset.reset": "earliest", "isolation.level": isolation,
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(seen) < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        # nothing more arrives (an aborted record would be past what was expected)
        quiet = time.monotonic() + 3
        while time.monotonic() < quiet:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
    finally:
        consumer.close()
    return seen


def test_commit_and_abort_through_the_proxy(rig: SystemRig, topic: str) -> None:
    producer = Producer({"bootstrap.servers": rig.bootstrap,
                         "transactional.id": f"rg-txn-{uuid.uuid4().hex[:8]}", "acks": "all"})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=b"committed-%d" % i, partition=i % 3)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"aborted-%d" % i, partition=i % 3)
    producer.flush(60)
    producer.abort_transaction(60)

    committed = read(rig, topic, "read_committed", 5)
    assert sorted(committed) == [b"committed-%d" % i for i in range(5)]
    everything = read(rig, topic, "read_uncommitted", 8)
    assert sorted(everything) == sorted([b"committed-%d" % i for i in range(5)]
                                        + [b"aborted-%d" % i for i in range(3)])
