"""The placement audit on constructed clusters."""

from __future__ import annotations

from proxy.placement.audit import Status, audit, classify
from proxy.placement.model import PartitionReplicas as P

RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def test_classify_against_the_required_racks() -> None:
    assert classify(1, 2) is Status.UNSATISFIABLE
    assert classify(2, 2) is Status.FRAGILE
    assert classify(3, 2) is Status.HEALTHY


def test_unsatisfiable_fragile_and_healthy_partitions_worst_topic_first() -> None:
    topics = {
        "good": {0: P((1, 3, 5), leader=1), 1: P((3, 5, 1), leader=3)},
        "bad": {0: P((1, 2, 3), leader=1),   # a, b: fragile at N=2
                1: P((1, 2), leader=2),      # a only: unsatisfiable
                2: P((3, 4), leader=4)},     # b only: unsatisfiable
        "meh": {0: P((5, 6, 1), leader=5)},  # c, a: fragile
    }
    result = audit(RACKS, topics, lambda _t: 2)
    assert [t.topic for t in result.topics] == ["bad", "meh", "good"]
    bad = result.topics[0]
    assert (bad.unsatisfiable, bad.fragile, bad.healthy) == (2, 1, 0)
    assert [(f.partition, f.status, f.racks) for f in bad.findings] == [
        (0, Status.FRAGILE, ("a", "b")), (1, Status.UNSATISFIABLE, ("a",)),
        (2, Status.UNSATISFIABLE, ("b",))]
    assert bad.replicas_per_rack == {"a": 4, "b": 3}
    assert bad.leaders_per_rack == {"a": 2, "b": 1}
    assert result.topics[2].findings == ()
    assert (result.partitions, result.unsatisfiable, result.fragile) == (6, 2, 2)
    assert result.leaders_per_broker == {1: 2, 2: 1, 3: 1, 4: 1, 5: 1, 6: 0}
    assert result.leaders_per_rack == {"a": 3, "b": 2, "c": 1}
    assert result.replicas_per_broker[1] == 5


def test_required_racks_per_topic() -> None:
    topics = {"t1": {0: P((1, 3, 5))}, "t3": {0: P((1, 3, 5))}}
    result = audit(RACKS, topics, {"t1": 1, "t3": 3}.__getitem__)
    by_name = {t.topic: t for t in result.topics}
    assert (by_name["t1"].healthy, by_name["t3"].fragile) == (1, 1)


def test_rackless_brokers_count_as_one_rack() -> None:
    racks = {1: None, 2: None, 3: "b"}
    topics = {"t": {0: P((1, 2), leader=1), 1: P((1, 3), leader=3)}}
    result = audit(racks, topics, lambda _t: 2)
    t = result.topics[0]
    assert [(f.partition, f.status, f.racks) for f in t.findings] == [
        (0, Status.UNSATISFIABLE, ("",)), (1, Status.FRAGILE, ("", "b"))]
    assert result.to_json()["brokers"] == {"1": "(none)", "2": "(none)", "3": "b"}
    assert result.leaders_per_rack == {"": 1, "b": 1}


def test_offline_and_unknown_replicas() -> None:
    # broker 9 left the cluster: its replica counts no rack; offline replicas still count
    topics = {"t": {0: P((1, 9), leader=1, offline=(9,)),
                    1: P((1, 3, 5), leader=-1, offline=(5,))}}
    result = audit(RACKS, topics, lambda _t: 2)
    t = result.topics[0]
    assert t.unsatisfiable == 1 and t.fragile == 0 and t.offline_replicas == 2
    assert t.findings[0].unknown == (9,) and t.findings[0].offline == (9,)
    assert result.leaderless == 1
    js = result.to_json()
    assert js["topics"][0]["partitions_at_risk"][0]["unknown_brokers"] == [9]
