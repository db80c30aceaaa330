"""The simulator's shared in-memory cluster (a TEST DOUBLE, not Kafka): no sockets here.

Invariant: one SimCore per simulated cluster holds the ClusterState, the
group coordinator, the producer ids given out and the append notification; it is used
only from the event-loop thread. Every append to any partition log goes
through `notify_append` so that long-polling fetches wake up.
"""

from __future__ import annotations

import asyncio
import contextlib

from simulator.config import SimulatorConfig
from simulator.groups import GroupCoordinator
from simulator.state import ClusterState, Topic


class SimCore:
    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self.state = ClusterState(
            config.brokers, config.default_min_insync_replicas, config.preferred_leader_election
        )
        self.groups = GroupCoordinator(config.group_initial_rebalance_delay_ms)
        self.next_producer_id = 1000  # InitProducerId: unique and increasing
        self._appended: asyncio.Event | None = None
        # Record bytes served by Fetch, by (client id, serving node): the simulator's own
        # count of where consumers read from, to check a proxy's locality figures against.
        self.fetched_bytes: dict[tuple[str, int], int] = {}
        # Bytes of whole Fetch response frames sent, by (client id, serving node).
        self.fetch_frame_bytes: dict[tuple[str, int], int] = {}

    def count_fetch(self, client_id: str | None, node_id: int, size: int) -> None:
        if size:
            key = (client_id or "", node_id)
            self.fetched_bytes[key] = self.fetched_bytes.get(key, 0) + size

    def count_fetch_frame(self, client_id: str | None, node_id: int, size: int) -> None:
        key = (client_id or "", node_id)
        self.fetch_frame_bytes[key] = self.fetch_frame_bytes.get(key, 0) + size

    def address(self, node_id: int) -> tuple[str, int]:
        return self.config.public_host, self.state.brokers[node_id].port

    def notify_append(self) -> None:
        if self._appended is not None:
            self._appended.set()
            self._appended = None

    async def wait_for_append(self, timeout: float) -> None:
        if self._appended is None:
            self._appended = asyncio.Event()
        event = self._appended
        # asyncio.timeout, not wait_for: 3.11's wait_for can lose a cancel that arrives as
        # the event is set, and a broker being stopped then waits forever for this task
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()

    def auto_create(self, name: str) -> Topic | None:
        """Create `name` with the default layout if auto-creation is on."""
        if not self.config.auto_create_topics or name in self.state.topics:
            return self.state.topics.get(name)
        rf = min(self.config.default_replication_factor, len(self.state.brokers))
        return self.state.create_topic(name, self.config.default_partitions, rf)

    def default_replication_factor(self) -> int:
        return min(self.config.default_replication_factor, len(self.state.brokers))

    def new_producer_id(self) -> int:
        pid = self.next_producer_id
        self.next_producer_id += 1
        return pid
