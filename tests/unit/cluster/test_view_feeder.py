"""proxy.cluster.feeder: Metadata responses read and merged on a worker thread.

Invariant under test: the view the feeder installs is exactly the one
``ClusterViewStore.apply_metadata(read_metadata(frame))`` would have built on
the loop, for small responses and for large ones (which get the treatment
against loop stalls: short GIL switch interval, naps between chunks of work,
gradual release; the GC is never paused or frozen); whatever happens, success
or a malformed frame, the switch interval is back to what it was once the
replaced view has been released. Every update is built on the view
installed last: an update racing an absorb applies on top of it, and a view
installed directly while an update is being built is never overwritten (the
update is built again on top of it).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest
from kafka.protocol.metadata import MetadataResponse

from protocol.metadata import read_metadata
from protocol.primitives import ProtocolError
from proxy.cluster.feeder import (
    Pause,
    ViewFeeder,
    _release_gradually,
)
from proxy.cluster.pacing import Pacer
from proxy.cluster.view import ClusterView, ClusterViewStore
from tests.unit._views import Clock

_T = MetadataResponse.MetadataResponseTopic
_P = _T.MetadataResponsePartition
LARGE = 256 * 1024


def frame(topics: int, per_topic: int, first: int = 0, racks: int = 3) -> bytes:
    """A v12 response: 6 brokers; topics ``topic-{first}``... with varied replica sets."""
    brokers = [MetadataResponse.MetadataResponseBroker(
        node_id=n, host=f"b{n}.internal", port=9092, rack=f"rack-{n % racks}")
        for n in range(1, 7)]
    out = []
    for t in range(first, first + topics):
        parts = [_P(error_code=0, partition_index=p, leader_id=1 + p % 6, leader_epoch=t % 5,
                    replica_nodes=[1 + (p + i) % 6 for i in range(3)],
                    isr_nodes=[1 + (p + i) % 6 for i in range(1 + (p + t) % 3)],
                    offline_replicas=[1 + p % 6] if p % 7 == 0 else [])
                 for p in range(per_topic)]
        out.append(_T(error_code=0, name=f"topic-{t}", topic_id=uuid.UUID(int=t + 1),
                      is_internal=False, partitions=parts))
    resp = MetadataResponse(version=12, throttle_time_ms=0, brokers=brokers, cluster_id="c",
                            controller_id=1, topics=out)
    resp.with_header(correlation_id=1)
    return bytes(resp.encode(header=True, framed=True))


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    interval = sys.getswitchinterval()
    yield
    assert sys.getswitchinterval() == interval
    assert gc.isenabled() and gc.get_freeze_count() == 0


async def settled(feeder: ViewFeeder, interval: float) -> None:
    """Wait until the replaced view is released (the switch interval is restored then)."""
    for _ in range(500):
        if sys.getswitchinterval() == interval:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("switch interval never restored")


async def test_large_absorbs_build_the_same_views_as_the_store_on_the_loop() -> None:
    clock = Clock()
    fed, direct = ClusterViewStore(clock), ClusterViewStore(clock)
    feeder = ViewFeeder(fed)
    interval = sys.getswitchinterval()
    full = frame(400, 25)
    partial = frame(300, 25, first=250, racks=2)  # overlaps, adds, changes racks
    assert len(full) >= LARGE and len(partial) >= LARGE
    try:
        for data, is_full in ((full, True), (partial, False), (full, True)):
            clock.t += 1
            brokers = await feeder.absorb(data, 12, full=is_full)
            expected = direct.apply_metadata(read_metadata(data, 12), full=is_full)
            assert fed.view == expected
            assert fed.view.partition_count == expected.partition_count
            assert brokers == read_metadata(data, 12).brokers
            await settled(feeder, interval)
        assert gc.isenabled()
    finally:
        feeder.close()


async def test_a_large_absorb_of_an_unchanged_cluster_keeps_every_topic_object() -> None:
    """Topics are merged as they are read, and an unchanged one leaves nothing new behind
    (what keeps refreshes from bringing full collections forward)."""
    clock = Clock()
    store = ClusterViewStore(clock)
    feeder = ViewFeeder(store)
    interval = sys.getswitchinterval()
    data = frame(400, 25)
    try:
        await feeder.absorb(data, 12, full=True)
        before = store.view
        await settled(feeder, interval)
        clock.t += 1
        await feeder.absorb(data, 12, full=True)
        after = store.view
        assert after is not before and after.refreshed_at == clock.t
        assert all(after.topics[name] is topic for name, topic in before.topics.items())
        await settled(feeder, interval)
    finally:
        feeder.close()


async def test_small_absorb_builds_the_same_view() -> None:
    clock = Clock()
    fed, direct = ClusterViewStore(clock), ClusterViewStore(clock)
    feeder = ViewFeeder(fed)
    data = frame(3, 4)
    assert len(data) < LARGE
    try:
        await feeder.absorb(memoryview(data), 12, full=True)
        assert fed.view == direct.apply_metadata(read_metadata(data, 12), full=True)
    finally:
        feeder.close()


async def test_large_absorb_shortens_the_switch_interval_until_the_release() -> None:
    store = ClusterViewStore(Clock())
    feeder = ViewFeeder(store)
    interval = sys.getswitchinterval()
    seen: list[float] = []
    store.subscribe(lambda old, new: seen.append(sys.getswitchinterval()))
    try:
        await feeder.absorb(frame(400, 25), 12, full=True)
        assert seen and seen[0] < interval  # still short while the view is installed
        await settled(feeder, interval)
    finally:
        feeder.close()


async def test_malformed_large_frame_restores_interval_and_gc() -> None:
    store = ClusterViewStore(Clock())
    feeder = ViewFeeder(store)
    interval = sys.getswitchinterval()
    data = frame(400, 25)
    bad = (len(data) - 5).to_bytes(4, "big") + data[4:-1]  # one byte short
    try:
        with pytest.raises(ProtocolError):
            await feeder.absorb(bad, 12, full=True)
        assert sys.getswitchinterval() == interval
        assert gc.isenabled()
        assert store.view.partition_count == 0
    finally:
        feeder.close()


async def test_concurrent_large_absorbs_restore_the_interval_once_all_are_done() -> None:
    clock = Clock()
    store = ClusterViewStore(clock)
    feeder = ViewFeeder(store)
    interval = sys.getswitchinterval()
    first, second = frame(400, 25), frame(400, 25, first=1000)
    try:
        await asyncio.gather(feeder.absorb(first, 12, full=False),
                             feeder.absorb(second, 12, full=False))
        await settled(feeder, interval)
        assert store.view.partition_count == 2 * 400 * 25  # both merged, in order
    finally:
        feeder.close()


def test_pacer_naps_once_per_slice_of_work() -> None:
    clock = Clock(0.0)
    naps: list[float] = []
    pause = Pacer(work=0.001, nap=0.00005, clock=clock, sleep=naps.append)
    for t in (0.0002, 0.0009, 0.0010, 0.0011, 0.0019, 0.0021):
        clock.t = t
        pause()
    assert naps == [0.00005, 0.00005]  # at 1.0 ms, and at 2.1 ms (1.1 ms after that)


def test_gradual_release_empties_its_box_and_pauses() -> None:
    store = ClusterViewStore(Clock())
    view = store.build(read_metadata(frame(10, 300), 12), full=True)
    calls: list[int] = []
    box_v = [view]
    del view
    _release_gradually(box_v, lambda: calls.append(1))
    assert box_v == []
    # per topic gathered, and per 1,024 objects popped (10 topics, then 3,000 partitions)
    assert len(calls) == 10 + 1 + 3
    _release_gradually([ClusterView()], lambda: None)  # an empty view is fine too


def test_release_skips_the_partitions_the_replacing_view_shares() -> None:
    store = ClusterViewStore(Clock())
    old = store.apply_metadata(read_metadata(frame(10, 300), 12), full=True)
    new = store.with_min_insync_replicas({"topic-0": 2, "topic-1": 2})
    calls: list[int] = []
    box = [old]
    del old
    _release_gradually(box, lambda: calls.append(1), keep=new)
    # even the two replaced topic states share their partitions: only 10 topics popped
    assert box == [] and len(calls) == 1
    assert new.partition_count == 3000  # shared partitions are still alive


async def test_an_update_racing_an_absorb_applies_on_top_of_it() -> None:
    clock = Clock()
    store = ClusterViewStore(clock)
    feeder = ViewFeeder(store)
    values = {"topic-0": 2, "topic-3": 3}

    def configs(base: ClusterView, pause: Pause) -> ClusterView:
        return store.with_min_insync_replicas(values, pause, base)

    try:
        await feeder.absorb(frame(3, 4), 12, full=True)
        # asked for in this order while neither has run: each builds on the other's result
        absorbed = asyncio.ensure_future(feeder.absorb(frame(2, 4, first=3), 12, full=False))
        updated = asyncio.ensure_future(feeder.update(configs, large=False))
        await asyncio.gather(absorbed, updated)
        view = store.view
        assert updated.result() is view
        assert set(view.topics) == {f"topic-{i}" for i in range(5)}
        assert view.topics["topic-0"].min_insync_replicas == 2
        assert view.topics["topic-3"].min_insync_replicas == 3  # absorbed first, then set
        # and the other way round: a full refresh after the update keeps its values
        clock.t += 1
        await asyncio.gather(feeder.update(configs, large=False),
                             feeder.absorb(frame(5, 4), 12, full=True))
        assert store.view.topics["topic-3"].min_insync_replicas == 3
        assert store.view.refreshed_at == clock.t  # the full refresh was applied too
        assert store.view.age(clock.t, store.view.topics["topic-0"]) == 0
    finally:
        feeder.close()


async def test_a_view_installed_while_an_update_is_built_is_never_overwritten() -> None:
    store = ClusterViewStore(Clock())
    feeder = ViewFeeder(store)
    started, go = threading.Event(), threading.Event()
    bases: list[ClusterView] = []

    def configs(base: ClusterView, pause: Pause) -> ClusterView:
        bases.append(base)
        if len(bases) == 1:
            started.set()
            assert go.wait(5)
        return store.with_min_insync_replicas({"topic-0": 2}, pause, base)

    try:
        await feeder.absorb(frame(3, 4), 12, full=True)
        task = asyncio.ensure_future(feeder.update(configs, large=False))
        assert await asyncio.to_thread(started.wait, 5)
        # written on the loop while the update is being built on the previous view
        direct = store.apply_metadata(read_metadata(frame(1, 4, first=7), 12), full=False)
        go.set()
        view = await task
        assert [b is direct for b in bases] == [False, True]  # built again, on top
        assert view is store.view
        assert "topic-7" in view.topics and view.topics["topic-0"].min_insync_replicas == 2
    finally:
        go.set()
        feeder.close()


async def test_an_update_that_changes_nothing_installs_nothing() -> None:
    store = ClusterViewStore(Clock())
    feeder = ViewFeeder(store)
    seen: list[ClusterView] = []
    try:
        await feeder.absorb(frame(3, 4), 12, full=True)
        before = store.view
        store.subscribe(lambda old, new: seen.append(new))
        assert await feeder.update(lambda base, pause: base, large=False) is before
        assert store.view is before and seen == []
    finally:
        feeder.close()


async def test_large_update_and_run_are_paced_and_leave_the_gc_alone() -> None:
    store = ClusterViewStore(Clock())
    feeder = ViewFeeder(store)
    interval = sys.getswitchinterval()
    seen: list[tuple[object, float, bool]] = []

    def configs(base: ClusterView, pause: Pause) -> ClusterView:
        seen.append((pause, sys.getswitchinterval(), gc.isenabled()))
        return store.with_min_insync_replicas({"topic-1": 4}, pause, base)

    def work(pause: Pause) -> int:
        seen.append((pause, sys.getswitchinterval(), gc.isenabled()))
        return 7

    try:
        await feeder.absorb(frame(3, 4), 12, full=True)
        await feeder.update(configs, large=True)
        assert await feeder.run(work, large=True) == 7
        assert await feeder.run(work, large=False) == 7
        await settled(feeder, interval)
        (p1, i1, gc1), (p2, i2, gc2), (p3, i3, _) = seen
        assert isinstance(p1, Pacer) and i1 < interval and gc1  # no GC pause
        assert isinstance(p2, Pacer) and i2 < interval and gc2
        assert p3 is None
        assert store.view.topics["topic-1"].min_insync_replicas == 4
    finally:
        feeder.close()
