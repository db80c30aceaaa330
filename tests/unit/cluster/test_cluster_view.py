"""proxy.cluster.view: the immutable cluster view and the store that replaces it.

Invariant under test: a full Metadata response replaces the topic set, a
partial one merges into it (UNKNOWN_TOPIC_OR_PARTITION removes a topic);
racks are remembered by node id after a broker leaves the broker list;
operator racks fill only missing racks unless told to override; topic ids
resolve to names; min.insync.replicas survives metadata updates; every update
builds a new view and leaves the old one exactly as it was; a build that pauses
between chunks of work builds the same view.
"""

from __future__ import annotations

import dataclasses
import gc

import pytest

from protocol.metadata import TopicMetadata
from proxy.cluster.view import (
    NO_RACK,
    Broker,
    ClusterView,
    ClusterViewStore,
    PartitionState,
    TopicState,
)
from tests.unit._views import BROKERS, Clock, broker, part, snap, tid, topic


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> ClusterViewStore:
    return ClusterViewStore(clock)


def test_empty_view() -> None:
    view = ClusterView()
    assert view.topics == {} and view.brokers == {} and view.topic_ids == {}
    assert view.age(5.0) == float("inf")
    assert view.topic("x") is None and view.topic(tid(1)) is None
    assert view.rack_of(1) == NO_RACK == ""
    assert view.partition_count == 0


def test_full_apply_builds_the_view(store: ClusterViewStore, clock: Clock) -> None:
    view = store.apply_metadata(
        snap([topic("orders", [part(0, (1, 2), offline=(3,)), part(1, (2,), leader=2)],
                    tid(7))]),
        full=True,
    )
    assert view is store.view
    assert view.brokers[2] == Broker(2, "b2.internal", 9094, "rack-b")
    assert dict(view.racks) == {1: "rack-a", 2: "rack-b", 3: "rack-c"}
    orders = view.topics["orders"]
    assert orders.name == "orders" and orders.topic_id == tid(7)
    assert orders.partitions[0] == PartitionState(1, 4, (1, 2, 3), (1, 2), (3,))
    assert orders.partitions[1].leader == 2 and orders.partitions[1].isr == (2,)
    assert orders.updated_at == clock.t
    assert orders.min_insync_replicas is None
    assert view.refreshed_at == clock.t
    assert view.cluster_id == "cluster-1"
    assert view.partition_count == 2
    assert view.rack_names() == {"rack-a", "rack-b", "rack-c"}
    assert view.rackless_brokers() == []


def test_partial_keeps_other_topics(store: ClusterViewStore, clock: Clock) -> None:
    store.apply_metadata(
        snap([topic("a", [part(0, (1, 2))]), topic("b", [part(0, (1,))])]), full=True)
    full_at = clock.t
    before = store.view
    clock.t += 5
    view = store.apply_metadata(snap([topic("b", [part(0, (1, 3))])]), full=False)
    assert set(view.topics) == {"a", "b"}
    assert view.topics["b"].partitions[0].isr == (1, 3)
    assert view.topics["b"].updated_at == clock.t
    # the untouched topic is the very same object: its partitions were not copied
    assert view.topics["a"] is before.topics["a"]
    assert view.topics["a"].updated_at == full_at
    # a partial response does not count as a full refresh
    assert view.refreshed_at == full_at


def test_partial_adds_a_new_topic(store: ClusterViewStore) -> None:
    store.apply_metadata(snap([topic("a", [part(0, (1,))])]), full=True)
    view = store.apply_metadata(snap([topic("new", [part(0, (2,)), part(1, (3,))])]), full=False)
    assert set(view.topics) == {"a", "new"}
    assert sorted(view.topics["new"].partitions) == [0, 1]


def test_full_drops_vanished_topics(store: ClusterViewStore) -> None:
    store.apply_metadata(
        snap([topic("a", [part(0, (1,))], tid(1)), topic("b", [part(0, (1,))], tid(2))]),
        full=True,
    )
    view = store.apply_metadata(snap([topic("b", [part(0, (2,))], tid(2))]), full=True)
    assert set(view.topics) == {"b"}
    assert view.topic(tid(1)) is None
    assert dict(view.topic_ids) == {tid(2): "b"}


def test_partial_unknown_topic_error_removes_the_topic(store: ClusterViewStore) -> None:
    store.apply_metadata(
        snap([topic("a", [part(0, (1,))], tid(1)), topic("b", [part(0, (1,))])]), full=True)
    view = store.apply_metadata(snap([topic("a", [], error=3)]), full=False)
    assert set(view.topics) == {"b"}
    assert view.topic("a") is None
    assert view.topic(tid(1)) is None


def test_partial_other_topic_error_keeps_what_is_known(store: ClusterViewStore) -> None:
    store.apply_metadata(snap([topic("a", [part(0, (1, 2))])]), full=True)
    before = store.view.topics["a"]
    view = store.apply_metadata(snap([topic("a", [], error=5)]), full=False)  # leader n/a
    assert view.topics["a"] is before


def test_full_with_topic_errors_and_null_names(store: ClusterViewStore) -> None:
    view = store.apply_metadata(
        snap([
            topic("ok", [part(0, (1,))]),
            topic("gone", [], error=3),
            TopicMetadata(None, tid(9), 100, False, ()),  # unknown topic id, name null (v12+)
        ]),
        full=True,
    )
    assert set(view.topics) == {"ok"}
    assert dict(view.topic_ids) == {}


def test_racks_remembered_after_a_broker_leaves(store: ClusterViewStore) -> None:
    store.apply_metadata(snap([topic("a", [part(0, (1, 2, 3))])]), full=True)
    view = store.apply_metadata(
        snap([topic("a", [part(0, (1, 2, 3))])], brokers=BROKERS[:2]), full=True)
    assert 3 not in view.brokers
    assert view.rack_of(3) == "rack-c"  # the ISR may still name it
    assert view.rack_names() == {"rack-a", "rack-b"}  # only brokers listed now
    # it comes back in another rack: the new rack wins
    view = store.apply_metadata(
        snap([], brokers=[*BROKERS[:2], broker(3, "rack-z")]), full=False)
    assert view.rack_of(3) == "rack-z"


def test_broker_reporting_no_rack(store: ClusterViewStore) -> None:
    view = store.apply_metadata(snap([], brokers=[broker(1, "rack-a"), broker(2, None)]),
                                full=True)
    assert view.rack_of(2) == NO_RACK
    assert view.rackless_brokers() == [2]
    assert view.rack_names() == {"rack-a", NO_RACK}
    assert view.rack_of(99) == NO_RACK  # never seen


def test_operator_racks_fill_only_missing_racks(clock: Clock) -> None:
    store = ClusterViewStore(clock, operator_racks={1: "op-a", 2: "op-b", 9: "op-z"})
    view = store.apply_metadata(snap([], brokers=[broker(1, None), broker(2, "rack-b")]),
                                full=True)
    assert view.brokers[1].rack == "op-a"
    assert view.brokers[2].rack == "rack-b"  # reported racks win by default
    assert view.rack_of(1) == "op-a" and view.rack_of(2) == "rack-b"
    assert view.rackless_brokers() == []


def test_operator_racks_override(clock: Clock) -> None:
    store = ClusterViewStore(clock, operator_racks={1: "op-a", 2: "op-b"},
                             operator_racks_override=True)
    view = store.apply_metadata(
        snap([], brokers=[broker(1, None), broker(2, "rack-b"), broker(3, "rack-c")]),
        full=True,
    )
    assert (view.rack_of(1), view.rack_of(2), view.rack_of(3)) == ("op-a", "op-b", "rack-c")
    assert view.brokers[2].rack == "op-b"


def test_topic_ids(store: ClusterViewStore) -> None:
    view = store.apply_metadata(
        snap([
            topic("v13", [part(0, (1,))], tid(13)),
            topic("zero-id", [part(0, (1,))], bytes(16)),  # all zero: no id known
            topic("old", [part(0, (1,))], None),  # before Metadata v10
        ]),
        full=True,
    )
    assert dict(view.topic_ids) == {tid(13): "v13"}
    assert view.topic(tid(13)) is view.topics["v13"]
    assert view.topics["zero-id"].topic_id is None
    assert view.topics["old"].topic_id is None
    assert view.topic(bytes(16)) is None
    assert view.topic("v13") is view.topics["v13"]
    assert view.topic(tid(14)) is None


def test_partial_keeps_topic_ids_of_other_topics(store: ClusterViewStore) -> None:
    store.apply_metadata(snap([topic("a", [part(0, (1,))], tid(1))]), full=True)
    view = store.apply_metadata(snap([topic("b", [part(0, (1,))], tid(2))]), full=False)
    assert view.topic(tid(1)).name == "a"  # type: ignore[union-attr]
    assert view.topic(tid(2)).name == "b"  # type: ignore[union-attr]


def test_age(store: ClusterViewStore, clock: Clock) -> None:
    assert store.view.age(clock.t) == float("inf")
    clock.t = 100.0
    store.apply_metadata(snap([topic("a", [part(0, (1,))]), topic("b", [part(0, (1,))])]),
                         full=True)
    view = store.view
    assert view.age(103.0) == pytest.approx(3.0)
    assert view.age(103.0, view.topics["a"]) == pytest.approx(3.0)
    clock.t = 105.0
    view = store.apply_metadata(snap([topic("a", [part(0, (1, 2))])]), full=False)
    # the topic just confirmed is younger than the view's last full refresh
    assert view.age(110.0, view.topics["a"]) == pytest.approx(5.0)
    assert view.age(110.0, view.topics["b"]) == pytest.approx(10.0)
    assert view.age(110.0) == pytest.approx(10.0)


def test_age_of_a_partial_only_view(store: ClusterViewStore, clock: Clock) -> None:
    clock.t = 50.0
    view = store.apply_metadata(snap([topic("a", [part(0, (1,))])]), full=False)
    assert view.refreshed_at is None
    assert view.age(60.0) == float("inf")
    assert view.age(60.0, view.topics["a"]) == pytest.approx(10.0)


def test_min_insync_replicas_kept_across_updates(store: ClusterViewStore, clock: Clock) -> None:
    store.apply_metadata(snap([topic("a", [part(0, (1,))]), topic("b", [part(0, (1,))])]),
                         full=True)
    view = store.apply_min_insync_replicas({"a": 2, "nope": 3})
    assert view.topics["a"].min_insync_replicas == 2
    assert view.topics["b"].min_insync_replicas is None
    assert "nope" not in view.topics
    clock.t += 1
    view = store.apply_metadata(snap([topic("a", [part(0, (1, 2))])]), full=False)
    assert view.topics["a"].min_insync_replicas == 2
    view = store.apply_metadata(
        snap([topic("a", [part(0, (1, 2, 3))]), topic("b", [part(0, (1,))])]), full=True)
    assert view.topics["a"].min_insync_replicas == 2
    assert view.topics["a"].partitions[0].isr == (1, 2, 3)
    # a topic that vanished and came back starts unknown again
    store.apply_metadata(snap([topic("b", [part(0, (1,))])]), full=True)
    view = store.apply_metadata(snap([topic("a", [part(0, (1,))])]), full=False)
    assert view.topics["a"].min_insync_replicas is None


def test_apply_min_insync_replicas_keeps_other_state(store: ClusterViewStore) -> None:
    before = store.apply_metadata(snap([topic("a", [part(0, (1,))], tid(1))]), full=True)
    after = store.apply_min_insync_replicas({"a": 3})
    assert after is not before
    assert after.brokers is before.brokers and after.racks is before.racks
    assert after.refreshed_at == before.refreshed_at
    assert after.topics["a"].partitions is before.topics["a"].partitions
    assert after.topic(tid(1)) is after.topics["a"]
    assert before.topics["a"].min_insync_replicas is None


def test_apply_min_insync_replicas_copies_every_other_field(store: ClusterViewStore) -> None:
    # it builds TopicState field by field (faster than dataclasses.replace): a field added
    # to TopicState and not copied there would be lost here
    before = store.apply_metadata(snap([topic("a", [part(0, (1,))], tid(1))]), full=True)
    old = before.topics["a"]
    new = store.apply_min_insync_replicas({"a": 3}).topics["a"]
    assert new == dataclasses.replace(old, min_insync_replicas=3)
    for f in dataclasses.fields(TopicState):
        if f.name != "min_insync_replicas":
            assert getattr(new, f.name) is getattr(old, f.name), f.name


def test_build_with_pause_builds_the_same_view(clock: Clock) -> None:
    # chunked (a pause every 1,024 partitions of a big topic, and after every topic)
    # and unchunked builds give equal views, full and partial
    big = topic("big", [part(i, (1 + i % 3,)) for i in range(2500)], tid(9))
    small = [topic(f"t{n}", [part(0, (1, 2)), part(1, (2,))], tid(n)) for n in range(5)]
    plain, paused = ClusterViewStore(clock), ClusterViewStore(clock)
    calls: list[int] = []
    for snapshot, full in ((snap([big, *small]), True),
                           (snap([small[0], topic("t1", [], error=3)]), False),
                           (snap([big]), False)):
        expected = plain.build(snapshot, full)
        plain.install(expected)
        built = paused.build(snapshot, full, lambda: calls.append(1))
        paused.install(built)
        assert built == expected
        assert list(built.topics["big"].partitions) == list(expected.topics["big"].partitions)
    assert len(calls) == (6 + 3) + 1 + (1 + 3)  # per topic merged, plus per chunk of "big"


def test_cluster_id_kept_when_a_response_has_none(store: ClusterViewStore) -> None:
    store.apply_metadata(snap([], cluster_id="c-1"), full=True)
    assert store.apply_metadata(snap([], cluster_id=None), full=False).cluster_id == "c-1"
    assert store.apply_metadata(snap([], cluster_id="c-2"), full=True).cluster_id == "c-2"


def _content(view: ClusterView) -> tuple[object, ...]:
    return (
        dict(view.brokers),
        dict(view.racks),
        {n: (t, dict(t.partitions)) for n, t in view.topics.items()},
        dict(view.topic_ids),
        view.refreshed_at,
        view.cluster_id,
    )


def test_subscribers_get_old_and_new_and_old_views_never_change(
    store: ClusterViewStore, clock: Clock
) -> None:
    calls: list[tuple[ClusterView, ClusterView]] = []
    store.subscribe(lambda old, new: calls.append((old, new)))
    views = [store.view]
    contents = [_content(store.view)]

    def step(view: ClusterView) -> None:
        assert calls[-1] == (views[-1], view)
        assert calls[-1][0] is views[-1] and calls[-1][1] is view is store.view
        views.append(view)
        contents.append(_content(view))
        clock.t += 1

    step(store.apply_metadata(snap([topic("a", [part(0, (1, 2))], tid(1)),
                                    topic("b", [part(0, (1,))])]), full=True))
    step(store.apply_metadata(snap([topic("a", [part(0, (3,))])]), full=False))
    step(store.apply_min_insync_replicas({"a": 2}))
    step(store.apply_metadata(snap([topic("b", [], error=3)]), full=False))
    step(store.apply_metadata(snap([topic("c", [part(0, (2,))])], brokers=BROKERS[:1]),
                              full=True))
    assert len(calls) == 5
    for view, content in zip(views, contents, strict=True):
        assert _content(view) == content
    assert views[1].topics["a"].partitions[0].isr == (1, 2)
    assert set(views[1].topics) == {"a", "b"}


def test_two_subscribers_both_called(store: ClusterViewStore) -> None:
    seen: list[str] = []
    store.subscribe(lambda old, new: seen.append("first"))
    store.subscribe(lambda old, new: seen.append("second"))
    store.apply_metadata(snap([]), full=True)
    assert seen == ["first", "second"]


def test_views_cannot_be_mutated(store: ClusterViewStore) -> None:
    view = store.apply_metadata(snap([topic("a", [part(0, (1,))], tid(1))]), full=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.refreshed_at = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        view.topics["x"] = view.topics["a"]  # type: ignore[index]
    with pytest.raises(TypeError):
        view.racks[1] = "other"  # type: ignore[index]
    with pytest.raises(TypeError):
        view.brokers[1] = view.brokers[2]  # type: ignore[index]
    with pytest.raises(TypeError):
        view.topic_ids[tid(2)] = "a"  # type: ignore[index]
    with pytest.raises(TypeError):
        view.topics["a"].partitions[5] = view.topics["a"].partitions[0]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.topics["a"].partitions[0].isr = ()  # type: ignore[misc]


def test_with_min_insync_replicas_is_pure_and_returns_the_base_when_nothing_changes(
    store: ClusterViewStore,
) -> None:
    seen: list[ClusterView] = []
    base = store.apply_metadata(snap([topic("a", [part(0, (1,))]), topic("b", [])]), full=True)
    store.subscribe(lambda old, new: seen.append(new))
    pauses: list[int] = []
    built = store.with_min_insync_replicas({"a": 2, "gone": 3}, lambda: pauses.append(1))
    assert store.view is base and not seen  # not installed
    assert built.topics["a"].min_insync_replicas == 2
    assert built.topics["b"] is base.topics["b"] and list(built.topics) == ["a", "b"]
    assert store.with_min_insync_replicas({"gone": 3}) is base
    assert store.with_min_insync_replicas({"a": 2}, base=built) is built
    # the direct method still always installs a new view
    again = store.apply_min_insync_replicas({})
    assert again is not base and again == base and seen == [again]


def test_install_over_refuses_a_view_built_on_a_stale_base(
    store: ClusterViewStore, clock: Clock
) -> None:
    base = store.apply_metadata(snap([topic("a", [part(0, (1,))])]), full=True)
    stale = store.with_min_insync_replicas({"a": 2})
    clock.t += 1
    newer = store.apply_metadata(snap([topic("b", [part(0, (2,))])]), full=False)
    assert not store.install_over(base, stale)
    assert store.view is newer  # the newer view was not overwritten by the stale build
    rebuilt = store.with_min_insync_replicas({"a": 2}, base=store.view)
    assert store.install_over(newer, rebuilt)
    assert store.view is rebuilt
    assert set(rebuilt.topics) == {"a", "b"} and rebuilt.topics["a"].min_insync_replicas == 2


def test_build_on_an_explicit_base(store: ClusterViewStore) -> None:
    first = store.build(snap([topic("a", [part(0, (1,))])]), full=True)
    assert store.view.topics == {}  # built, not installed
    second = store.build(snap([topic("b", [part(0, (1,))])]), full=False, base=first)
    assert set(second.topics) == {"a", "b"}


def test_partition_rows_are_left_untracked_by_the_cyclic_collector(
    store: ClusterViewStore,
) -> None:
    """A view's partitions must not stay in the collector's generations: at 100,000 of
    them every collection that scans them stalls all threads (the reason the view holds
    plain rows, not an object per partition)."""
    parts = [part(i, (1 + i % 3, 1 + (i + 1) % 3)) for i in range(50)]
    view = store.apply_metadata(snap([topic("a", parts)]), full=True)
    gc.collect(0)  # the first young collection that sees them is enough
    rows = view.topics["a"].partitions.rows
    assert len(rows) == 50 and not any(gc.is_tracked(r) for r in rows.values())
    assert rows[3][0] == 3  # the response's row: index, error code, then the state
    assert view.topics["a"].partitions[3] == PartitionState(*rows[3][2:])


def test_a_refresh_keeps_the_objects_of_unchanged_topics(
    store: ClusterViewStore, clock: Clock
) -> None:
    """Each refresh would otherwise leave new long-lived objects for every topic for the
    cyclic GC to promote, which brings the next full collection (a stall of every
    thread) forward: a full refresh keeps an unchanged topic's very object, whose age
    is the view's; a changed topic is new; a partial refresh confirms a topic now and
    shares its unchanged partitions."""
    before = store.apply_metadata(
        snap([topic("a", [part(0, (1, 2))]), topic("b", [part(0, (1,))])]), full=True)
    clock.t += 1
    after = store.apply_metadata(
        snap([topic("a", [part(0, (1, 2))]), topic("b", [part(0, (1, 3))])]), full=True)
    assert after.topics["a"] is before.topics["a"]
    assert after.age(clock.t, after.topics["a"]) == 0
    assert after.topics["b"] is not before.topics["b"]
    assert after.topics["b"].partitions is not before.topics["b"].partitions
    assert after.topics["b"].partitions[0].isr == (1, 3)
    assert after.topics["b"].updated_at == clock.t
    clock.t += 1
    partial = store.apply_metadata(snap([topic("a", [part(0, (1, 2))])]), full=False)
    assert partial.topics["a"] is not after.topics["a"]
    assert partial.topics["a"].partitions is after.topics["a"].partitions
    assert partial.topics["a"].updated_at == clock.t
    assert partial.topics["b"] is after.topics["b"]


def test_a_new_topic_id_makes_a_new_topic(store: ClusterViewStore, clock: Clock) -> None:
    """The same name and partitions under another id (deleted and made anew) is a change."""
    before = store.apply_metadata(snap([topic("a", [part(0, (1,))], tid(1))]), full=True)
    clock.t += 1
    after = store.apply_metadata(snap([topic("a", [part(0, (1,))], tid(2))]), full=True)
    assert after.topics["a"].topic_id == tid(2) and after.topic(tid(2)) is after.topics["a"]
    assert before.topics["a"].topic_id == tid(1) and after.topic(tid(1)) is None
