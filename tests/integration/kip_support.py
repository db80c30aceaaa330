"""Support for the KIP-1290 test plan (test_kip_plan.py): the simulated cluster,
``rackguard serve`` in front of it, a raw Produce client and uniform producers.

Layout of every scenario: six simulated brokers (node ids 1-6) in three racks
assigned round-robin (rack-a: 1, 4; rack-b: 2, 5; rack-c: 3, 6), topics with
replication factor 6 (every broker holds every partition, so killing rack-b
and rack-c leaves every ISR at exactly [1, 4]: two members, one rack) and
min.insync.replicas=2, and the proxy polling metadata every 200 ms.

The proxy runs as a subprocess through the harness's :class:`RackguardProxy`
(ports from the harness allocator, log file, process-group stop); the cluster
is the simulator's :class:`ThreadedCluster` in this process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.memory_records import MemoryRecordsBuilder

from simulator.config import SimulatorConfig, TopicSpec, racked_brokers
from simulator.threaded import ThreadedCluster
from tests.prometheus_text import metrics_url, read_samples, sample

from .harness import wire
from .harness.ports import free_port, free_port_block
from .harness.procs import RackguardProxy

RACKS = ("rack-a", "rack-b", "rack-c")
NODE_IDS = (1, 2, 3, 4, 5, 6)
REFRESH_MS = 200
# A full refresh counts as seeing a cluster change only if it ended this long after the
# change: a poll answered just before the change may be applied just after it.
IN_FLIGHT_S = 0.25

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
DEDICATED_CODE = 1290
RACKS_PREFIX = "NOT_ENOUGH_RACKS:"


def rack_of(node_id: int) -> str:
    """The rack racked_brokers() gives node ``node_id`` (round-robin from node 1)."""
    return RACKS[(node_id - 1) % len(RACKS)]


def wait_until(pred: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


# --------------------------------------------------------------------------
# the cluster


def start_cluster(*topics: TopicSpec) -> ThreadedCluster:
    base = free_port_block(range(len(NODE_IDS)))
    config = SimulatorConfig(
        brokers=racked_brokers(len(NODE_IDS), list(RACKS), port_base=base),
        topics=list(topics),
        default_min_insync_replicas=2,
    )
    return ThreadedCluster(config).start()


def topic(name: str, partitions: int = 3, min_isr: int = 2, rf: int = 6) -> TopicSpec:
    return TopicSpec(name, partitions, rf, {"min.insync.replicas": str(min_isr)})


def broker_ports(cluster: ThreadedCluster) -> list[int]:
    return [int(a.rsplit(":", 1)[1]) for a in cluster.bootstrap_servers.split(",")]


def stored_values(cluster: ThreadedCluster, name: str, partitions: Iterable[int]) -> list[bytes]:
    return [r.value for p in partitions for r in cluster.records(name, p) if r.value is not None]


def kill_all_but_rack_a(cluster: ThreadedCluster) -> None:
    """The outage: rack-b and rack-c are down, every RF-6 ISR is [1, 4] (rack-a only)."""
    assert cluster.kill_rack("rack-b") == [2, 5]
    assert cluster.kill_rack("rack-c") == [3, 6]


def restore_racks(cluster: ThreadedCluster) -> None:
    cluster.restore_rack("rack-b")
    cluster.restore_rack("rack-c")


def isr_racks(cluster: ThreadedCluster, name: str, partition: int) -> set[str]:
    return {rack_of(n) for n in cluster.partition_info(name, partition)["isr"]}


# --------------------------------------------------------------------------
# the proxy


class KipProxy(RackguardProxy):
    """``rackguard serve`` in front of the simulated cluster, with policy flags."""

    def __init__(
        self,
        cluster: ThreadedCluster,
        log_dir: Path,
        *,
        min_insync_racks: int | None = 2,
        error_mode: str | None = None,
        not_enough_racks_code: int | None = None,
        config_file: Path | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        # Every broker as an upstream bootstrap, broker 2 (rack-b) first: the proxy's
        # poller starts on a broker the outage kills and must fail over to another.
        addresses = cluster.bootstrap_servers.split(",")
        upstream = ",".join(addresses[1:] + addresses[:1])
        super().__init__(upstream, log_dir, node_ids=NODE_IDS)
        self.argv += ["--metadata-refresh-interval-ms", str(REFRESH_MS)]
        if min_insync_racks is not None:
            self.argv += ["--min-insync-racks", str(min_insync_racks)]
        if error_mode is not None:
            self.argv += ["--error-mode", error_mode]
        if not_enough_racks_code is not None:
            self.argv += ["--not-enough-racks-code", str(not_enough_racks_code)]
        if config_file is not None:
            self.argv += ["--config", str(config_file)]
        self.argv += list(extra)
        if "--metrics-port" in self.argv:
            self.metrics_port = int(self.argv[self.argv.index("--metrics-port") + 1])
        else:
            self.metrics_port = free_port()
            self.argv += ["--metrics-port", str(self.metrics_port)]

    def refreshed_since(self, changed_at: float, timeout: float = 10.0) -> None:
        """A deadline poll instead of a sleep: returns once the proxy's view has had a full
        refresh after ``changed_at`` (a ``time.monotonic()`` taken after the cluster was
        changed), read from its ``rackguard_metadata_age_seconds``."""
        def refreshed() -> bool:
            age = sample(read_samples(metrics_url(self.metrics_port), 2),
                         "rackguard_metadata_age_seconds")
            return age is not None and age < time.monotonic() - changed_at - IN_FLIGHT_S

        wait_until(refreshed, timeout, f"a metadata refresh of {self.describe()} after the "
                   f"cluster changed:\n{self.log_tail(2000)}")

    def start(self, timeout: float = 15.0) -> None:  # type: ignore[override]
        super().start(timeout)
        # Broker listeners open once the first metadata poll has named the brokers.
        try:
            for node_id in NODE_IDS:
                host, port = self.broker_address(node_id)
                wire.wait_for_port(host, port, timeout, proc=self.proc)
        except Exception as e:
            self.stop()
            raise RuntimeError(f"rackguard broker listeners missing: {e}\n{self.log_tail()}") from e

    def broker_bootstrap(self, node_id: int) -> str:
        host, port = self.broker_address(node_id)
        return f"{host}:{port}"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""

    def count(self, needle: str) -> int:
        return self.log_text().count(needle)

    def wait_for_log(self, needle: str, count: int = 1, timeout: float = 10.0) -> None:
        wait_until(lambda: self.count(needle) >= count, timeout,
                   f"{count}x {needle!r} in the proxy log:\n{self.log_tail(3000)}")

    def rejection_lines(self, name: str) -> list[str]:
        """The proxy's own NOT_ENOUGH_RACKS log lines for topic ``name``."""
        pat = re.compile(rf"rejected produce .*NOT_ENOUGH_RACKS: {re.escape(name)}-\d+:")
        return [line for line in self.log_text().splitlines() if pat.search(line)]

    def sighup(self) -> None:
        assert self.alive(), self.describe()
        os.kill(self.pid, signal.SIGHUP)


# --------------------------------------------------------------------------
# raw Produce requests (kafka-python's protocol classes over a plain socket)


@dataclass(frozen=True)
class PartResult:
    topic: str
    partition: int
    error_code: int
    base_offset: int
    error_message: str | None


def record_batch(values: Sequence[bytes]) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    now = int(time.time() * 1000)
    for v in values:
        builder.append(timestamp=now, key=None, value=v)
    builder.close()
    return bytes(builder.buffer())


def produce_request(
    parts: Sequence[tuple[str, int, Sequence[bytes]]], acks: int = -1, version: int = 9,
    timeout_ms: int = 3000,
) -> ProduceRequest:
    """One ProduceRequest; ``parts`` keeps its order (topics grouped in first-seen order)."""
    topic_data = ProduceRequest.TopicProduceData
    part_data = topic_data.PartitionProduceData
    grouped: dict[str, list[Any]] = {}
    for name, index, values in parts:
        grouped.setdefault(name, []).append(part_data(index=index, records=record_batch(values)))
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[topic_data(name=n, partition_data=p) for n, p in grouped.items()],
        version=version,
    )


def raw_produce(
    conn: wire.RawKafkaConnection,
    parts: Sequence[tuple[str, int, Sequence[bytes]]],
    acks: int = -1,
    version: int = 9,
) -> list[PartResult]:
    """Send one Produce request on ``conn``; per-partition results in response order."""
    _, resp = conn.request(produce_request(parts, acks, version), ProduceResponse, version)
    out = []
    for t in resp.responses:
        for p in t.partition_responses:
            out.append(PartResult(t.name, p.index, p.error_code, p.base_offset,
                                  getattr(p, "error_message", None)))
    return out


def raw_produce_to(
    address: tuple[str, int], parts: Sequence[tuple[str, int, Sequence[bytes]]],
    acks: int = -1, version: int = 9,
) -> list[PartResult]:
    with wire.RawKafkaConnection(*address, timeout=10.0) as conn:
        return raw_produce(conn, parts, acks, version)


# --------------------------------------------------------------------------
# producers of the three Python client libraries behind one interface
#
# ``send`` blocks until every record has an outcome; ``start_send`` only queues
# the records (the client keeps retrying in the background) and ``finish``
# collects the outcomes later: test g starts its sends during the outage and
# finishes them after the racks are back.


@dataclass(frozen=True)
class Outcome:
    ok: bool
    offset: int | None = None
    code: int | None = None  # the client's error code (None: no code, e.g. a timeout)
    text: str = ""  # what the client shows of the error


def _failed(e: BaseException) -> Outcome:
    return Outcome(False, None, getattr(e, "errno", None), f"{type(e).__name__}: {e}")


class KafkaPythonProducer:
    name = "kafka-python"

    def __init__(self, bootstrap: str, acks: int | str, **kw: Any) -> None:
        from kafka import KafkaProducer

        opts: dict[str, Any] = {
            "request_timeout_ms": 3000, "max_block_ms": 5000, "retries": 3,
            "retry_backoff_ms": 100, "delivery_timeout_ms": 4000, "linger_ms": 0,
        }
        opts.update(kw)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, **opts)
        self._pending: list[Any] = []

    def start_send(self, name: str, partition: int | None, values: Sequence[bytes],
                   keyed: bool = False) -> None:
        self._pending = [
            self.producer.send(name, value=v, key=v if keyed else None, partition=partition)
            for v in values
        ]

    def finish(self, timeout: float = 10) -> list[Outcome]:
        self.producer.flush(timeout)
        out = []
        for f in self._pending:
            try:
                out.append(Outcome(True, f.get(timeout=timeout).offset))
            except Exception as e:  # noqa: BLE001 - the outcome is the assertion
                out.append(_failed(e))
        self._pending = []
        return out

    def send(self, name: str, partition: int | None, values: Sequence[bytes]) -> list[Outcome]:
        self.start_send(name, partition, values)
        return self.finish()

    def close(self) -> None:
        self.producer.close(5)


class AioKafkaProducer:
    """aiokafka on a private event loop running on its own thread."""

    name = "aiokafka"

    def __init__(self, bootstrap: str, acks: int | str, **kw: Any) -> None:
        from aiokafka import AIOKafkaProducer

        opts: dict[str, Any] = {"request_timeout_ms": 2000, "retry_backoff_ms": 100}
        opts.update(kw)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="aiokafka",
                                        daemon=True)
        self._thread.start()
        self._pending: concurrent.futures.Future[list[Outcome]] | None = None

        async def make() -> Any:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks, **opts)
            await asyncio.wait_for(p.start(), 10)
            return p

        try:
            self.producer = self._run(make(), 15)
        except BaseException:
            self._stop_loop()
            raise

    def _run(self, coro: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start_send(self, name: str, partition: int | None, values: Sequence[bytes],
                   keyed: bool = False) -> None:
        async def one(v: bytes) -> Outcome:
            try:
                md = await self.producer.send_and_wait(
                    name, v, key=v if keyed else None, partition=partition)
                return Outcome(True, md.offset)
            except Exception as e:  # noqa: BLE001
                return _failed(e)

        async def all_of() -> list[Outcome]:
            return list(await asyncio.gather(*(one(v) for v in values)))

        self._pending = asyncio.run_coroutine_threadsafe(all_of(), self.loop)

    def finish(self, timeout: float = 15) -> list[Outcome]:
        assert self._pending is not None
        try:
            return self._pending.result(timeout)
        finally:
            self._pending = None

    def send(self, name: str, partition: int | None, values: Sequence[bytes]) -> list[Outcome]:
        self.start_send(name, partition, values)
        return self.finish()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()

    def close(self) -> None:
        try:
            self._run(asyncio.wait_for(self.producer.stop(), 10), 12)
        finally:
            self._stop_loop()


class ConfluentProducer:
    name = "confluent-kafka"

    def __init__(self, bootstrap: str, acks: int | str, **kw: Any) -> None:
        from confluent_kafka import Producer

        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "acks": acks, "retries": 3,
            "retry.backoff.ms": 100, "message.timeout.ms": 4000, "linger.ms": 0,
            "socket.timeout.ms": 3000, "log_level": 3,
        }
        conf.update(kw)
        self.producer = Producer(conf)
        self._results: dict[int, Outcome] = {}
        self._count = 0

    def start_send(self, name: str, partition: int | None, values: Sequence[bytes],
                   keyed: bool = False) -> None:
        self._results = results = {}
        self._count = len(values)

        def report(i: int) -> Callable[[Any, Any], None]:
            def cb(err: Any, msg: Any) -> None:
                if err is None:
                    results[i] = Outcome(True, msg.offset())
                else:
                    results[i] = Outcome(False, None, err.code(), f"{err.name()}: {err.str()}")
            return cb

        for i, v in enumerate(values):
            kw: dict[str, Any] = {} if partition is None else {"partition": partition}
            if keyed:
                kw["key"] = v
            self.producer.produce(name, value=v, on_delivery=report(i), **kw)
        self.producer.poll(0)

    def finish(self, timeout: float = 30) -> list[Outcome]:
        remaining = self.producer.flush(timeout)
        assert remaining == 0, f"{remaining} message(s) still queued after {timeout} s"
        return [self._results[i] for i in range(self._count)]

    def send(self, name: str, partition: int | None, values: Sequence[bytes]) -> list[Outcome]:
        self.start_send(name, partition, values)
        return self.finish()

    def close(self) -> None:
        # Fail whatever is still queued (a failed test may leave a long delivery timeout
        # behind), then stop librdkafka's threads: nothing may outlive the test.
        self.producer.purge()
        self.producer.flush(2)
        close = getattr(self.producer, "close", None)  # confluent-kafka >= 2.11
        if close is not None:
            close()


PRODUCERS: dict[str, type] = {
    "kafka-python": KafkaPythonProducer,
    "aiokafka": AioKafkaProducer,
    "confluent-kafka": ConfluentProducer,
}


def make_producer(client: str, bootstrap: str, acks: int | str, **kw: Any) -> Any:
    """A producer of ``client``; ``acks`` "all"/-1/1 in each library's own spelling."""
    if client == "confluent-kafka" and acks == "all":
        acks = -1
    return PRODUCERS[client](bootstrap, acks, **kw)


def idempotent_producer(client: str, bootstrap: str) -> Any:
    """acks=all, idempotent, long delivery timeout (it must outlive a short outage)."""
    if client == "confluent-kafka":
        return make_producer(client, bootstrap, "all", **{
            "enable.idempotence": True, "retries": 2**31 - 1, "message.timeout.ms": 25000,
            "linger.ms": 5})
    if client == "kafka-python":
        return make_producer(client, bootstrap, "all", enable_idempotence=True,
                             retries=2**31 - 1, delivery_timeout_ms=25000,
                             request_timeout_ms=5000, linger_ms=5)
    return make_producer(client, bootstrap, "all", enable_idempotence=True,
                         request_timeout_ms=25000, linger_ms=5)
