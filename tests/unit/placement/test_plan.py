"""The --fix planner: targets reached with the fewest moves (checked by brute force)."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter

import pytest

from proxy.placement.kip36 import PlacementError
from proxy.placement.model import PartitionReplicas as P
from proxy.placement.model import replica_racks
from proxy.placement.plan import plan_fix, target_racks

RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def test_target_is_n_plus_one_where_replicas_and_racks_allow() -> None:
    assert target_racks(2, 3, 3, spare=True) == 3
    assert target_racks(2, 2, 3, spare=True) == 2
    assert target_racks(2, 3, 2, spare=True) == 2
    assert target_racks(2, 3, 3, spare=False) == 2


def test_fix_keeps_the_leader_and_moves_one_follower_per_missing_rack() -> None:
    topics = {"t": {0: P((1, 2, 3)), 1: P((3, 4, 1)), 2: P((1, 3, 5))}}
    plan = plan_fix(RACKS, topics, lambda _t: 2)
    assert [(r.partition, r.moves) for r in plan.reassignments] == [(0, 1), (1, 1)]
    for r in plan.reassignments:
        assert r.after[0] == r.before[0]
        assert r.racks_after == 3
    assert plan.moves == 2


def test_no_spare_stops_at_n() -> None:
    topics = {"t": {0: P((1, 2, 3)), 1: P((1, 2, 4))}}
    assert plan_fix(RACKS, topics, lambda _t: 2, spare=False).reassignments == ()


def test_reassignment_and_rollback_files() -> None:
    topics = {"t": {0: P((1, 2, 3))}}
    plan = plan_fix(RACKS, topics, lambda _t: 2, sizes={("t", 0): 1000})
    doc = json.loads(json.dumps(plan.reassignment_json()))
    assert doc["version"] == 1
    (entry,) = doc["partitions"]
    assert set(entry) == {"topic", "partition", "replicas"}
    assert entry["topic"] == "t" and entry["partition"] == 0
    assert entry["replicas"][0] == 1 and len(entry["replicas"]) == 3
    assert plan.rollback_json() == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2, 3]}]}
    assert plan.bytes_to_move == 1000


def test_replica_on_a_gone_broker_is_moved_first_even_the_leader() -> None:
    topics = {"t": {0: P((9, 1, 3))}}
    (r,) = plan_fix(RACKS, topics, lambda _t: 2).reassignments
    assert r.after[1:] == (1, 3) and r.after[0] in (5, 6)


def test_moves_spread_over_the_least_loaded_brokers() -> None:
    topics = {"t": {i: P((1, 2, 3)) for i in range(4)}}
    plan = plan_fix(RACKS, topics, lambda _t: 2)
    added = Counter(b for r in plan.reassignments for b in set(r.after) - set(r.before))
    assert added == {5: 2, 6: 2}
    removed = Counter(b for r in plan.reassignments for b in set(r.before) - set(r.after))
    assert removed == {2: 4}  # the follower sharing the leader's rack, never the leader


def test_impossible_requests_are_refused() -> None:
    with pytest.raises(PlacementError, match="min.insync.racks 4 .* more than the 3 racks"):
        plan_fix(RACKS, {"t": {0: P((1, 3, 5))}}, lambda _t: 4)
    plan = plan_fix(RACKS, {"t": {0: P((1, 2))}}, lambda _t: 3)
    assert [u.partition for u in plan.unfixable] == [0]
    assert "raise the replication factor" in plan.unfixable[0].reason
    assert plan.reassignments == ()


def _brute_force_moves(racks: dict[int, str | None], replicas: tuple[int, ...],
                       goal: int) -> int:
    best = len(replicas)
    for chosen in itertools.combinations(sorted(set(racks) | set(replicas)), len(replicas)):
        if len(replica_racks(racks, chosen)) >= goal:
            best = min(best, len(set(chosen) - set(replicas)))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_moves_are_minimal_against_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    brokers = rng.randint(3, 7)
    rack_count = rng.randint(2, min(4, brokers))
    racks: dict[int, str | None] = {b: f"r{b % rack_count}" for b in range(brokers)}
    n = rng.randint(1, rack_count)
    topics = {}
    for t in range(2):
        rf = rng.randint(n, brokers)
        topics[f"t{t}"] = {i: P(tuple(rng.sample(range(brokers + 1), rf)))  # broker N: gone
                           for i in range(5)}
    plan = plan_fix(racks, topics, lambda _t: n)
    moved = {(r.topic, r.partition): r for r in plan.reassignments}
    for name, partitions in topics.items():
        for index, p in partitions.items():
            goal = target_racks(n, len(p.replicas), rack_count, spare=True)
            r = moved.get((name, index))
            after = r.after if r else p.replicas
            assert len(replica_racks(racks, after)) >= goal
            assert len(set(after)) == len(after) and set(after) <= set(racks) | set(p.replicas)
            assert (r.moves if r else 0) == _brute_force_moves(racks, p.replicas, goal)
            if r and p.replicas[0] in racks:
                assert r.after[0] == p.replicas[0]
