"""The simulator's network faults (simulator/faults.py), seen from a raw socket.

Invariants under test: hang reads and never answers; slow answers late; partition-proxy
silences only the proxy's own client id; blackhole accepts nothing (connects time out,
none is refused); each heals on the same port; kill refuses.
"""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from simulator.cluster import start_cluster
from simulator.config import SimulatorConfig, racked_brokers
from simulator.faults import PROXY_CLIENT_ID, Fault
from tests.component.conftest import free_port_block


def api_versions(client_id: bytes) -> bytes:
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


async def ask(port: int, client_id: bytes = b"app", timeout: float = 0.5) -> float | None:
    """Seconds until an ApiVersions answer, or None when none came within ``timeout``."""
    began = time.monotonic()
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(api_versions(client_id))
        try:
            async with asyncio.timeout(timeout):
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                await reader.readexactly(size)
        except TimeoutError:
            return None
        return time.monotonic() - began
    finally:
        writer.close()


@pytest.fixture
async def cluster():  # type: ignore[no-untyped-def]
    c = await start_cluster(SimulatorConfig(
        brokers=racked_brokers(3, ["rack-a", "rack-b", "rack-c"],
                               port_base=free_port_block(10))))
    yield c
    await c.stop()


async def test_hang_slow_and_partition_proxy(cluster) -> None:  # type: ignore[no-untyped-def]
    port = cluster.port_of(1)
    assert await ask(port) is not None
    await cluster.fault_broker(1, Fault("hang"))
    assert await ask(port) is None
    await cluster.fault_broker(1, Fault("slow", delay_s=0.3))
    late = await ask(port, timeout=2)
    assert late is not None and late >= 0.3
    await cluster.fault_broker(1, Fault("partition-proxy"))
    assert await ask(port) is not None  # clients still get through
    assert await ask(port, PROXY_CLIENT_ID) is None  # the proxy's own requests do not
    await cluster.fault_broker(1, None)
    assert await ask(port, PROXY_CLIENT_ID) is not None


async def test_blackhole_accepts_nothing_then_heals(cluster) -> None:  # type: ignore[no-untyped-def]
    port = cluster.port_of(2)
    await cluster.fault_rack("rack-b", Fault("blackhole"))
    outcomes = []
    for _ in range(3):  # the backlog takes what it can; nothing is answered or refused
        try:
            outcomes.append(await ask(port, timeout=0.3))
        except TimeoutError:
            outcomes.append("connect timed out")
    assert all(o in (None, "connect timed out") for o in outcomes), outcomes
    await cluster.fault_rack("rack-b", None)
    assert await ask(port) is not None


async def test_kill_refuses(cluster) -> None:  # type: ignore[no-untyped-def]
    await cluster.kill_broker(3)
    with pytest.raises(OSError):
        await ask(cluster.port_of(3))
    with pytest.raises(ValueError, match="unknown fault"):
        Fault("melt")
