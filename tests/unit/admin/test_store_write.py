"""proxy.admin.store writing and checking the config topic, with fake aiokafka clients.

Invariants under test: a write is retried while the leadership moves and applied only
once acknowledged; a write that cannot be made raises a StoreError naming the partition,
its ISR and leader, is counted by reason, and leaves the value as it was (never a
success for a value not stored); an old topic's min.insync.replicas is set to 1 by the
proxy unless it is read-only, and what it cannot fix is kept in ``problems`` (shown in
/readyz while the proxy stays ready).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError, NotEnoughReplicasError
from aiokafka.protocol.metadata import MetadataResponse_v5
from prometheus_client import CollectorRegistry

from proxy.admin import topic_check
from proxy.admin.service import AdminConfigs
from proxy.admin.state import Change, Resource, StoredValue
from proxy.admin.store import ConfigTopicStore, StoreError, StoreSettings
from proxy.admin.topic_layout import PartitionLayout
from proxy.cluster.view import ClusterView, ClusterViewStore
from proxy.ops.health import Health
from proxy.settings import load_settings
from tests.unit._views import Clock, broker, snap
from tests.unit.admin.no_cluster import NoCluster

T = "__rackguard_configs"
SIX = (broker(1, "rack-a"), broker(2, "rack-b"), broker(3, "rack-c"),
       broker(4, "rack-a"), broker(5, "rack-b"), broker(6, "rack-c"))


def view(brokers: tuple[Any, ...] = SIX) -> ClusterView:
    views = ClusterViewStore(Clock())
    views.apply_metadata(snap([], SIX), True)  # every rack seen once
    return views.apply_metadata(snap([], brokers), True)


class FakeNode:
    def __init__(self, node_id: int) -> None:
        self.nodeId = node_id


class FakeClient:
    """The producer's client: answers Metadata for the config topic."""

    def __init__(self, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> None:
        self.answer = MetadataResponse_v5(0, [(1, "h", 1, None)], "c", 1, [
            (0, T, False, [(0, 0, leader, list(replicas), list(isr), [])])])

    def cluster_brokers(self) -> list[FakeNode]:
        return [FakeNode(1)]

    @property
    def cluster(self) -> Any:
        client = self

        class Cluster:
            def brokers(self) -> list[FakeNode]:
                return client.cluster_brokers()
        return Cluster()

    async def send(self, node: int, request: Any) -> Any:
        return self.answer


class FakeProducer:
    def __init__(self, outcomes: list[BaseException | int], client: FakeClient) -> None:
        self.outcomes = outcomes
        self.client = client
        self.sent = 0
        self.stopped = 0

    async def stop(self) -> None:
        self.stopped += 1

    async def send_and_wait(self, topic: str, value: Any, key: Any, headers: Any) -> Any:
        self.sent += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome

        class Metadata:
            offset = outcome
        return Metadata()


def make_store(producer: FakeProducer, the_view: ClusterView,
               reasons: list[str], read_only: bool = False) -> ConfigTopicStore:
    s = ConfigTopicStore(
        StoreSettings(T, ("b1:9092",), 1.0, retry_backoff_s=0.01, write_budget_s=1.0,
                      fix_settings=not read_only),
        lambda: the_view, NoCluster(), lambda old, new, change: None, lambda: None,
        on_write_failure=reasons.append)
    s._producer = producer  # type: ignore[assignment]

    async def started() -> FakeProducer:  # the same fake again after a restart
        s._producer = producer  # type: ignore[assignment]
        return producer

    s._started_producer = started  # type: ignore[assignment, method-assign]
    return s


def change(n: int) -> Change:
    return Change(Resource("orders"), StoredValue(n, 1.0, "adm@h:1"))


def test_a_write_is_retried_while_the_leadership_moves_then_applied() -> None:
    producer = FakeProducer([KafkaTimeoutError(), KafkaTimeoutError(), 7],
                            FakeClient(1, (1, 2, 3), (1,)))
    reasons: list[str] = []
    s = make_store(producer, view(), reasons)
    asyncio.run(s.write(change(1)))
    assert producer.sent == 3 and reasons == []
    assert producer.stopped == 2  # started afresh after each failed attempt
    assert s.state.get(Resource("orders")) == change(1).value


def test_a_write_that_cannot_be_made_says_why_counts_it_and_stores_nothing() -> None:
    # racks b and c down: the ISR is broker 1 alone, the old topic wants 2 in sync
    producer = FakeProducer([NotEnoughReplicasError()], FakeClient(1, (1, 2, 3), (1,)))
    reasons: list[str] = []
    s = make_store(producer, view((SIX[0], SIX[3])), reasons)
    s.health.min_isr = 2
    with pytest.raises(StoreError) as failed:
        asyncio.run(s.write(change(1)))
    text = str(failed.value)
    assert text.startswith(f"rackguard could not store the value in {T}: partition {T}-0")
    assert "ISR [1 (rack-a)]" in text and "replicas [1 (rack-a), 2 (rack-b), 3 (rack-c)]" in text
    assert "min.insync.replicas=2" in text and "min.insync.replicas=1" in text
    assert reasons == ["not_enough_replicas"] and producer.sent == 1
    assert s.state.get(Resource("orders")) is None

    leaderless = FakeProducer([KafkaTimeoutError()] * 50, FakeClient(-1, (1, 2, 3), (2,)))
    s = make_store(leaderless, view((SIX[0], SIX[3])), reasons)
    with pytest.raises(StoreError) as failed:
        asyncio.run(s.write(change(1)))
    assert "has no leader" in str(failed.value) and "2 (rack-b)" in str(failed.value)
    assert reasons[-1] == "no_leader" and s.state.get(Resource("orders")) is None


class FakeAdmin:
    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass


def checked(monkeypatch: pytest.MonkeyPatch, layout: PartitionLayout, refusal: str | None,
            read_only: bool = False) -> tuple[ConfigTopicStore, list[Mapping[str, str]]]:
    set_calls: list[Mapping[str, str]] = []

    async def read_layout(admin: Any, topic: str) -> PartitionLayout:
        return layout

    async def set_configs(admin: Any, topic: str, configs: Mapping[str, str]) -> str | None:
        set_calls.append(configs)
        return refusal

    monkeypatch.setattr(topic_check, "read_layout", read_layout)
    monkeypatch.setattr(topic_check, "set_configs", set_configs)
    s = make_store(FakeProducer([], FakeClient(1, (1,), (1,))), view(), [], read_only)
    s.health._admin = FakeAdmin  # type: ignore[assignment]
    asyncio.run(s.health.check_once())
    return s, set_calls


def test_an_old_topic_is_fixed_by_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    s, calls = checked(monkeypatch, PartitionLayout(1, (1, 2, 3), (1, 2, 3), 2), None)
    assert calls == [{"min.insync.replicas": "1"}]
    assert s.health.problems == () and s.health.min_isr == 1


def test_an_old_topic_the_proxy_may_not_fix_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    s, calls = checked(monkeypatch, PartitionLayout(1, (1, 2, 3), (1, 2, 3), 2),
                       "error 29: Cluster authorization failed")
    assert len(calls) == 1 and len(s.health.problems) == 1
    assert "could not set it: error 29" in s.health.problems[0]
    s, calls = checked(monkeypatch, PartitionLayout(1, (1, 2, 3), (1, 2, 3), 2), None, True)
    assert calls == [] and "read-only" in s.health.problems[0]
    s, calls = checked(monkeypatch, PartitionLayout(1, (1, 4), (1, 4), 1), None)
    assert calls == [] and "none in rack-b, rack-c" in s.health.problems[0]

    settings = load_settings({"upstream": "127.0.0.1:9"}, env={})
    admin = AdminConfigs(settings, CollectorRegistry(), view, lambda: None,  # type: ignore
                         lambda: None, NoCluster())
    assert admin.store is not None
    admin.store.caught_up = True
    admin.store.health.problems = s.health.problems
    shown = admin.health(Health(True, "ready: metadata 0.1 s old"))
    assert shown.ok and "none in rack-b, rack-c" in shown.reason
