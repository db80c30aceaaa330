"""The proxy's view stays fresh while a rack is dead, hung, blackholed or cut off from the
proxy alone, whether the bootstrap servers are inside that rack or outside it.

Against the simulator (simulator/faults.py): rack-a fails while the proxy refreshes every
500 ms; sampled every 50 ms, the view's age stays within twice the refresh interval,
/readyz's verdict stays ready, and acks=all produces to partitions whose ISR still spans
two racks are accepted (no METADATA_STALE). The real-Kafka version (a frozen rack) is
tests/system/test_zone_hang_real_kafka.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from simulator.faults import Fault
from tests.component.conftest import free_port_block
from tests.component.test_enforcement_app import Rig, answers, produce

INTERVAL_S = 0.5
FAULT_S = 2.0  # four refresh intervals: a poller stuck on the hung rack shows at once
MODES = ("kill", "hang", "blackhole", "partition-proxy")


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = Rig(free_port_block(60))
    yield r
    await r.close()


@pytest.mark.parametrize("bootstrap_rack", ["rack-a", "rack-b"])
@pytest.mark.parametrize("mode", MODES)
async def test_view_stays_fresh_while_a_rack_fails(rig: Rig, mode: str,
                                                   bootstrap_rack: str) -> None:
    cluster = await rig.start_cluster()
    nodes = cluster.core.state.brokers_in_rack(bootstrap_rack)
    app = rig.app(upstream=",".join(f"127.0.0.1:{cluster.port_of(n)}" for n in nodes),
                  metadata_refresh_interval_ms=int(INTERVAL_S * 1000),
                  max_metadata_age_ms=3000, admin_connect_timeout_ms=300,
                  admin_request_timeout_ms=600, metadata_hedge_delay_ms=100)
    await app.start()
    every = set(range(1, 7))
    for _ in range(500):  # a poll or two: the proxy knows every broker
        if set(app.store.view.brokers) == every:
            break
        await asyncio.sleep(0.01)
    assert set(app.store.view.brokers) == every
    if mode == "kill":
        await cluster.kill_rack("rack-a")
    else:
        await cluster.fault_rack("rack-a", Fault(mode))
    # a hung broker stays in the ISR until the cluster drops it; do that, as Kafka would
    for p in range(3):
        part = cluster.partition("orders", p)
        await cluster.set_isr("orders", p, [n for n in part.isr if n not in (1, 4)])
    worst, not_ready = 0.0, []
    end = time.monotonic() + FAULT_S
    while time.monotonic() < end:
        worst = max(worst, app.store.view.age(app.clock()))
        health = app.readiness()
        if not health.ok:
            not_ready.append(health.reason)
        await asyncio.sleep(0.05)
    assert worst <= 2 * INTERVAL_S, f"view aged to {worst:.2f} s"
    assert not_ready == []
    # partitions led outside rack-a, ISR over rack-b and rack-c: accepted
    for p in range(3):
        if cluster.partition("orders", p).leader in (1, 4):
            continue
        client = await rig.client_for("orders", p)
        client.send(produce("orders", [p], 40 + p))
        assert answers(await client.recv())[p] == (0, None)
    up = {c.node_id: ok for c, ok in app.poller.upstreams.states().items()}
    assert all(up[n] for n in (2, 3, 5, 6))
