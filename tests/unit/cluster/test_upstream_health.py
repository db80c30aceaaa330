"""Which broker the proxy asks next (proxy/cluster/upstream_health.py), with a fake clock.

Invariants under test: the bootstrap list only before a view and when every known
broker is backed off; a failed broker is backed off (doubling, capped) and healthy
brokers come first, those outside the rack that just failed before those in it; the
broker that answers stays first; a broker that failed and left the view stays down.
"""

from __future__ import annotations

from proxy.cluster.upstream_health import Candidate, UpstreamHealth

BOOT = [("10.0.0.1", 9092), ("10.0.0.4", 9092)]
RACK = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def broker(n: int) -> Candidate:
    return Candidate(n, f"10.0.0.{n}", 9092, RACK[n])


def health() -> tuple[UpstreamHealth, Clock]:
    clock = Clock()
    return UpstreamHealth(BOOT, clock, backoff_s=0.5, backoff_max_s=4.0), clock


def ids(order: list[Candidate]) -> list[int | None]:
    return [c.node_id for c in order]


def test_bootstrap_only_without_a_view() -> None:
    h, _ = health()
    assert [c.address for c in h.order()] == BOOT
    h.learn(broker(n) for n in range(1, 7))
    assert ids(h.order()) == [1, 2, 3, 4, 5, 6]  # the bootstrap servers are not added


def test_a_failed_rack_goes_last_and_the_answering_broker_stays_first() -> None:
    h, clock = health()
    h.learn(broker(n) for n in range(1, 7))
    h.succeeded(broker(4))
    assert ids(h.order())[0] == 4
    h.failed(broker(4), "timed out")  # rack a hangs: broker 1 is in it too
    order = ids(h.order())
    assert order[:4] == [2, 3, 5, 6] and order[4] == 1 and order[5] == 4
    h.succeeded(broker(5))
    assert ids(h.order())[0] == 5
    clock.now += 60  # 4's back-off is over: rack a still comes last, 4 (it answered once) first
    assert ids(h.order()) == [5, 2, 3, 6, 4, 1]


def test_backoff_doubles_and_is_capped_and_success_clears_it() -> None:
    h, clock = health()
    h.learn([broker(1)])
    delays = []
    for _ in range(5):
        h.failed(broker(1), "refused")
        delays.append(h.health(broker(1)).retry_at - clock.now)
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert not h.health(broker(1)).up and h.health(broker(1)).last_error == "refused"
    h.succeeded(broker(1))
    assert h.health(broker(1)).up and h.health(broker(1)).retry_at == 0.0


def test_every_known_broker_backed_off_brings_the_bootstrap_list_back() -> None:
    h, clock = health()
    h.learn([broker(2), broker(3)])
    h.failed(broker(2), "x")
    h.failed(broker(3), "y")
    order = h.order()
    assert [c.address for c in order[:2]] == BOOT  # healthy bootstrap servers first
    assert ids(order[2:]) == [2, 3]  # then the backed-off ones, soonest first
    clock.now += 1
    assert ids(h.order()) == [2, 3]


def test_a_broker_that_failed_and_left_the_view_stays_down() -> None:
    h, _ = health()
    h.learn(broker(n) for n in (1, 2))
    h.failed(broker(1), "connection refused")
    h.learn([broker(2)])
    states = {c.node_id: up for c, up in h.states().items()}
    assert states == {1: False, 2: True}
    h.learn(broker(n) for n in (1, 2))  # back in the view: still down until it answers
    assert not h.health(broker(1)).up
    assert h.health(broker(1)).last_error == "connection refused"
