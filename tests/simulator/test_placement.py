"""Unit tests: rack-aware replica placement."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.placement import assign_replicas, rack_alternated
from simulator.threaded import ThreadedCluster

SIX = [(1, "a"), (2, "b"), (3, "c"), (4, "a"), (5, "b"), (6, "c")]


def test_rack_alternated_interleaves_racks() -> None:
    assert rack_alternated([(4, "a"), (1, "a"), (2, "b"), (3, "c")]) == [1, 2, 3, 4]


def test_every_partition_spans_three_racks() -> None:
    racks = dict(SIX)
    assignment = assign_replicas(SIX, 12, 3)
    for replicas in assignment:
        assert len(set(replicas)) == 3
        assert {racks[r] for r in replicas} == {"a", "b", "c"}


def test_leaders_rotate_over_brokers() -> None:
    leaders = [r[0] for r in assign_replicas(SIX, 6, 3)]
    assert sorted(leaders) == [1, 2, 3, 4, 5, 6]


def test_rackless_brokers_count_as_one_rack() -> None:
    assignment = assign_replicas([(1, None), (2, None), (3, "x")], 3, 2)
    for replicas in assignment:
        assert 3 in replicas  # the only way to span two racks


def test_replication_factor_too_large() -> None:
    with pytest.raises(ValueError):
        assign_replicas(SIX, 1, 7)


@given(
    racks=st.lists(st.sampled_from(["a", "b", "c", "d", None]), min_size=1, max_size=9),
    partitions=st.integers(1, 20),
    data=st.data(),
)
def test_placement_properties(
    racks: list[str | None], partitions: int, data: st.DataObject
) -> None:
    brokers = [(i + 1, r) for i, r in enumerate(racks)]
    rf = data.draw(st.integers(1, len(brokers)))
    rack_of = {n: r or "" for n, r in brokers}
    assignment = assign_replicas(brokers, partitions, rf)
    assert len(assignment) == partitions
    distinct_racks = len(set(rack_of.values()))
    for replicas in assignment:
        assert len(replicas) == rf == len(set(replicas))
        assert len({rack_of[r] for r in replicas}) == min(rf, distinct_racks)


def test_create_partitions_through_the_admin_client(
    threaded: ThreadedCluster,
) -> None:
    from kafka.admin import KafkaAdminClient, NewPartitions

    admin = KafkaAdminClient(bootstrap_servers=threaded.bootstrap_servers)
    try:
        admin.create_partitions({"t": NewPartitions(5, [[1, 2], [3, 4]])})
        assert threaded.partition_info("t", 3)["replicas"] == [1, 2]
        assert threaded.partition_info("t", 4)["replicas"] == [3, 4]
    finally:
        admin.close()
