"""Unit tests: ISR, leadership and rack kill/restore transitions of ClusterState."""

from __future__ import annotations

import pytest

from simulator.config import racked_brokers
from simulator.state import NO_LEADER, ClusterState, StateError


def make_state() -> ClusterState:
    state = ClusterState(racked_brokers(6, ["rack-a", "rack-b", "rack-c"]))
    state.create_topic("t", 3, 3, assignment=[[1, 2, 3], [2, 3, 4], [3, 4, 5]])
    return state


def test_create_topic_starts_with_full_isr_and_preferred_leader() -> None:
    state = make_state()
    p = state.require_partition("t", 1)
    assert p.isr == [2, 3, 4] and p.leader == 2 and p.leader_epoch == 1


def test_create_topic_errors() -> None:
    state = make_state()
    with pytest.raises(StateError) as exc:
        state.create_topic("t", 1, 1)
    assert exc.value.code == 36
    with pytest.raises(StateError) as exc:
        state.create_topic("u", 1, 7)
    assert exc.value.code == 38
    with pytest.raises(StateError) as exc:
        state.create_topic("v", 1, 1, {"min.insync.replicas": "0"})
    assert exc.value.code == 40


def test_set_isr_moves_leader_out_of_isr() -> None:
    state = make_state()
    p = state.set_isr("t", 0, [2, 3])
    assert p.leader == 2 and p.leader_epoch == 2
    with pytest.raises(StateError):
        state.set_isr("t", 0, [6])
    with pytest.raises(StateError):
        state.set_isr("t", 0, [])


def test_kill_rack_shrinks_isr_and_moves_leaders() -> None:
    state = make_state()
    for node in state.brokers_in_rack("rack-a"):  # brokers 1 and 4
        state.kill_broker(node)
    p0, p1, p2 = (state.require_partition("t", i) for i in range(3))
    assert p0.isr == [2, 3] and p0.leader == 2
    assert p1.isr == [2, 3] and p1.leader == 2
    assert p2.isr == [3, 5] and p2.leader == 3
    assert [b.node_id for b in state.live_brokers()] == [2, 3, 5, 6]
    assert state.coordinator() == 2


def test_restore_rejoins_isr_and_preferred_leader_returns() -> None:
    state = make_state()
    state.kill_broker(1)
    state.restore_broker(1)
    p0 = state.require_partition("t", 0)
    assert p0.isr == [1, 2, 3] and p0.leader == 1 and p0.leader_epoch == 3


def test_restore_without_preferred_election_keeps_leader() -> None:
    state = ClusterState(racked_brokers(3, ["a", "b", "c"]), preferred_leader_election=False)
    state.create_topic("t", 1, 3)
    first = state.require_partition("t", 0).leader
    state.kill_broker(first)
    leader = state.require_partition("t", 0).leader
    state.restore_broker(first)
    assert state.require_partition("t", 0).leader == leader


def test_last_isr_member_stays_and_partition_goes_offline() -> None:
    state = make_state()
    state.kill_broker(1)
    state.kill_broker(2)
    state.kill_broker(3)
    p0 = state.require_partition("t", 0)
    assert p0.leader == NO_LEADER and p0.isr == [3]
    # 1 comes back, but 3 held the last in-sync copy: no unclean election.
    state.restore_broker(1)
    assert p0.leader == NO_LEADER and p0.isr == [3]
    state.restore_broker(3)
    assert p0.leader == 3 and p0.isr == [1, 3]


def test_snapshot_reports_isr_racks() -> None:
    state = make_state()
    state.set_isr("t", 0, [1, 2])
    snap = state.snapshot()
    part = snap["topics"]["t"]["partitions"][0]
    assert part["isr_racks"] == ["rack-a", "rack-b"]
    assert snap["brokers"][0] == {"node_id": 1, "rack": "rack-a", "port": 0, "alive": True}


def test_topic_config_changes() -> None:
    state = make_state()
    assert state.min_insync_replicas("t") == 2
    state.alter_topic_configs("t", {"min.insync.replicas": "3"}, replace=False)
    assert state.min_insync_replicas("t") == 3
    state.alter_topic_configs("t", {"min.insync.replicas": None}, replace=False)
    assert state.min_insync_replicas("t") == 2


def test_new_topics_avoid_dead_brokers() -> None:
    state = make_state()
    for node in state.brokers_in_rack("rack-c"):
        state.kill_broker(node)
    topic = state.create_topic("u", 6, 2)
    for p in topic.partitions:
        assert not set(p.replicas) & {3, 6} and p.isr == p.replicas
    with pytest.raises(StateError):
        state.create_topic("w", 1, 5)
