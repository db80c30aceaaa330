"""The assembled proxy with view_scope "watched" (the default) against the simulator.

Invariants under test: the view holds the topics the proxy's clients use, not the
cluster's; a produce to a topic never seen is looked up (one refresh) and decided on
it (a one-rack ISR is refused, not passed); a named Metadata request makes its topics
join, one for every topic does not; view_scope "cluster" holds every topic.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kafka.protocol.metadata import MetadataRequest

from tests.component.conftest import RawClient, free_port_block
from tests.component.test_enforcement_app import Rig, answers, one_rack_isr, produce, sample


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = Rig(free_port_block(60))
    yield r
    await r.close()


def metadata_request(topics: list[str] | None, corr: int) -> bytes:
    request = MetadataRequest(version=12, topics=None if topics is None else [
        MetadataRequest.MetadataRequestTopic(topic_id=None, name=t) for t in topics],
        allow_auto_topic_creation=False)
    request.with_header(correlation_id=corr, client_id="t")
    return bytes(request.encode(header=True, framed=True))


async def test_the_view_holds_what_clients_use_and_a_new_topic_is_looked_up(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    for i in range(5):
        await cluster.create_topic(f"other-{i}", 3, 3, {})
    await cluster.create_topic("late", 1, 5, {"min.insync.replicas": "2"})
    await one_rack_isr(cluster, "late", 0)
    app = rig.app()
    await app.start()
    await app.poller.refresh_now()  # the poller's first loop has run; listeners are open
    assert dict(app.store.view.topics) == {} and app.store.view.brokers

    client = await rig.client_for("late", 0)
    client.send(produce("late", [0], 5))  # never seen: looked up, then decided
    code, message = answers(await client.recv())[0]
    assert code == 19 and message is not None and message.startswith("NOT_ENOUGH_RACKS")
    assert cluster.records("late", 0) == []
    assert sample(app, "rackguard_unknown_partition_refreshes_total", {}) == 1
    assert app.watched is not None and app.watched.names() == {"late"}
    assert set(app.store.view.topics) == {"late"}

    client.send(produce("late", [0], 6))  # known now: no further lookup
    assert answers(await client.recv())[0][0] == 19
    assert sample(app, "rackguard_unknown_partition_refreshes_total", {}) == 1


async def test_named_metadata_requests_join_and_every_topic_requests_do_not(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    await cluster.create_topic("mix", 2, 3, {})
    app = rig.app()
    await app.start()
    client = await RawClient.connect(rig.base + 20)  # the bootstrap port
    rig.clients.append(client)
    client.send(metadata_request(None, 1))
    await client.recv()
    await app.poller.refresh_now()
    assert app.watched is not None and app.watched.names() == frozenset()
    assert dict(app.store.view.topics) == {}  # the answer for every topic added none

    client.send(metadata_request(["mix"], 2))
    await client.recv()
    assert app.watched.names() == {"mix"}
    await app.poller.refresh_now()
    assert set(app.store.view.topics) == {"mix"}
    assert b"rackguard_placement_leaders" not in app.metrics_text()  # whole-cluster figures: off


async def test_cluster_scope_holds_every_topic(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    await cluster.create_topic("mix", 2, 3, {})
    app = rig.app(view_scope="cluster")
    await app.start()
    assert app.watched is None
    assert set(app.store.view.topics) >= {"orders", "mix"}
    assert b"rackguard_placement_leaders" in app.metrics_text()
