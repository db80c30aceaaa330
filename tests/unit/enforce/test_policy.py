"""proxy.enforce.policy: the rack rule (docs/enforcement.md, "The rule") as a pure function of
plain values.

Invariant under test: per partition, in this order: unknown topic/partition ->
UNKNOWN; required racks 1 -> PASS with nothing checked; a view older than the
bound -> METADATA_STALE (or STALE_FAIL_OPEN); ISR below min.insync.replicas ->
BELOW_MIN_ISR (forwarded, the broker answers); distinct ISR racks (rackless =
"") below required -> NOT_ENOUGH_RACKS; else PASS. Topic overrides: exact name
over prefix, longest prefix first.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import pytest

from benchmarks.produce_frames import kp_request, make_batch
from protocol.headers import parse_request_header
from protocol.produce import (
    PartitionData,
    ProduceRequest,
    TopicData,
    TopicKey,
    walk_produce_request,
)
from proxy.app import rack_rule
from proxy.cluster.view import ClusterView, ClusterViewStore
from proxy.enforce.policy import (
    REJECTING,
    Decision,
    RackRule,
    Verdict,
    decide,
    decide_known,
    unknown_partitions,
)
from proxy.settings import load_settings
from tests.unit._views import Clock, broker, part, snap, tid, topic

T0 = 1000.0
MAX_AGE = 10.0

# racks: 1, 2 -> rack-a; 3 -> rack-b; 4 -> rack-c; 5, 6 -> no rack
CLUSTER = (
    broker(1, "rack-a"), broker(2, "rack-a"), broker(3, "rack-b"), broker(4, "rack-c"),
    broker(5, None), broker(6, None),
)
ORDERS_ID = tid(101)
TOPICS = [
    topic("orders", [
        part(0, (1, 2)),        # 1 rack
        part(1, (1, 3)),        # 2 racks
        part(2, (1, 3, 4)),     # 3 racks
        part(3, (1,)),          # 1 rack, 1 member
    ], ORDERS_ID),
    topic("rackless", [
        part(0, (5, 6)),        # 1 rack: ""
        part(1, (1, 5)),        # 2 racks: "" and rack-a
    ], tid(102)),
    topic("pay.eu.x", [part(0, (1, 3)), part(1, (1, 3, 4))]),
    topic("pay.us", [part(0, (1, 3))]),
    topic("pay.eu.special", [part(0, (1, 2))]),
]


def make_store(clock: Clock | None = None) -> ClusterViewStore:
    store = ClusterViewStore(clock or Clock(T0))
    store.apply_metadata(snap(TOPICS, brokers=CLUSTER), full=True)
    return store


@pytest.fixture
def view() -> ClusterView:
    return make_store().view


def rule(default: int = 2, **kw: Any) -> RackRule:
    return RackRule(default_min_racks=default, max_metadata_age_s=MAX_AGE, **kw)


TopicSpec = tuple[TopicKey, Sequence[int]]


def request(*topics: TopicSpec, version: int = 9) -> ProduceRequest:
    """A walked request's summary, built directly (spans are irrelevant to the policy)."""
    data = []
    for key, indexes in topics:
        parts = tuple(PartitionData(i, None, (0, 0)) for i in indexes)
        if isinstance(key, bytes):
            data.append(TopicData(key, None, key, parts, (0, 0), (0, 0)))
        else:
            data.append(TopicData(key, key, None, parts, (0, 0), (0, 0)))
    return ProduceRequest(version, None, -1, 30_000, tuple(data), (0, 0))


def verdicts(decisions: list[Decision]) -> list[tuple[str | None, int, Verdict]]:
    return [(d.topic, d.partition, d.verdict) for d in decisions]


def one(req: ProduceRequest, view: ClusterView, r: RackRule, now: float = T0) -> Decision:
    [decision] = decide(req, view, r, now)
    return decision


# 1. unknown topic or partition


def test_unknown_topic_and_partition(view: ClusterView) -> None:
    req = request(("nope", [0]), ("orders", [9, 0]))
    assert verdicts(decide(req, view, rule(), T0)) == [
        ("nope", 0, Verdict.UNKNOWN),
        ("orders", 9, Verdict.UNKNOWN),
        ("orders", 0, Verdict.NOT_ENOUGH_RACKS),
    ]
    assert unknown_partitions(req, view)
    assert unknown_partitions(request(("nope", [0])), view)
    assert not unknown_partitions(request(("orders", [0, 1, 2, 3]), ("rackless", [1])), view)


def test_unknown_comes_before_staleness(view: ClusterView) -> None:
    req = request(("nope", [0]), ("orders", [7]))
    late = T0 + MAX_AGE + 100
    assert [d.verdict for d in decide(req, view, rule(), late)] == [Verdict.UNKNOWN] * 2
    assert not any(d.verdict.rejects for d in decide(req, view, rule(), late))


def test_unknown_decision_carries_required_racks(view: ClusterView) -> None:
    d = one(request(("pay.eu.new", [0])), view,
            rule(prefix_min_racks=(("pay.eu.", 3), ("pay.", 2))))
    assert (d.verdict, d.topic, d.required_racks) == (Verdict.UNKNOWN, "pay.eu.new", 3)


# 2. required racks 1: nothing checked


def test_required_one_passes_without_checking(view: ClusterView) -> None:
    r = rule(default=1)
    late = T0 + MAX_AGE * 5  # stale, but nothing is checked
    for idx in (0, 3):
        d = one(request(("orders", [idx])), view, r, late)
        assert d.verdict is Verdict.PASS
        assert d.isr_racks == ()  # racks were not even computed
        assert d.required_racks == 1


def test_required_one_by_override_beats_below_min_isr() -> None:
    store = make_store()
    view = store.apply_min_insync_replicas({"orders": 3})
    r = rule(default=3, topic_min_racks={"orders": 1})
    d = one(request(("orders", [3])), view, r)  # ISR (1,) < min.insync.replicas 3
    assert d.verdict is Verdict.PASS


# 3. stale view


@pytest.mark.parametrize("idx", [0, 1, 2, 3])
def test_stale_view_fails_closed(view: ClusterView, idx: int) -> None:
    late = T0 + MAX_AGE + 0.5
    d = one(request(("orders", [idx])), view, rule(), late)
    assert d.verdict is Verdict.METADATA_STALE
    assert d.verdict.rejects
    assert d.metadata_age_s == pytest.approx(MAX_AGE + 0.5)
    assert d.message().startswith("METADATA_STALE: orders-")


@pytest.mark.parametrize("idx", [0, 2])
def test_stale_view_fail_open(view: ClusterView, idx: int) -> None:
    d = one(request(("orders", [idx])), view, rule(fail_open=True), T0 + MAX_AGE + 1)
    assert d.verdict is Verdict.STALE_FAIL_OPEN
    assert not d.verdict.rejects


def test_age_at_the_bound_is_not_stale(view: ClusterView) -> None:
    assert one(request(("orders", [1])), view, rule(), T0 + MAX_AGE).verdict is Verdict.PASS


def test_stale_beats_below_min_isr() -> None:
    view = make_store().apply_min_insync_replicas({"orders": 2})
    d = one(request(("orders", [3])), view, rule(), T0 + MAX_AGE + 1)
    assert d.verdict is Verdict.METADATA_STALE


def test_recent_partial_update_makes_a_topic_fresh() -> None:
    clock = Clock(T0)
    store = make_store(clock)
    clock.t = T0 + MAX_AGE
    store.apply_metadata(snap([topic("rackless", [part(0, (5, 6)), part(1, (1, 5))])],
                              brokers=CLUSTER), full=False)
    now = T0 + MAX_AGE + 1
    assert one(request(("rackless", [1])), store.view, rule(), now).verdict is Verdict.PASS
    assert one(request(("orders", [1])), store.view, rule(), now).verdict is (
        Verdict.METADATA_STALE)


# 4. ISR below min.insync.replicas: the broker answers


def test_below_min_isr_is_forwarded_even_when_racks_fail() -> None:
    view = make_store().apply_min_insync_replicas({"orders": 3})
    decisions = decide(request(("orders", [0, 1, 2, 3])), view, rule(), T0)
    assert [d.verdict for d in decisions] == [
        Verdict.BELOW_MIN_ISR,  # (1,2): 2 < 3, and 1 rack would fail too
        Verdict.BELOW_MIN_ISR,  # (1,3): 2 < 3
        Verdict.PASS,           # (1,3,4): 3 members, 3 racks
        Verdict.BELOW_MIN_ISR,  # (1,): 1 < 3
    ]
    assert not any(d.verdict.rejects for d in decisions)
    assert decisions[0].min_insync_replicas == 3


def test_isr_equal_to_min_isr_goes_on_to_the_rack_check() -> None:
    view = make_store().apply_min_insync_replicas({"orders": 2})
    decisions = decide(request(("orders", [0, 1])), view, rule(), T0)
    assert [d.verdict for d in decisions] == [Verdict.NOT_ENOUGH_RACKS, Verdict.PASS]


def test_unknown_min_isr_is_not_checked(view: ClusterView) -> None:
    d = one(request(("orders", [3])), view, rule())
    assert d.min_insync_replicas is None
    assert d.verdict is Verdict.NOT_ENOUGH_RACKS


# 5. distinct racks


def test_distinct_racks_against_required(view: ClusterView) -> None:
    req = request(("orders", [0, 1, 2, 3]))
    assert [d.verdict for d in decide(req, view, rule(2), T0)] == [
        Verdict.NOT_ENOUGH_RACKS, Verdict.PASS, Verdict.PASS, Verdict.NOT_ENOUGH_RACKS]
    assert [d.verdict for d in decide(req, view, rule(3), T0)] == [
        Verdict.NOT_ENOUGH_RACKS, Verdict.NOT_ENOUGH_RACKS, Verdict.PASS,
        Verdict.NOT_ENOUGH_RACKS]
    assert all(d.verdict is Verdict.NOT_ENOUGH_RACKS for d in decide(req, view, rule(4), T0))


def test_decision_records_isr_racks_and_leader(view: ClusterView) -> None:
    d0, d1, d2 = decide(request(("orders", [0, 1, 2])), view, rule(), T0)
    assert (d0.isr, d0.isr_racks, d0.leader) == ((1, 2), ("rack-a",), 1)
    assert d1.isr_racks == ("rack-a", "rack-b")
    assert d2.isr_racks == ("rack-a", "rack-b", "rack-c")
    assert d0.required_racks == 2
    assert d0.verdict.rejects and not d1.verdict.rejects


def test_rackless_brokers_count_as_one_rack(view: ClusterView) -> None:
    d0, d1 = decide(request(("rackless", [0, 1])), view, rule(), T0)
    assert (d0.verdict, d0.isr_racks) == (Verdict.NOT_ENOUGH_RACKS, ("",))
    assert (d1.verdict, d1.isr_racks) == (Verdict.PASS, ("", "rack-a"))
    assert "''" in d0.message()


def test_departed_brokers_remembered_rack_counts() -> None:
    clock = Clock(T0)
    store = make_store(clock)
    # broker 4 (rack-c) leaves the broker list; the ISR still names it
    store.apply_metadata(
        snap([topic("orders", [part(0, (1, 4))], ORDERS_ID)], brokers=CLUSTER[:3]), full=True)
    d = one(request(("orders", [0])), store.view, rule())
    assert d.isr_racks == ("rack-a", "rack-c")
    assert d.verdict is Verdict.PASS


def test_operator_rack_for_a_rackless_broker_counts() -> None:
    store = ClusterViewStore(Clock(T0), operator_racks={5: "rack-x", 6: "rack-y"})
    store.apply_metadata(snap(TOPICS, brokers=CLUSTER), full=True)
    d = one(request(("rackless", [0])), store.view, rule())
    assert (d.verdict, d.isr_racks) == (Verdict.PASS, ("rack-x", "rack-y"))


# topic overrides


def test_required_racks_resolution() -> None:
    r = rule(
        default=1,
        topic_min_racks={"pay.eu.special": 1, "orders": 3},
        prefix_min_racks=(("pay.eu.", 3), ("pay.", 2)),
    )
    assert r.required_racks("orders") == 3            # exact
    assert r.required_racks("pay.eu.special") == 1    # exact beats a matching prefix
    assert r.required_racks("pay.eu.x") == 3          # longest prefix
    assert r.required_racks("pay.us") == 2            # shorter prefix
    assert r.required_racks("payments") == 1          # default
    assert r.required_racks("orders2") == 1           # exact means exact


def test_overrides_from_settings_longest_prefix_wins_in_any_order() -> None:
    settings = load_settings(
        {
            "topic_prefix_min_insync_racks": ["pay.=2", "pay.eu.=3", "p=4"],
            "topic_min_insync_racks": ["pay.eu.special=1"],
        },
        env={},
    )
    r = rack_rule(settings)
    assert r.required_racks("pay.eu.x") == 3
    assert r.required_racks("pay.us") == 2
    assert r.required_racks("pz") == 4
    assert r.required_racks("pay.eu.special") == 1
    assert r.required_racks("orders") == 1


def test_overrides_in_decisions(view: ClusterView) -> None:
    r = rule(
        default=1,
        topic_min_racks={"pay.eu.special": 1},
        prefix_min_racks=(("pay.eu.", 3), ("pay.", 2)),
    )
    req = request(("pay.eu.x", [0, 1]), ("pay.us", [0]), ("pay.eu.special", [0]),
                  ("orders", [0]))
    assert verdicts(decide(req, view, r, T0)) == [
        ("pay.eu.x", 0, Verdict.NOT_ENOUGH_RACKS),  # 2 racks < 3
        ("pay.eu.x", 1, Verdict.PASS),              # 3 racks
        ("pay.us", 0, Verdict.PASS),                # 2 racks >= 2
        ("pay.eu.special", 0, Verdict.PASS),        # exact 1: 1 rack is fine
        ("orders", 0, Verdict.PASS),                # default 1
    ]
    assert [d.required_racks for d in decide(req, view, r, T0)] == [3, 3, 2, 1, 1]


def test_rule_enabled() -> None:
    assert not RackRule().enabled
    assert not RackRule(topic_min_racks={"a": 1}, prefix_min_racks=(("b", 1),)).enabled
    assert RackRule(default_min_racks=2).enabled
    assert RackRule(topic_min_racks={"a": 2}).enabled
    assert RackRule(prefix_min_racks=(("b", 3),)).enabled
    assert sorted(RackRule(2, {"a": 3}, (("b", 4),)).all_values()) == [2, 3, 4]


# v13: topic ids


def test_topic_ids_resolve_through_the_view(view: ClusterView) -> None:
    req = request((ORDERS_ID, [0, 1]), (tid(999), [0]), version=13)
    d0, d1, d2 = decide(req, view, rule(), T0)
    assert (d0.topic_key, d0.topic, d0.verdict) == (ORDERS_ID, "orders", Verdict.NOT_ENOUGH_RACKS)
    assert (d1.topic, d1.verdict) == ("orders", Verdict.PASS)
    assert (d2.topic_key, d2.topic, d2.verdict) == (tid(999), None, Verdict.UNKNOWN)
    assert d0.message().startswith("NOT_ENOUGH_RACKS: orders-0:")
    assert unknown_partitions(req, view)
    assert not unknown_partitions(request((ORDERS_ID, [0, 3]), version=13), view)


def test_topic_id_overrides_apply_by_name(view: ClusterView) -> None:
    r = rule(default=1, topic_min_racks={"orders": 3})
    d = one(request((ORDERS_ID, [1]), version=13), view, r)
    assert (d.required_racks, d.verdict) == (3, Verdict.NOT_ENOUGH_RACKS)


@pytest.mark.parametrize("version", [3, 9, 12, 13])
def test_decide_on_a_walked_kafka_python_request(view: ClusterView, version: int) -> None:
    key: TopicKey = ORDERS_ID if version >= 13 else "orders"
    batch = make_batch(2)
    frame = kp_request(version, [(key, [(2, batch), (0, batch), (1, None)])])
    req = walk_produce_request(frame, parse_request_header(frame))
    assert [(d.topic, d.partition, d.verdict) for d in decide(req, view, rule(), T0)] == [
        ("orders", 2, Verdict.PASS),
        ("orders", 0, Verdict.NOT_ENOUGH_RACKS),
        ("orders", 1, Verdict.PASS),
    ]


def test_decisions_follow_request_order(view: ClusterView) -> None:
    req = request(("rackless", [1, 0]), ("orders", [3, 2]), ("nope", [5]))
    assert [(d.topic, d.partition) for d in decide(req, view, rule(), T0)] == [
        ("rackless", 1), ("rackless", 0), ("orders", 3), ("orders", 2), ("nope", 5)]


# the message on the wire


def test_not_enough_racks_message(view: ClusterView) -> None:
    d = one(request(("orders", [0])), view, rule(3))
    msg = d.message()
    assert msg.startswith("NOT_ENOUGH_RACKS:")
    assert "orders-0" in msg
    assert "rack-a" in msg
    assert "[1, 2]" in msg  # the ISR
    assert "1 rack(s)" in msg
    assert "min.insync.racks=3" in msg
    assert "\n" not in msg


def test_not_enough_racks_message_lists_every_rack_seen(view: ClusterView) -> None:
    d = one(request(("orders", [1])), view, rule(3))
    msg = d.message()
    assert "rack-a" in msg and "rack-b" in msg and "2 rack(s)" in msg
    assert "orders-1" in msg and "min.insync.racks=3" in msg


def test_message_for_an_unknown_topic_id_name() -> None:
    d = Decision(tid(5), None, 4, Verdict.NOT_ENOUGH_RACKS, 2, (7,), ("r",))
    assert d.message().startswith("NOT_ENOUGH_RACKS: ?-4:")


# the hot path's one-pass form


KNOWN_AND_NOT = [
    (("orders", [0, 1, 2, 3]),),
    (("orders", [0, 1]), ("rackless", [0, 1]), ("pay.eu.x", [1])),
    (("orders", [0, 9]),),
    (("nope", [0]),),
    (("nope", []),),
    (("orders", [1]), ("nope", [0])),
    (("pay.us", []),),
    ((ORDERS_ID, [0, 3]),),
    ((ORDERS_ID, [0]), (tid(999), [0])),
]


@pytest.mark.parametrize("topics", KNOWN_AND_NOT)
@pytest.mark.parametrize("r", [rule(), rule(1), rule(3, fail_open=True),
                               rule(1, prefix_min_racks=(("pay.", 2),))])
@pytest.mark.parametrize("now", [T0, T0 + MAX_AGE + 1])
def test_decide_known_is_decide_unless_something_is_unknown(
    view: ClusterView, topics: tuple[TopicSpec, ...], r: RackRule, now: float
) -> None:
    version = 13 if any(isinstance(k, bytes) for k, _ in topics) else 9
    req = request(*topics, version=version)
    known = decide_known(req, view, r, now)
    if unknown_partitions(req, view):
        assert known is None
    else:
        assert known == decide(req, view, r, now)


def test_rejecting_is_rejects() -> None:
    assert set(REJECTING) == {v for v in Verdict if v.rejects}


def test_verdicts_hash_by_identity_and_survive_a_round_trip() -> None:
    # Verdict uses the identity hash (cheaper than Enum's); lookups by a member got
    # any other way (by value, unpickled) must still find it
    counts = {v: i for i, v in enumerate(Verdict)}
    for i, v in enumerate(Verdict):
        assert counts[Verdict(v.value)] == i
        assert counts[pickle.loads(pickle.dumps(v))] == i
        assert hash(v) == hash(Verdict[v.name])
