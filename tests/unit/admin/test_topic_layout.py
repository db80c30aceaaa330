"""The config topic's layout (proxy.admin.topic_layout): how a new one is placed, what is
wrong with an old one, and the error a failed write gives.

Invariants under test: a new topic has a replica in every rack and min.insync.replicas=1;
an old topic's min.insync.replicas > 1 is a problem the proxy can fix, a rack without a
replica one it can only name; every failure message names the partition, its leader and
ISR with their racks, and what would make it writable.
"""

from __future__ import annotations

from proxy.admin.topic_layout import (
    AUTHORIZATION,
    NO_LEADER,
    NOT_ENOUGH_REPLICAS,
    TIMEOUT,
    UNAVAILABLE,
    WANTED_CONFIGS,
    PartitionLayout,
    assignment,
    explain_failure,
    problems,
    replication_factor,
)

SIX = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a", 5: "rack-b", 6: "rack-c"}
T = "__rackguard_configs"


def rack_of(node: int) -> str:
    return SIX.get(node, "")


def test_a_new_topic_has_a_replica_in_every_rack_and_takes_writes_with_one() -> None:
    assert WANTED_CONFIGS == {"cleanup.policy": "compact", "min.insync.replicas": "1"}
    assert replication_factor(SIX) == 3
    assert sorted(rack_of(n) for n in assignment(SIX)) == ["rack-a", "rack-b", "rack-c"]
    five = {n: f"r{n}" for n in range(1, 6)}
    assert replication_factor(five) == 5 and sorted(assignment(five)) == [1, 2, 3, 4, 5]
    two_racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    placed = assignment(two_racks)
    assert len(placed) == 3 and {two_racks[n] for n in placed} == {"a", "b"}
    assert assignment({1: "", 2: ""}) == [1, 2]  # no racks: as many as there are brokers
    assert assignment({}) == []


def test_an_old_topic_is_told_what_to_change() -> None:
    old = PartitionLayout(1, (1, 2, 3), (1, 2, 3), 2)
    found = problems(T, old, rack_of, {"rack-a", "rack-b", "rack-c"}, "b1:9092")
    assert len(found) == 1
    assert found[0].fix == {"min.insync.replicas": "1"}
    assert "min.insync.replicas=2" in found[0].text
    assert "--add-config min.insync.replicas=1" in found[0].text
    narrow = PartitionLayout(1, (1, 4, 2), (1, 4, 2), 1)
    found = problems(T, narrow, rack_of, {"rack-a", "rack-b", "rack-c"}, "b1:9092")
    assert len(found) == 1 and found[0].fix is None
    assert "none in rack-c" in found[0].text and "kafka-reassign-partitions" in found[0].text
    good = PartitionLayout(1, (1, 2, 3), (1,), 1)
    assert problems(T, good, rack_of, {"rack-a", "rack-b", "rack-c"}, "b1:9092") == []
    assert problems(T, PartitionLayout(1, (1,), (1,), 1), rack_of, {""}, "b") == []


def test_a_failed_write_says_why_and_what_would_make_it_writable() -> None:
    below = PartitionLayout(1, (1, 2, 3), (1,), 2)
    reason, text = explain_failure(T, "NotEnoughReplicasError", below, rack_of, {1, 4}, 15)
    assert reason == NOT_ENOUGH_REPLICAS
    assert f"partition {T}-0" in text and "ISR [1 (rack-a)]" in text
    assert "leader 1 (rack-a)" in text and "min.insync.replicas=2" in text
    assert "--add-config min.insync.replicas=1" in text

    leaderless = PartitionLayout(-1, (1, 2, 3), (2,), 1)
    reason, text = explain_failure(T, "KafkaTimeoutError", leaderless, rack_of, {1, 4}, 15)
    assert reason == NO_LEADER
    assert "has no leader" in text and "2 (rack-b)" in text and "is back" in text

    moving = PartitionLayout(3, (1, 2, 3), (2, 3), 1)
    reason, text = explain_failure(T, "KafkaTimeoutError", moving, rack_of, {2, 3}, 15)
    assert reason == TIMEOUT and "within 15 s" in text and "try again" in text

    reason, text = explain_failure(T, "TopicAuthorizationFailedError", None, rack_of, set(), 1)
    assert reason == AUTHORIZATION and "grant it WRITE" in text
    reason, text = explain_failure(T, "KafkaConnectionError", None, rack_of, set(), 1)
    assert reason == UNAVAILABLE and "no broker answered" in text
