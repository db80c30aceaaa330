"""The loss watch's pure parts: the acknowledged-offset state, suspicion, the rule."""

from __future__ import annotations

from proxy.cluster.view import ClusterViewStore
from proxy.losswatch.rule import LostRange, Reading, lost_ranges, stable
from proxy.losswatch.state import ACKS_ALL, ACKS_ONE, MAX_SEGMENTS, AckState, Segment
from proxy.losswatch.suspicion import suspicions
from tests.unit._views import Clock, part, snap, topic


def test_segments_follow_the_answering_broker_and_split_acks_levels() -> None:
    state = AckState(60.0, lambda t, i: 7)
    state.acknowledged("t", 0, 1, ACKS_ALL, 0, 10, "a", 1.0)
    state.acknowledged("t", 0, 1, ACKS_ONE, 10, 5, "b", 2.0)
    state.acknowledged("t", 0, 1, ACKS_ALL, 15, 5, "a", 3.0)
    entry = state.get(("t", 0))
    assert entry is not None and len(entry.segments) == 1
    seg = entry.segments[0]
    assert (seg.range(ACKS_ALL), seg.n_all, seg.range(ACKS_ONE), seg.n_one, seg.epoch) == (
        (0, 19), 15, (10, 14), 5, 7)
    assert entry.clients == ("a", "b") and entry.seen == 3.0
    state.acknowledged("t", 0, 2, ACKS_ALL, 20, 1, "a", 4.0)
    assert [s.node for s in entry.segments] == [1, 2]
    assert [s.node for s in entry.earlier(2)] == [1]
    assert [s.node for s in entry.earlier(1)] == [2]


def test_close_keeps_the_new_leaders_own_run_open() -> None:
    state = AckState(60.0)
    state.acknowledged("t", 0, 2, ACKS_ALL, 0, 1, None, 0.0)
    state.close(("t", 0), 2)
    entry = state.get(("t", 0))
    assert entry is not None and not entry.segments[0].closed
    state.close(("t", 0), -1)
    assert entry.segments[0].closed and entry.earlier(2)
    state.acknowledged("t", 0, 2, ACKS_ALL, 1, 1, None, 0.0)
    assert len(entry.segments) == 2  # a closed run is never extended


def test_checked_trims_what_was_reported_and_merges_the_rest() -> None:
    state = AckState(60.0)
    for node, base in ((1, 0), (3, 50), (2, 80)):
        state.acknowledged("t", 0, node, ACKS_ALL, base, 30, None, 0.0)
    state.checked(("t", 0), 2, 60)
    entry = state.get(("t", 0))
    assert entry is not None
    assert [(s.node, s.range(ACKS_ALL), s.closed) for s in entry.segments] == [
        (1, (0, 59), True), (2, (80, 109), False)]


def test_segments_are_bounded() -> None:
    state = AckState(60.0)
    for n in range(10):
        state.acknowledged("t", 0, n, ACKS_ALL, n * 10, 10, None, 0.0)
    entry = state.get(("t", 0))
    assert entry is not None and len(entry.segments) == MAX_SEGMENTS
    assert entry.segments[0].range(ACKS_ALL) == (0, 69)  # the oldest merged, none forgotten


def test_suspicions_name_the_election() -> None:
    store = ClusterViewStore(Clock())
    store.apply_metadata(snap([topic("t", [part(0, (1, 2)), part(1, (1, 2)), part(2, (3,))])]),
                         full=True)
    old = store.view
    store.apply_metadata(snap([topic("t", [part(0, (3,), leader=3, epoch=5),
                                           part(1, (2,), leader=2, epoch=5),
                                           part(2, (3,), epoch=9)])]), full=True)
    last_isr: dict[tuple[str | bytes, int], tuple[int, ...]] = {}
    found = {s.key[1]: s.cause for s in suspicions(old, store.view, [("t", [0, 1, 2])],
                                                     last_isr)}
    assert found == {
        0: "unclean election: leader 3 (epoch 5) was not in the last ISR seen [1, 2]",
        1: "leader change 1 -> 2 (epoch 4 -> 5)",
        2: "leader epoch jump 4 -> 9 (leader 3)"}
    assert last_isr[("t", 0)] == (3,)
    # an unchanged topic object is not read at all; unwritten partitions are not looked at
    assert suspicions(store.view, store.view, [("t", [0])], last_isr) == []
    assert suspicions(old, store.view, [("t", [])], {}) == []


def _reading(leader: int = 2, epoch: int = 4, error: int = 0, start: int | None = 100,
             at: float = 0.0) -> Reading:
    return Reading(leader, epoch, error, 100, start, at)


def test_the_rule_needs_two_stable_readings() -> None:
    first = _reading(at=0.0)
    assert stable(first, _reading(at=2.0), 2.0) == 100
    assert stable(first, _reading(at=1.0), 2.0) is None  # too close together
    assert stable(first, _reading(epoch=5, at=2.0), 2.0) is None  # the epoch moved
    assert stable(first, _reading(leader=3, at=2.0), 2.0) is None  # another leader
    assert stable(first, _reading(error=74, at=2.0), 2.0) is None  # fenced
    assert stable(first, _reading(start=101, at=2.0), 2.0) is None  # no agreement
    assert stable(_reading(start=None), _reading(start=None, at=2.0), 2.0) is None


def test_lost_ranges_per_level_from_the_epoch_start() -> None:
    a, b = Segment(1, 3), Segment(4, 3)
    a.lo_all, a.hi_all, a.lo_one, a.hi_one = 0, 99, 40, 60
    b.lo_all, b.hi_all = 100, 149
    assert lost_ranges(50, [a, b]) == [LostRange(ACKS_ALL, 50, 149), LostRange(ACKS_ONE, 50, 60)]
    assert lost_ranges(150, [a, b]) == []
    assert LostRange(ACKS_ALL, 50, 149).count == 100
