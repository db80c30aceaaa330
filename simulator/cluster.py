"""SimulatedCluster: the running multi-rack cluster simulator (a TEST DOUBLE, not Kafka).

Invariants: every broker of the config has one BrokerServer; a broker is
listening exactly when it is alive in ClusterState. All control methods are
coroutines to be awaited on the cluster's own event loop (use
simulator.threaded.ThreadedCluster from synchronous code): state is never
touched from another thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from simulator.config import SimulatorConfig, TopicSpec
from simulator.control import ControlServer
from simulator.core import SimCore
from simulator.faults import Fault
from simulator.log import StoredRecord
from simulator.server import BrokerServer
from simulator.state import Partition, Topic

log = logging.getLogger(__name__)
SESSION_CHECK_INTERVAL_S = 0.1


class SimulatedCluster:
    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self.core = SimCore(config)
        self.servers: dict[int, BrokerServer] = {
            b.node_id: BrokerServer(self.core, b.node_id, config.host, b.port)
            for b in config.brokers
        }
        self.control: ControlServer | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle -------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            for node_id, server in self.servers.items():
                await server.start()
                self.core.state.brokers[node_id].port = server.port
            for spec in self.config.topics:
                await self.create_topic(
                    spec.name, spec.partitions, spec.replication_factor, spec.configs
                )
            if self.config.control_port is not None:
                self.control = ControlServer(self, self.config.host, self.config.control_port)
                await self.control.start()
        except BaseException:
            await self.stop()
            raise
        self._reaper = asyncio.create_task(self._expire_sessions())
        log.info("simulated cluster up: %s", self.bootstrap_servers)

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        if self.control is not None:
            await self.control.stop()
        for server in self.servers.values():
            await server.stop()

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(SESSION_CHECK_INTERVAL_S)
            for member in self.core.groups.expire_sessions():
                log.info("group member %s expired", member)

    # -- addresses -------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """host:port of every broker, comma separated (all, alive or not)."""
        host = self.config.public_host
        return ",".join(f"{host}:{s.port}" for _, s in sorted(self.servers.items()))

    def port_of(self, node_id: int) -> int:
        return self.servers[node_id].port

    # -- control ---------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int = 3,
        replication_factor: int = 3,
        configs: dict[str, str] | None = None,
        assignment: list[list[int]] | None = None,
    ) -> Topic:
        return self.core.state.create_topic(
            name, partitions, replication_factor, configs, assignment
        )

    async def set_isr(self, topic: str, partition: int, isr: list[int]) -> Partition:
        return self.core.state.set_isr(topic, partition, isr)

    async def set_leader(self, topic: str, partition: int, leader: int) -> Partition:
        return self.core.state.set_leader(topic, partition, leader)

    async def set_topic_config(self, topic: str, key: str, value: str | None) -> None:
        self.core.state.alter_topic_configs(topic, {key: value}, replace=False)

    async def kill_broker(self, node_id: int) -> None:
        """Stop broker `node_id` listening and drop its connections; no-op if dead."""
        if not self.core.state.brokers[node_id].alive:
            return
        self.core.state.kill_broker(node_id)
        await self.servers[node_id].stop()
        self.core.notify_append()  # wake long-polls so they notice leadership moved

    async def restore_broker(self, node_id: int) -> None:
        """Listen again on the same port and rejoin ISRs; no-op if alive."""
        if self.core.state.brokers[node_id].alive:
            return
        await self.servers[node_id].start()
        self.core.state.restore_broker(node_id)

    async def fault_broker(self, node_id: int, fault: Fault | None) -> None:
        """Show a network fault (simulator/faults.py) on one broker; None heals it."""
        await self.servers[node_id].set_fault(fault)

    async def fault_rack(self, rack: str | None, fault: Fault | None) -> list[int]:
        nodes = self.core.state.brokers_in_rack(rack)
        for node_id in nodes:
            await self.fault_broker(node_id, fault)
        return nodes

    async def kill_rack(self, rack: str | None) -> list[int]:
        nodes = self.core.state.brokers_in_rack(rack)
        for node_id in nodes:
            await self.kill_broker(node_id)
        return nodes

    async def restore_rack(self, rack: str | None) -> list[int]:
        nodes = self.core.state.brokers_in_rack(rack)
        for node_id in nodes:
            await self.restore_broker(node_id)
        return nodes

    # -- inspection (call on the loop thread) ------------------------------

    def partition(self, topic: str, partition: int) -> Partition:
        return self.core.state.require_partition(topic, partition)

    def records(self, topic: str, partition: int) -> list[StoredRecord]:
        return self.partition(topic, partition).log.records()

    def record_count(self, topic: str) -> int:
        return sum(len(p.log.records()) for p in self.core.state.topics[topic].partitions)

    def snapshot(self) -> dict[str, Any]:
        snap = self.core.state.snapshot()
        snap["bootstrap_servers"] = self.bootstrap_servers
        return snap


async def start_cluster(config: SimulatorConfig | None = None, **kwargs: Any) -> SimulatedCluster:
    """Start a simulated cluster on the running loop; `await cluster.stop()` ends it."""
    if config is None:
        config = SimulatorConfig(**kwargs)
    cluster = SimulatedCluster(config)
    await cluster.start()
    return cluster


__all__ = ["SimulatedCluster", "start_cluster", "TopicSpec"]
