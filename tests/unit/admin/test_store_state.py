"""proxy.admin.store without a cluster, and the readiness it gives /readyz.

Invariants under test: records apply in offset order per key (our own acknowledged
write is not undone by an older record read later); ``on_change`` sees the old and the
new state only when a value changed; silence from the config topic beyond the bound is
one counted failure, shown until reading resumes; /readyz is not ready until the topic
was read to its end, and shows a later failure while staying ready.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import proxy.admin.store as store_module
from proxy.admin.service import AdminConfigs
from proxy.admin.state import Change, DynamicConfigs, Resource, StoredValue
from proxy.admin.store import (
    FETCH_WAIT_S,
    READ_WAKE_S,
    SHORT_WAIT_S,
    ConfigTopicStore,
    StoreSettings,
)
from proxy.cluster.view import Broker, ClusterView
from proxy.ops.health import Health
from proxy.settings import load_settings


def store(changes: list[tuple[DynamicConfigs, DynamicConfigs, Change]],
          failures: list[int]) -> ConfigTopicStore:
    return ConfigTopicStore(StoreSettings("t", ("b:1",), 1.0), ClusterView,
                            lambda old, new, change: changes.append((old, new, change)),
                            lambda: failures.append(1))


def value(n: int) -> StoredValue:
    return StoredValue(n, 1.0, "c")


def test_records_apply_in_offset_order_and_changes_are_reported_once() -> None:
    seen: list[tuple[DynamicConfigs, DynamicConfigs, Change]] = []
    s = store(seen, [])
    orders = Resource("orders")
    s._apply(Change(orders, value(1)), 10)  # our own write, acknowledged at offset 10
    s._apply(Change(orders, value(2)), 7)  # an older record read later: skipped
    assert s.state.get(orders) == value(1)
    s._apply(Change(orders, value(1)), 10)  # the same record read back: no change
    s._apply(Change(orders, None, "adm"), 11)
    assert s.state.get(orders) is None
    assert [(old.get(orders), new.get(orders)) for old, new, _ in seen] == [
        (None, value(1)), (value(1), None)]


def test_silence_is_one_counted_failure_until_reading_resumes() -> None:
    failures: list[int] = []
    s = store([], failures)
    assert s._check_fresh(1.0) is False
    assert s._check_fresh(s._silence_limit_s) is False  # a long poll and a slow answer
    assert s.last_error is None
    assert s._check_fresh(s._silence_limit_s + 0.5) is True  # stale: started afresh
    assert s._check_fresh(s._silence_limit_s + 1.5) is True
    assert s.last_error is not None and "no answer" in s.last_error and failures == [1]
    s._check_fresh(0.1)
    assert s.last_error is None


def test_readiness_waits_for_the_config_topic() -> None:
    settings = load_settings({"upstream": "127.0.0.1:9"}, env={})
    admin = AdminConfigs(settings, CollectorRegistry(), lambda: None,  # type: ignore[arg-type]
                         lambda: None, lambda: None)  # type: ignore[arg-type, return-value]
    assert admin.store is not None
    base = Health(True, "ready: metadata 0.1 s old")
    waiting = admin.health(base)
    assert not waiting.ok and "not read to its end" in waiting.reason
    admin.store.caught_up = True
    assert admin.health(base) == base
    admin.store.last_error = "no answer from its leader for 9 s"
    shown = admin.health(base)
    assert shown.ok and "no answer from its leader" in shown.reason
    assert admin.health(Health(False, "no metadata")) == Health(False, "no metadata")
    off = AdminConfigs(load_settings({"upstream": "127.0.0.1:9", "config_topic": ""}, env={}),
                       CollectorRegistry(), lambda: None,  # type: ignore[arg-type]
                       lambda: None, lambda: None)  # type: ignore[arg-type, return-value]
    assert off.store is None and off.health(base) == base


class _LongPollConsumer:
    """An aiokafka consumer in front of a topic with ``end`` records: a fetch of nothing
    new is held for the whole wait (getmany answers nothing until its timeout)."""

    made: list[dict[str, Any]] = []
    answered_at: float | None = None  # the leader's last answer (None: now)

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.at = 0
        self.waits: list[float] = []
        self._client = self  # aiokafka's client
        self.cluster = self  # and its cluster metadata: leader_for_partition
        _LongPollConsumer.made.append(options)
        _LongPollConsumer.last = self

    def leader_for_partition(self, tp: Any) -> int:
        return 1


    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def assign(self, tps: list[Any]) -> None: ...
    def seek(self, tp: Any, offset: int) -> None:
        self.at = offset

    async def seek_to_beginning(self, tp: Any) -> None:
        self.at = 0

    async def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return {tps[0]: 0}

    async def position(self, tp: Any) -> int:
        return self.at

    async def getmany(self, tp: Any, timeout_ms: int, max_records: int) -> dict[Any, Any]:
        self.waits.append(timeout_ms / 1000)
        await asyncio.sleep(timeout_ms / 1000)
        return {}

    def last_poll_timestamp(self, tp: Any) -> int:
        at = time.time() if self.answered_at is None else self.answered_at
        return int(at * 1000)


def test_an_empty_config_topic_is_read_to_its_end_without_waiting_for_a_long_poll(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Readiness needs the topic read to its end once: an empty topic is at once, not
    when the first long poll comes back empty; the consumer's request timeout is the
    fetch wait plus the admin request timeout (a 600 ms timeout with a 1 s long poll
    timed out every fetch)."""
    monkeypatch.setattr(store_module, "AIOKafkaConsumer", _LongPollConsumer)
    s = ConfigTopicStore(StoreSettings("t", ("b:1",), 0.6), ClusterView,
                         lambda old, new, change: None, lambda: None)

    async def scenario() -> bool:
        s._topic_ready.set()  # the topic exists
        reading = asyncio.ensure_future(s._follow())
        try:
            return await s.wait_caught_up(0.5)  # well within one long poll
        finally:
            reading.cancel()

    assert asyncio.run(scenario()) is True and s.caught_up
    options = _LongPollConsumer.made[-1]
    assert options["fetch_max_wait_ms"] == int(FETCH_WAIT_S * 1000) >= 1000
    assert options["request_timeout_ms"] == options["fetch_max_wait_ms"] + 600


def test_a_leader_that_holds_no_long_poll_has_the_reader_start_afresh_with_short_polls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hung leader: a fetch it holds, or aiokafka's metadata update asking a hung broker,
    waits out the long request timeout while Kafka elects another leader. From the moment
    the long poll is overdue the reader starts afresh once, with short polls and the admin
    request timeout, bootstrapping from live brokers outside the silent leader's rack; once
    answered all along for SETTLE_S it goes back to long polls."""
    monkeypatch.setattr(store_module, "AIOKafkaConsumer", _LongPollConsumer)
    monkeypatch.setattr(store_module, "SETTLE_S", 0.6)
    racks = {1: "a", 2: "a", 3: "b", 4: "c"}
    view = ClusterView(brokers={n: Broker(n, f"k{n}", 9000 + n, r) for n, r in racks.items()},
                       racks=racks)
    s = ConfigTopicStore(StoreSettings("t", ("b:1",), 2.0), lambda: view,
                         lambda old, new, change: None, lambda: None)
    s.caught_up = True  # read to its end before: no ListOffsets to a leader that may hang
    made = _LongPollConsumer.made

    async def scenario() -> None:
        s._topic_ready.set()
        made.clear()
        _LongPollConsumer.answered_at = time.time() - 10  # silent for 10 s
        reading = asyncio.ensure_future(s._follow())
        await asyncio.sleep(READ_WAKE_S + 0.5)  # the reading loop looks every READ_WAKE_S
        assert len(made) == 2  # the long-poll reader, then one with short polls
        assert made[0]["fetch_max_wait_ms"] == int(FETCH_WAIT_S * 1000)
        assert made[1]["fetch_max_wait_ms"] == int(SHORT_WAIT_S * 1000)
        assert made[1]["request_timeout_ms"] == 2000
        assert set(made[1]["bootstrap_servers"][:2]) == {"k3:9003", "k4:9004"}  # not rack a
        _LongPollConsumer.answered_at = None  # the new leader answers
        await asyncio.sleep(1.5)  # answered SETTLE_S long: long polls again
        assert len(made) == 3 and made[2]["fetch_max_wait_ms"] == int(FETCH_WAIT_S * 1000)
        await asyncio.sleep(1.0)
        assert len(made) == 3
        reading.cancel()

    asyncio.run(scenario())


def test_after_a_silent_leader_the_reader_starts_from_live_brokers_outside_its_rack() -> None:
    """A reader restarted after its leader went silent bootstraps from the view's live
    brokers outside that leader's rack first (aiokafka tries them in order, waiting out a
    hung one), then the rest, then the configured list; before that, the configured."""
    racks = {1: "a", 2: "a", 3: "b", 4: "c"}
    view = ClusterView(brokers={n: Broker(n, f"k{n}", 9000 + n, r) for n, r in racks.items()},
                       racks=racks)
    s = ConfigTopicStore(StoreSettings("t", ("b:1",), 2.0), lambda: view,
                         lambda old, new, change: None, lambda: None)
    assert s._reader_bootstrap() == ["b:1"]
    s._silent_leader = (True, 2)
    order = s._reader_bootstrap()
    assert set(order[:2]) == {"k3:9003", "k4:9004"}
    assert set(order[2:4]) == {"k1:9001", "k2:9002"} and order[4:] == ["b:1"]
