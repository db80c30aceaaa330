"""The operations endpoint of the assembled proxy, scraped over HTTP during a rack outage.

The simulator (six brokers, racks a/b/c round-robin) and Rackguard run in
this process; /metrics, /healthz and /readyz are read with urllib from a
thread, as Prometheus and a container runtime would. The proxy's poller is
given broker 1 (rack-a) as its only upstream, so a rack-b + rack-c outage
leaves it polling, and killing broker 1 afterwards makes its metadata stale.
"""

from __future__ import annotations

import asyncio
import socket
import urllib.error
import urllib.request
from collections.abc import AsyncIterator

import pytest

from proxy.app import Rackguard
from simulator.faults import Fault
from tests.component.conftest import free_port_block
from tests.component.test_enforcement_app import Rig, SteppedClock, answers, produce
from tests.prometheus_text import Samples, parse_samples, sample, total


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = Rig(free_port_block(60))
    yield r
    await r.close()


async def get(app: Rackguard, path: str) -> tuple[int, str]:
    def fetch() -> tuple[int, str]:
        url = f"http://127.0.0.1:{app.metrics_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
    return await asyncio.to_thread(fetch)


async def scrape(app: Rackguard) -> Samples:
    status, text = await get(app, "/metrics")
    assert status == 200
    return parse_samples(text)


REJECTED = {"topic": "orders", "decision": "rejected", "reason": "NOT_ENOUGH_RACKS"}


async def test_outage_shows_in_metrics_and_staleness_in_readyz(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    clock = SteppedClock()
    # whole-cluster coverage figures: view_scope "cluster" (a sidecar's covers its topics)
    app = rig.app(clock, view_scope="cluster", upstream=f"127.0.0.1:{cluster.port_of(1)}",
                  metrics_port=0,
                  max_metadata_age_ms=400, admin_connect_timeout_ms=50,
                  admin_request_timeout_ms=100, metadata_hedge_delay_ms=20)
    await app.start()

    assert await get(app, "/healthz") == (200, "alive\n")
    status, reason = await get(app, "/readyz")
    assert status == 200 and reason.startswith("ready: metadata")
    healthy = await scrape(app)
    assert total(healthy, "rackguard_under_min_rack_isr_partitions") == 0
    assert sample(healthy, "rackguard_under_min_rack_isr_partitions", broker="6") == 0
    assert sample(healthy, "rackguard_rack_checked_partitions") == 3
    assert not any(n == "rackguard_under_min_rack_isr" for n, _ in healthy)
    assert (sample(healthy, "rackguard_produce_partitions_total", **REJECTED) or 0) == 0

    # rack-b and rack-c go: every ISR shrinks to [1, 4], both in rack-a
    await cluster.kill_rack("rack-b")
    await cluster.kill_rack("rack-c")
    assert await app.poller.refresh_now()
    client = await rig.client_for("orders", 0)
    client.send(produce("orders", [0], 1))
    code, message = answers(await client.recv())[0]
    assert code == 19 and message is not None and message.startswith("NOT_ENOUGH_RACKS")

    during = await scrape(app)
    for p in ("0", "1", "2"):
        assert sample(during, "rackguard_under_min_rack_isr", topic="orders", partition=p) == 1
        assert sample(during, "rackguard_at_min_rack_isr", topic="orders", partition=p) == 0
        assert sample(during, "rackguard_isr_rack_count", topic="orders", partition=p) == 1
    leaders = {str(cluster.partition("orders", p).leader) for p in range(3)}
    assert leaders <= {"1", "4"}
    assert total(during, "rackguard_under_min_rack_isr_partitions") == 3
    for leader in leaders:
        assert (sample(during, "rackguard_under_min_rack_isr_partitions", broker=leader) or 0) >= 1
    assert sample(during, "rackguard_produce_partitions_total", **REJECTED) == 1
    assert (await get(app, "/readyz"))[0] == 200  # the poller still reaches broker 1

    # one rack back: ISRs span two racks, exactly the minimum
    await cluster.restore_rack("rack-b")
    assert await app.poller.refresh_now()
    back = await scrape(app)
    assert total(back, "rackguard_under_min_rack_isr_partitions") == 0
    assert total(back, "rackguard_at_min_rack_isr_partitions") == 3
    assert sample(back, "rackguard_at_min_rack_isr", topic="orders", partition="0") == 1
    assert sample(back, "rackguard_under_min_rack_isr", topic="orders", partition="0") == 0
    client.send(produce("orders", [0], 2))
    assert answers(await client.recv())[0] == (0, None)

    # its bootstrap server goes: the poller asks the other brokers it knows
    await cluster.kill_broker(1)
    assert await app.poller.refresh_now() is True
    assert (await get(app, "/readyz"))[0] == 200
    after = await scrape(app)
    assert sample(after, "rackguard_upstream_broker_up", broker="1", rack="rack-a") == 0
    assert sample(after, "rackguard_upstream_broker_up", broker="2", rack="rack-b") == 1

    # the proxy is cut off from every broker: the view goes stale, readiness goes with it
    for node in (2, 4, 5):
        await cluster.fault_broker(node, Fault("partition-proxy"))
    assert await app.poller.refresh_now() is False
    clock.advance(0.5)  # past the 400 ms age bound
    status, reason = await get(app, "/readyz")
    assert status == 503
    assert reason.startswith("upstream unreachable: last metadata poll failed")
    assert reason.count("\n") == 1
    stale = await scrape(app)
    age = sample(stale, "rackguard_metadata_age_seconds")
    assert age is not None and age > 0.4
    assert await get(app, "/healthz") == (200, "alive\n")  # alive, just not ready


async def test_not_ready_before_any_metadata_and_unknown_paths(rig: Rig) -> None:
    await rig.start_cluster()
    with socket.socket() as dead:  # bound, never listening: connections are refused
        dead.bind(("127.0.0.1", 0))
        app = rig.app(upstream=f"127.0.0.1:{dead.getsockname()[1]}", metrics_port=0,
                      connect_timeout_ms=200)
        await app.start()
    status, reason = await get(app, "/readyz")
    assert status == 503 and "upstream unreachable" in reason
    status, _ = await get(app, "/nope")
    assert status == 404
    samples = await scrape(app)
    assert sample(samples, "rackguard_metadata_age_seconds") == float("inf")
    assert sample(samples, "rackguard_rack_checked_partitions") == 0


async def test_partition_series_all_exports_healthy_partitions(rig: Rig) -> None:
    await rig.start_cluster()
    app = rig.app(metrics_port=0, view_scope="cluster", metrics_partition_series="all")
    await app.start()
    samples = await scrape(app)
    for p in ("0", "1", "2"):
        assert sample(samples, "rackguard_isr_rack_count", topic="orders", partition=p) == 3
        assert sample(samples, "rackguard_under_min_rack_isr", topic="orders", partition=p) == 0


async def test_readyz_answers_not_ready_while_draining(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    app = rig.app(upstream=f"127.0.0.1:{cluster.port_of(1)}", metrics_port=0)
    await app.start()
    assert app.readiness().ok
    stopping = asyncio.ensure_future(app.stop())
    await asyncio.sleep(0)  # the drain has begun: SIGTERM's first effect
    health = app.readiness()
    assert not health.ok and "draining" in health.reason
    assert await stopping == "clean"
    assert app.metrics.registry.get_sample_value("rackguard_drain_total",
                                                 {"result": "clean"}) == 1
