"""proxy.placement.metrics: placement figures read from the view at scrape time."""

from __future__ import annotations

from proxy.cluster.view import ClusterViewStore
from proxy.enforce.policy import RackRule
from proxy.placement.metrics import PlacementCollector
from tests.prometheus_text import Samples, parse_samples
from tests.unit._views import Clock, broker, part, snap, topic

SIX = (broker(1, "rack-a"), broker(2, "rack-b"), broker(3, "rack-c"),
       broker(4, "rack-a"), broker(5, "rack-b"), broker(6, "rack-c"))


def samples(collector: PlacementCollector) -> Samples:
    return parse_samples(collector.exposition().decode())


def _store() -> ClusterViewStore:
    store = ClusterViewStore(Clock())
    store.apply_metadata(snap([
        topic("orders", [
            part(0, (1, 2, 3), replicas=(1, 2, 3)),   # 3 racks: healthy at N=2
            part(1, (2,), replicas=(2, 3, 5)),        # b, c: fragile (ISR irrelevant)
            part(2, (1, 4), replicas=(1, 4)),         # a only: unsatisfiable
        ]),
        topic("logs", [part(0, (4, 5), replicas=(4, 5), leader=-1)]),
    ], brokers=SIX), full=True)
    return store


def test_per_topic_counts_for_checked_topics_and_leaders_per_rack() -> None:
    store = _store()
    rule = RackRule(default_min_racks=1, topic_min_racks={"orders": 2})
    got = samples(PlacementCollector(lambda: store.view, lambda: rule))
    assert got[("rackguard_placement_unsatisfiable_partitions", (("topic", "orders"),))] == 1
    assert got[("rackguard_placement_fragile_partitions", (("topic", "orders"),))] == 1
    assert not any(labels == (("topic", "logs"),) for _, labels in got)  # N = 1: unchecked
    leaders = {dict(labels)["rack"]: v for (name, labels), v in got.items()
               if name == "rackguard_placement_leaders"}
    assert leaders == {"rack-a": 2, "rack-b": 1, "rack-c": 0, "none": 1}


def test_follows_the_current_view_and_rule_and_reuses_unchanged_figures() -> None:
    store = _store()
    rule = RackRule(default_min_racks=3)
    collector = PlacementCollector(lambda: store.view, lambda: rule)
    first = collector.figures()
    assert collector.figures() is first
    assert first.per_topic == {"orders": (2, 1), "logs": (1, 0)}
    store.apply_metadata(snap([topic("orders", [part(0, (1, 2, 3), replicas=(1, 2, 3))])],
                              brokers=SIX), full=True)
    assert collector.figures().per_topic == {"orders": (0, 1)}
    rule = RackRule(default_min_racks=1)
    assert collector.figures().per_topic == {}
