"""proxy.cluster.watch: topics join when named, leave after the idle time (fake clock)."""

from __future__ import annotations

from proxy.cluster.watch import WatchedTopics


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_topics_join_when_named_and_leave_after_the_idle_time() -> None:
    clock = Clock()
    watched = WatchedTopics(clock, idle_s=60)
    assert watched.names() == frozenset()
    assert watched.use(["orders", "payments"]) is True
    assert watched.use(["orders"]) is False  # already watched: nothing new
    assert watched.names() == {"orders", "payments"}
    clock.now += 50
    watched.use(["orders"])  # used again: its idle time starts over
    clock.now += 20  # payments unused for 70 s, orders for 20 s
    assert watched.names() == {"orders"}
    assert "payments" not in watched and len(watched) == 1
    assert (watched.joined, watched.left) == (2, 1)
    clock.now += 61
    assert watched.names() == frozenset()
    assert watched.use(["payments"]) is True  # back: new again


def test_the_same_set_object_until_a_topic_joins_or_leaves() -> None:
    clock = Clock()
    watched = WatchedTopics(clock, idle_s=60)
    watched.use(["a"])
    first = watched.names()
    clock.now += 10
    watched.use(["a"])
    assert watched.names() is first  # a reader compares by identity
    watched.use(["b"])
    assert watched.names() is not first and watched.names() == {"a", "b"}


def test_topic_ids_resolve_through_the_view_and_unknown_ids_join_nothing() -> None:
    ids = {b"\x01" * 16: "orders"}
    watched = WatchedTopics(Clock(), 60, ids.get)
    assert watched.use([b"\x01" * 16, b"\x02" * 16]) is True
    assert watched.names() == {"orders"}
