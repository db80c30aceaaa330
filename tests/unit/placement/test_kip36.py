"""KIP-36 assignment equals Kafka's AdminUtils.assignReplicasToBrokers.

Exact cases: the expectations of Kafka's own tests (AdminRackAwareTest,
AdminTest.testReplicaAssignment, AdminUtilsTest) and cases computed by hand
from Kafka's algorithm for the configurations of its other rack-aware tests
(uneven racks, more replicas than racks, a fixed start index of 2). Kafka's
distribution checks (every partition on min(RF, racks) racks, leaders and
replicas even where its tests demand it) run over every start index.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.placement.kip36 import PlacementError, assign, rack_alternated

# AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
RACK_MAP = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
# the 6-broker map most of Kafka's rack-aware tests use
EVEN = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
UNEVEN_RACKS = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
MORE_REPLICAS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
SKIP_BROKER = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}


def test_rack_alternated_list_as_in_kafkas_test() -> None:
    assert rack_alternated(RACK_MAP) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({k: v for k, v in RACK_MAP.items() if k != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_assignment_as_in_kafkas_test() -> None:
    assert assign(RACK_MAP, 7, 3, start_index=0) == {
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2),
        4: (4, 2, 0), 5: (2, 0, 3), 6: (0, 4, 2)}


def test_rack_unaware_assignment_as_in_kafkas_admin_test() -> None:
    assert assign(dict.fromkeys(range(5)), 10, 3, start_index=0) == {
        0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
        5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2)}


def test_rack_unaware_three_brokers_as_in_kafkas_admin_utils_test() -> None:
    assert assign(dict.fromkeys(range(3)), 6, 3, start_index=0) == {
        0: (0, 1, 2), 1: (1, 2, 0), 2: (2, 0, 1), 3: (0, 2, 1), 4: (1, 0, 2), 5: (2, 1, 0)}


def test_uneven_racks_one_rack_with_a_single_broker() -> None:
    # list [0, 2, 3, 1, 4, 5]; the follower shift grows at partition 6
    assert rack_alternated(UNEVEN_RACKS) == [0, 2, 3, 1, 4, 5]
    assert assign(UNEVEN_RACKS, 8, 3, start_index=0) == {
        0: (0, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2), 3: (1, 4, 2),
        4: (4, 5, 2), 5: (5, 2, 3), 6: (0, 4, 2), 7: (2, 5, 3)}


def test_more_replicas_than_racks_every_rack_first_then_round_robin() -> None:
    assert rack_alternated(MORE_REPLICAS) == [0, 1, 3, 2, 4, 5]
    assert assign(MORE_REPLICAS, 2, 5, start_index=0) == {
        0: (0, 1, 3, 2, 4), 1: (1, 3, 0, 2, 4)}


def test_fixed_start_index_sets_leader_position_and_shift() -> None:
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned: fixedStartIndex = 2
    assert assign(SKIP_BROKER, 6, 4, start_index=2) == {
        0: (2, 0, 1, 3), 1: (3, 1, 2, 4), 2: (4, 2, 1, 3),
        3: (0, 1, 2, 3), 4: (1, 4, 2, 3), 5: (2, 4, 1, 3)}


def test_start_partition_numbers_the_new_partitions() -> None:
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    out = assign(racks, 12, 2, start_index=0, start_partition=12)
    assert sorted(out) == list(range(12, 24))
    # partition 12 wraps the 6-broker list twice: leader at position 0, shift 2
    assert out[12][0] == rack_alternated(racks)[0]


def _racks_of(assignment: dict[int, tuple[int, ...]], racks: dict[int, str]) -> list[int]:
    return [len({racks[b] for b in replicas}) for replicas in assignment.values()]


@pytest.mark.parametrize("racks,partitions,rf,leaders_even,replicas_even", [
    (EVEN, 6, 3, True, True),           # testAssignmentWithRackAware
    (EVEN, 13, 3, False, False),        # ...WithUnevenReplicas
    (UNEVEN_RACKS, 12, 3, True, False),  # ...WithUnevenRacks
    (EVEN, 12, 2, True, True),          # testAssignmentWith2ReplicasRackAware
    (EVEN, 6, 2, True, True),           # ...With6Partitions
    ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, True, True),
    ({**EVEN, 6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"},
     96, 3, True, True),                # testLargeNumberPartitionsAssignment
])
def test_kafkas_distribution_checks_hold_for_every_start_index(
    racks: dict[int, str], partitions: int, rf: int, leaders_even: bool, replicas_even: bool,
) -> None:
    for start in range(len(racks)):
        out = assign(racks, partitions, rf, start_index=start)
        assert all(len(set(r)) == rf for r in out.values())
        assert _racks_of(out, racks) == [rf] * partitions
        if leaders_even:
            leaders = Counter(r[0] for r in out.values())
            assert set(leaders.values()) == {partitions // len(racks)}
        if replicas_even:
            replicas = Counter(b for r in out.values() for b in r)
            assert set(replicas.values()) == {partitions * rf // len(racks)}


def test_more_and_fewer_replicas_than_racks_and_a_single_rack() -> None:
    for start in range(6):
        assert _racks_of(assign(MORE_REPLICAS, 6, 5, start_index=start), MORE_REPLICAS) \
            == [3] * 6
        assert _racks_of(assign(MORE_REPLICAS, 6, 2, start_index=start), MORE_REPLICAS) \
            == [2] * 6
        single = dict.fromkeys(range(6), "rack1")
        out = assign(single, 6, 3, start_index=start)
        assert Counter(r[0] for r in out.values()) == Counter(range(6))


def test_random_start_draws_from_the_injected_generator() -> None:
    a = assign(EVEN, 12, 3, rng=random.Random(7))
    b = assign(EVEN, 12, 3, rng=random.Random(7))
    assert a == b
    assert _racks_of(a, EVEN) == [3] * 12


@pytest.mark.parametrize("racks,partitions,rf,message", [
    (EVEN, 0, 3, "partitions must be larger than 0"),
    (EVEN, 3, 0, "replication factor must be larger than 0"),
    (EVEN, 3, 7, "replication factor 7 larger than the 6 available brokers"),
    ({0: "a", 1: None, 2: "c"}, 3, 2, "not all brokers have rack information"),
])
def test_impossible_requests_are_refused(
    racks: dict[int, str | None], partitions: int, rf: int, message: str,
) -> None:
    with pytest.raises(PlacementError, match=message):
        assign(racks, partitions, rf, start_index=0)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_property_valid_assignment_racks_maximally_spread(data: st.DataObject) -> None:
    brokers = data.draw(st.integers(3, 12))
    rack_count = data.draw(st.integers(1, min(5, brokers)))
    # every rack gets one broker, the rest land anywhere: uneven racks
    extra = data.draw(st.lists(st.integers(0, rack_count - 1),
                               min_size=brokers - rack_count, max_size=brokers - rack_count))
    ids = data.draw(st.permutations(range(brokers * 2)))[:brokers]
    racks = {ids[i]: f"r{i if i < rack_count else extra[i - rack_count]}"
             for i in range(brokers)}
    rf = data.draw(st.integers(1, brokers))
    partitions = data.draw(st.integers(1, 30))
    start = data.draw(st.integers(0, brokers - 1))
    out = assign(racks, partitions, rf, start_index=start)
    assert sorted(out) == list(range(partitions))
    for replicas in out.values():
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= set(racks)
        assert len({racks[b] for b in replicas}) == min(rf, rack_count)
