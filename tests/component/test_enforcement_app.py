"""The assembled proxy (in-process) with the rack rule, against the simulator.

Requests are raw Produce frames on a socket to the leader's proxy port, so
what is checked is the proxy's answer itself, not a client's retry logic.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kafka.protocol.producer import ProduceResponse

from benchmarks.produce_frames import kp_request, make_batch
from proxy.app import Rackguard, StartupError
from proxy.cluster.poller import PollError
from proxy.settings import load_settings
from simulator.cluster import SimulatedCluster, start_cluster
from simulator.config import BrokerSpec, SimulatorConfig, TopicSpec, racked_brokers
from simulator.faults import Fault
from tests.component.conftest import RawClient, free_port_block

RACKS = ["rack-a", "rack-b", "rack-c"]
VERSION = 9


def produce(topic: str, partitions: list[int], corr: int) -> bytes:
    return kp_request(VERSION, [(topic, [(p, make_batch(1)) for p in partitions])],
                      acks=-1, correlation_id=corr)


def answers(frame: bytes) -> dict[int, tuple[int, str | None]]:
    resp = ProduceResponse.decode(frame, version=VERSION, header=True, framed=True)
    return {p.index: (p.error_code, p.error_message)
            for t in resp.responses for p in t.partition_responses}


def sample(app: Rackguard, name: str, labels: dict[str, str]) -> float:
    return app.metrics.registry.get_sample_value(name, labels) or 0.0


class SteppedClock:
    """The monotonic clock plus time a test skips ahead (view ages without sleeping)."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skipped

    def advance(self, seconds: float) -> None:
        self.skipped += seconds


class Rig:
    def __init__(self, base: int) -> None:
        self.base = base
        self.cluster: SimulatedCluster | None = None
        self.apps: list[Rackguard] = []
        self.clients: list[RawClient] = []

    async def start_cluster(self, brokers: list[BrokerSpec] | None = None) -> SimulatedCluster:
        config = SimulatorConfig(
            brokers=brokers or racked_brokers(6, RACKS, port_base=self.base),
            topics=[TopicSpec("orders", 3, 5, {"min.insync.replicas": "2"})],
        )
        self.cluster = await start_cluster(config)
        return self.cluster

    def app(self, clock: Callable[[], float] = time.monotonic, **overrides: Any) -> Rackguard:
        assert self.cluster is not None
        settings = load_settings({
            "upstream": self.cluster.bootstrap_servers,
            "bootstrap_port": self.base + 20,
            "broker_port_base": self.base + 20,
            "min_insync_racks": 2,
            "metadata_refresh_interval_ms": 60_000,  # tests refresh explicitly
            "config_topic": "",  # the config topic's own tests turn it on
            **overrides,
        })
        app = Rackguard(settings, clock=clock)
        self.apps.append(app)
        return app

    async def client_for(self, topic: str, partition: int) -> RawClient:
        assert self.cluster is not None
        leader = self.cluster.partition(topic, partition).leader
        client = await RawClient.connect(self.base + 20 + leader)
        self.clients.append(client)
        return client

    async def close(self) -> None:
        for client in self.clients:
            client.close()
        for app in self.apps:
            await app.stop()
        if self.cluster is not None:
            await self.cluster.stop()


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = Rig(free_port_block(60))
    yield r
    await r.close()


async def one_rack_isr(cluster: SimulatedCluster, topic: str, partition: int) -> list[int]:
    """Shrink the ISR to the leader and another broker of the leader's rack."""
    leader = cluster.partition(topic, partition).leader
    rack = RACKS[(leader - 1) % 3]
    same = [n for n in cluster.partition(topic, partition).replicas
            if n != leader and RACKS[(n - 1) % 3] == rack]
    isr = [leader, *same[:1]]
    await cluster.set_isr(topic, partition, isr)
    return isr


async def test_mixed_request_is_split_and_merged(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    # both partitions led by broker 1 (rack-a), so one request carries both
    await cluster.create_topic("mix", 2, 5, {"min.insync.replicas": "2"},
                               assignment=[[1, 2, 3, 4, 5], [1, 4, 2, 3, 5]])
    await cluster.set_isr("mix", 1, [1, 4])  # brokers 1 and 4 are both in rack-a
    app = rig.app()
    await app.start()
    client = await rig.client_for("mix", 0)
    client.send(produce("mix", [0, 1], 1))
    got = answers(await client.recv())
    assert got[0] == (0, None)
    assert got[1][0] == 19 and got[1][1] is not None
    assert got[1][1].startswith("NOT_ENOUGH_RACKS: mix-1: in-sync replicas [1, 4] span 1 rack")
    assert len(cluster.records("mix", 0)) == 1
    assert cluster.records("mix", 1) == []
    assert sample(app, "rackguard_produce_partitions_total",
                  {"topic": "mix", "decision": "rejected", "reason": "NOT_ENOUGH_RACKS"}) == 1
    assert sample(app, "rackguard_produce_partitions_total",
                  {"topic": "mix", "decision": "forwarded", "reason": ""}) == 1


async def test_unknown_topic_waits_for_a_refresh_instead_of_passing(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    app = rig.app()
    await app.start()
    await app.poller.refresh_now()  # the poller's first loop has run: no poll is due
    await cluster.create_topic("late", 1, 5, {"min.insync.replicas": "2"})
    await one_rack_isr(cluster, "late", 0)
    client = await rig.client_for("late", 0)
    client.send(produce("late", [0], 5))  # the proxy has never seen "late"
    code, message = answers(await client.recv())[0]
    assert code == 19 and message is not None and message.startswith("NOT_ENOUGH_RACKS")
    assert cluster.records("late", 0) == []
    assert sample(app, "rackguard_unknown_partition_refreshes_total", {}) == 1


async def test_stale_metadata_fails_closed_and_fail_open_forwards(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    # short timeouts: two failed attempts fit in the 300 ms age bound
    quick = {"max_metadata_age_ms": 300, "admin_connect_timeout_ms": 50,
             "admin_request_timeout_ms": 100, "metadata_hedge_delay_ms": 20}
    clock = SteppedClock()
    closed = rig.app(clock, **quick)
    await closed.start()
    # the proxy is cut off from every broker (its own requests hang); clients are not
    for node in range(1, 7):
        await cluster.fault_broker(node, Fault("partition-proxy"))
    with pytest.raises(PollError, match="no broker answered"):
        await closed.poller.poll_once()
    clock.advance(0.4)  # past the 300 ms age bound
    client = await rig.client_for("orders", 0)
    client.send(produce("orders", [0], 7))
    code, message = answers(await client.recv())[0]
    assert code == 19 and message is not None and message.startswith("METADATA_STALE")
    assert cluster.records("orders", 0) == []
    await closed.stop()

    rig.base += 200  # a second proxy on other ports, failing open
    for node in range(1, 7):
        await cluster.fault_broker(node, None)
    opened = rig.app(clock, **quick, fail_open=True)
    await opened.start()
    for node in range(1, 7):
        await cluster.fault_broker(node, Fault("partition-proxy"))
    clock.advance(0.4)
    client = await rig.client_for("orders", 0)
    client.send(produce("orders", [0], 8))
    assert answers(await client.recv())[0] == (0, None)
    assert len(cluster.records("orders", 0)) == 1


async def test_observe_mode_forwards_and_counts(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    app = rig.app(observe=True)
    await app.start()
    await one_rack_isr(cluster, "orders", 0)
    await app.poller.refresh_now()
    client = await rig.client_for("orders", 0)
    client.send(produce("orders", [0], 3))
    assert answers(await client.recv())[0] == (0, None)
    assert len(cluster.records("orders", 0)) == 1
    assert sample(app, "rackguard_produce_partitions_total",
                  {"topic": "orders", "decision": "observed_reject",
                   "reason": "NOT_ENOUGH_RACKS"}) == 1


async def test_rackless_broker_refuses_start_unless_observing(rig: Rig) -> None:
    brokers = racked_brokers(6, RACKS, port_base=rig.base)
    brokers[5] = BrokerSpec(6, None, brokers[5].port)
    await rig.start_cluster(brokers)
    with pytest.raises(StartupError, match=r"broker\(s\) \[6\] have no rack"):
        await rig.app().start()
    rig.apps.pop()
    observing = rig.app(observe=True)
    await observing.start()  # only a warning in observe mode


async def test_reload_applies_without_dropping_and_refuses_impossible(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    app = rig.app(min_insync_racks=1)
    await app.start()
    await one_rack_isr(cluster, "orders", 0)
    await app.poller.refresh_now()
    client = await rig.client_for("orders", 0)
    client.send(produce("orders", [0], 1))
    assert answers(await client.recv())[0] == (0, None)
    settings: Callable[..., Any] = lambda **kw: load_settings(  # noqa: E731
        {**app.settings.model_dump(), **kw})
    assert app.reload(settings(min_insync_racks=2))
    client.send(produce("orders", [0], 2))  # same connection
    assert answers(await client.recv())[0][0] == 19
    assert app.reload(settings(min_insync_racks=1))
    client.send(produce("orders", [0], 3))
    assert answers(await client.recv())[0] == (0, None)


async def test_reload_that_cannot_hold_is_refused(rig: Rig) -> None:
    brokers = racked_brokers(6, RACKS, port_base=rig.base)
    brokers[5] = BrokerSpec(6, None, brokers[5].port)
    await rig.start_cluster(brokers)
    app = rig.app(min_insync_racks=1)
    await app.start()
    before = app.enforcer.settings
    new = load_settings({**app.settings.model_dump(), "min_insync_racks": 2})
    assert app.reload(new) is False
    assert app.enforcer.settings is before
