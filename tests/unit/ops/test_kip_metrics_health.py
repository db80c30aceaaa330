"""proxy.ops.health: readiness as a pure function, liveness as a probe of the event
loop."""

from __future__ import annotations

import asyncio
import threading

from proxy.cluster.view import ClusterViewStore
from proxy.ops.health import LoopProbe, readiness
from tests.unit._views import Clock, part, snap, topic


def fed_store(clock: Clock) -> ClusterViewStore:
    store = ClusterViewStore(clock)
    store.apply_metadata(snap([topic("orders", [part(0, (1, 2, 3))])]), full=True)
    return store


def test_ready_when_the_last_poll_succeeded_and_the_view_is_young() -> None:
    clock = Clock()
    store = fed_store(clock)
    clock.t += 4.0
    health = readiness(store.view, None, clock(), max_age_s=10.0)
    assert health.ok
    assert health.reason == "ready: metadata 4.0 s old, 3 broker(s), 1 partition(s)"


def test_not_ready_without_metadata() -> None:
    health = readiness(ClusterViewStore(Clock()).view, None, 1000.0, max_age_s=10.0)
    assert not health.ok and health.reason == "no cluster metadata yet"


def test_not_ready_when_stale() -> None:
    clock = Clock()
    store = fed_store(clock)
    clock.t += 10.5
    health = readiness(store.view, None, clock(), max_age_s=10.0)
    assert not health.ok
    assert health.reason == "metadata is 10.5 s old, above max_metadata_age_ms (10000 ms)"


def test_not_ready_when_the_last_poll_failed_even_if_young() -> None:
    clock = Clock()
    store = fed_store(clock)
    health = readiness(store.view, "no upstream reachable: b1:9092: refused", clock(), 10.0)
    assert not health.ok
    assert "\n" not in health.reason
    assert health.reason.startswith("upstream unreachable: last metadata poll failed: no "
                                    "upstream reachable")


def test_loop_probe_sees_a_turning_loop_and_a_blocked_one() -> None:
    loop = asyncio.new_event_loop()
    stop = threading.Event()
    blocked = threading.Event()
    stuck = threading.Event()

    def run() -> None:
        async def main() -> None:
            while not stop.is_set():
                if blocked.is_set():
                    stuck.set()
                    stop.wait(1.0)  # blocks the loop, as a runaway callback would
                    continue
                await asyncio.sleep(0.01)
        loop.run_until_complete(main())

    thread = threading.Thread(target=run)
    thread.start()
    try:
        probe = LoopProbe(loop, timeout_s=0.5)
        assert probe().ok
        blocked.set()
        assert stuck.wait(5)
        health = probe()
        assert not health.ok and "did not respond within 0.5 s" in health.reason
    finally:
        stop.set()
        thread.join(5)
        loop.close()
    assert LoopProbe(loop)().reason == "event loop is closed"
