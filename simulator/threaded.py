"""Run a SimulatedCluster (a TEST DOUBLE) on its own loop thread, for synchronous code.

Invariant: the cluster lives on the background thread's event loop; every
method here hands its work to that loop (run_coroutine_threadsafe) and waits
with a timeout, so cluster state is only ever touched on the loop thread.
Useful with blocking clients (kafka-python, confluent-kafka) in plain tests.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from simulator.cluster import SimulatedCluster
from simulator.config import SimulatorConfig
from simulator.faults import Fault
from simulator.log import StoredRecord

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 10.0


class ThreadedCluster:
    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="simulated-kafka", daemon=True
        )
        self._cluster: SimulatedCluster | None = None

    def start(self, timeout: float = DEFAULT_TIMEOUT_S) -> ThreadedCluster:
        self._thread.start()
        cluster = SimulatedCluster(self.config)
        self._run(cluster.start(), timeout)
        self._cluster = cluster
        return self

    def stop(self, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        if self._cluster is not None:
            self._run(self._cluster.stop(), timeout)
            self._cluster = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> ThreadedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = DEFAULT_TIMEOUT_S) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _sync(self, fn: Callable[..., T], *args: Any) -> T:
        async def call() -> T:
            return fn(*args)

        return self._run(call())

    @property
    def cluster(self) -> SimulatedCluster:
        """The underlying cluster: only touch it on its loop (see `call`)."""
        if self._cluster is None:
            raise RuntimeError("cluster not started")
        return self._cluster

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def call(self, fn: Callable[[SimulatedCluster], T]) -> T:
        """Run fn(cluster) on the loop thread and return its result."""
        return self._sync(fn, self.cluster)

    def create_topic(self, name: str, partitions: int = 3, replication_factor: int = 3,
                     configs: dict[str, str] | None = None) -> None:
        self._run(self.cluster.create_topic(name, partitions, replication_factor, configs))

    def set_isr(self, topic: str, partition: int, isr: list[int]) -> None:
        self._run(self.cluster.set_isr(topic, partition, isr))

    def set_leader(self, topic: str, partition: int, leader: int) -> None:
        self._run(self.cluster.set_leader(topic, partition, leader))

    def set_topic_config(self, topic: str, key: str, value: str | None) -> None:
        self._run(self.cluster.set_topic_config(topic, key, value))

    def kill_broker(self, node_id: int) -> None:
        self._run(self.cluster.kill_broker(node_id))

    def restore_broker(self, node_id: int) -> None:
        self._run(self.cluster.restore_broker(node_id))

    def fault_rack(self, rack: str | None, fault: Fault | None) -> list[int]:
        return self._run(self.cluster.fault_rack(rack, fault))

    def kill_rack(self, rack: str | None) -> list[int]:
        return self._run(self.cluster.kill_rack(rack))

    def restore_rack(self, rack: str | None) -> list[int]:
        return self._run(self.cluster.restore_rack(rack))

    def records(self, topic: str, partition: int) -> list[StoredRecord]:
        return self._sync(self.cluster.records, topic, partition)

    def record_count(self, topic: str) -> int:
        return self._sync(self.cluster.record_count, topic)

    def snapshot(self) -> dict[str, Any]:
        return self._sync(self.cluster.snapshot)

    def partition_info(self, topic: str, partition: int) -> dict[str, Any]:
        """Leader, epoch, replicas and ISR of one partition (a copy)."""
        def info(c: SimulatedCluster) -> dict[str, Any]:
            p = c.partition(topic, partition)
            return {"leader": p.leader, "leader_epoch": p.leader_epoch,
                    "replicas": list(p.replicas), "isr": list(p.isr),
                    "high_watermark": p.log.high_watermark}
        return self.call(info)
