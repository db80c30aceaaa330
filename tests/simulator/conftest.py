"""Fixtures for the simulator tests (a TEST DOUBLE's own tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from simulator import SimulatedCluster, ThreadedCluster, TopicSpec, start_cluster
from tests.simulator.helpers import six_broker_config


@pytest.fixture
async def cluster() -> AsyncIterator[SimulatedCluster]:
    """Six brokers in three racks on this test's loop, topic `t` (3 partitions, RF 3)."""
    c = await start_cluster(six_broker_config(TopicSpec("t", 3, 3)))
    try:
        yield c
    finally:
        await c.stop()


@pytest.fixture
def threaded() -> Iterator[ThreadedCluster]:
    """The same cluster on a background loop, for blocking clients."""
    with ThreadedCluster(six_broker_config(TopicSpec("t", 3, 3))) as c:
        yield c
