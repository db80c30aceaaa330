"""Real clients (kafka-python, aiokafka, confluent-kafka) against the simulator."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import NotEnoughReplicasError

from simulator import SimulatedCluster, ThreadedCluster

pytestmark = pytest.mark.integration
N = 30


def kp_producer(c: ThreadedCluster, **kw: object) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=c.bootstrap_servers, request_timeout_ms=3000,
                         max_block_ms=5000, **kw)


def test_kafka_python_produce_and_group_consume(threaded: ThreadedCluster) -> None:
    producer = kp_producer(threaded, acks="all", enable_idempotence=True)
    futures = [producer.send("t", key=b"k%d" % i, value=b"v%d" % i) for i in range(N)]
    producer.flush(10)
    offsets = [f.get(timeout=5).offset for f in futures]
    producer.close(5)
    assert min(offsets) == 0
    assert threaded.record_count("t") == N

    consumer = KafkaConsumer(
        "t", bootstrap_servers=threaded.bootstrap_servers, group_id="kp-group",
        auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=8000,
    )
    seen = set()
    for message in consumer:
        seen.add(message.value)
        if len(seen) == N:
            break
    consumer.commit()
    consumer.close()
    assert seen == {b"v%d" % i for i in range(N)}
    committed = threaded.call(lambda c: c.core.groups.committed("kp-group"))
    assert sum(o.offset for o in committed.values()) == N


def test_kafka_python_not_enough_replicas_vs_acks_1(threaded: ThreadedCluster) -> None:
    threaded.set_isr("t", 0, [threaded.partition_info("t", 0)["leader"]])
    strict = kp_producer(threaded, acks="all", retries=0)
    with pytest.raises(NotEnoughReplicasError):
        strict.send("t", b"rejected", partition=0).get(timeout=5)
    strict.close(5)
    relaxed = kp_producer(threaded, acks=1)
    assert relaxed.send("t", b"accepted", partition=0).get(timeout=5).offset == 0
    relaxed.close(5)
    assert [r.value for r in threaded.records("t", 0)] == [b"accepted"]


def test_kill_and_restore_rack_with_idempotent_producer(threaded: ThreadedCluster) -> None:
    producer = kp_producer(threaded, acks="all", enable_idempotence=True, linger_ms=5)
    for i in range(10):
        producer.send("t", b"before-%d" % i)
    producer.flush(10)
    killed = threaded.kill_rack("rack-c")
    assert killed == [3, 6]
    for part in threaded.snapshot()["topics"]["t"]["partitions"]:
        assert part["isr_racks"] == ["rack-a", "rack-b"]
        assert part["leader"] not in killed
    for i in range(10):  # ISR of 2 still meets min.insync.replicas=2
        producer.send("t", b"during-%d" % i)
    producer.flush(10)
    threaded.restore_rack("rack-c")
    for part in threaded.snapshot()["topics"]["t"]["partitions"]:
        assert part["isr_racks"] == ["rack-a", "rack-b", "rack-c"]
        assert part["leader"] == part["replicas"][0]  # preferred leaders came back
    for i in range(10):
        producer.send("t", b"after-%d" % i)
    producer.flush(10)
    producer.close(5)
    assert threaded.record_count("t") == 30  # nothing lost, nothing duplicated


def test_restored_rack_listens_on_the_same_ports(threaded: ThreadedCluster) -> None:
    before = threaded.cluster.bootstrap_servers
    threaded.kill_rack("rack-a")
    threaded.restore_rack("rack-a")
    assert threaded.cluster.bootstrap_servers == before
    producer = kp_producer(threaded, acks="all")
    producer.send("t", b"x", partition=0).get(timeout=5)  # partition 0's leader is broker 1
    producer.close(5)


async def test_aiokafka_produce_consume_and_commit(cluster: SimulatedCluster) -> None:
    async with asyncio.timeout(20):
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                                    enable_idempotence=True)
        await producer.start()
        for i in range(N):
            await producer.send("t", b"v%d" % i, key=b"k%d" % i)
        await producer.flush()
        await producer.stop()

        consumer = AIOKafkaConsumer(
            "t", bootstrap_servers=cluster.bootstrap_servers, group_id="aio-group",
            auto_offset_reset="earliest", enable_auto_commit=False,
        )
        await consumer.start()
        seen = []
        async for message in consumer:
            seen.append(message.value)
            if len(seen) == N:
                break
        await consumer.commit()
        await consumer.stop()
    assert sorted(seen) == sorted(b"v%d" % i for i in range(N))
    committed = cluster.core.groups.committed("aio-group")
    assert sum(o.offset for o in committed.values()) == N


async def test_aiokafka_consumer_follows_coordinator_after_rack_loss(
    cluster: SimulatedCluster,
) -> None:
    async with asyncio.timeout(20):
        await cluster.kill_rack("rack-a")  # broker 1, the coordinator, is gone
        assert cluster.core.state.coordinator() == 2
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
        await producer.start()
        for i in range(5):
            await producer.send_and_wait("t", b"m%d" % i)
        await producer.stop()
        consumer = AIOKafkaConsumer("t", bootstrap_servers=cluster.bootstrap_servers,
                                    group_id="g-after", auto_offset_reset="earliest")
        await consumer.start()
        got = [await consumer.getone() for _ in range(5)]
        await consumer.stop()
    assert sorted(m.value for m in got) == [b"m%d" % i for i in range(5)]


def test_confluent_admin_producer_consumer(threaded: ThreadedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": threaded.bootstrap_servers})
    for future in admin.create_topics([NewTopic("ck", 4, 3)]).values():
        future.result(10)
    assert len(admin.list_topics(timeout=5).topics["ck"].partitions) == 4

    producer = Producer({"bootstrap.servers": threaded.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    errors: list[object] = []
    for i in range(N):
        producer.produce("ck", key=b"k%d" % i, value=b"v%d" % i,
                         on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(10) == 0
    assert errors == [None] * N
    assert threaded.record_count("ck") == N

    consumer = Consumer({"bootstrap.servers": threaded.bootstrap_servers, "group.id": "ck-g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["ck"])
    seen = set()
    deadline = time.monotonic() + 10
    while len(seen) < N and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.add(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert len(seen) == N
    committed = threaded.call(lambda c: c.core.groups.committed("ck-g"))
    assert sum(o.offset for o in committed.values()) == N


def test_kill_and_restore_are_idempotent(threaded: ThreadedCluster) -> None:
    threaded.set_isr("t", 0, [1, 2])
    threaded.restore_broker(3)  # alive already: must not re-add 3 to the ISR
    assert threaded.partition_info("t", 0)["isr"] == [1, 2]
    threaded.kill_broker(2)
    threaded.kill_broker(2)
    assert threaded.partition_info("t", 0)["isr"] == [1]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_metadata_produce_consume(threaded: ThreadedCluster) -> None:
    broker = threaded.bootstrap_servers.split(",")[0]
    listing = subprocess.run(["kcat", "-L", "-b", broker], capture_output=True, text=True,
                             timeout=15, check=True).stdout
    assert "6 brokers" in listing and 'topic "t" with 3 partitions' in listing
    subprocess.run(["kcat", "-P", "-b", broker, "-t", "t", "-p", "1", "-X", "acks=all"],
                   input="a\nb\nc\n", text=True, timeout=15, check=True)
    out = subprocess.run(["kcat", "-C", "-b", broker, "-t", "t", "-p", "1", "-o", "beginning",
                          "-e", "-q"], capture_output=True, text=True, timeout=15, check=True)
    assert out.stdout.split() == ["a", "b", "c"]
