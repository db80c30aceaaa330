"""proxy.ops.dimension_metrics through the rack-coverage collector: with rack dimensions
(region/zone) each partition's ISR is counted per dimension and set against the topic's
minimum of that dimension, per partition, per leader broker and in all; without them the
scrape is what it always was."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from proxy.cluster.view import ClusterViewStore
from proxy.enforce.dimensions import RackDimensions
from proxy.enforce.policy import RackRule
from proxy.ops.kip_metrics import PartitionSeries, RackCoverageCollector
from tests.unit._views import Clock, broker, part, snap, topic

CLUSTER = (
    broker(1, "eu-central-1/eu-central-1a"), broker(2, "eu-central-1/eu-central-1b"),
    broker(3, "eu-central-1/eu-central-1c"), broker(4, "eu-west-1/eu-west-1a"),
    broker(5, "eu-west-1/eu-west-1b"), broker(6, "eu-west-1/eu-west-1c"),
)
TOPICS = [topic("orders", [
    part(0, (1, 2, 3), leader=1),  # 3 zones, 1 region: under region=2
    part(1, (1, 4), leader=4),     # 2 zones, 2 regions: at region=2 and at zone=2
    part(2, (1, 2, 4), leader=2),  # 3 zones, 2 regions: at region, above zone
]), topic("logs", [part(0, (1, 2), leader=1)])]  # no minimum of its own: the default
DIMS = RackDimensions.parse("region/zone")


class Scrape:
    def __init__(self, rule: RackRule, series: PartitionSeries = "at_or_under") -> None:
        self.clock = Clock()
        self.store = ClusterViewStore(self.clock)
        self.store.apply_metadata(snap(TOPICS, brokers=CLUSTER), full=True)
        self.rule = rule
        self.series = series
        self.registry = CollectorRegistry()
        self.registry.register(self.collector())

    def collector(self) -> RackCoverageCollector:
        return RackCoverageCollector(lambda: self.store.view, lambda: self.rule, self.clock,
                                     self.series)

    def value(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def labels(self, name: str) -> set[tuple[str, ...]]:
        return {tuple(s.labels.values()) for m in self.registry.collect()
                for s in m.samples if s.name == name}


def rule(**kw: object) -> RackRule:
    return RackRule(dimensions=DIMS, topic_dimension_minimums={
        "orders": {"region": 2, "zone": 2}}, **kw)  # type: ignore[arg-type]


def test_each_partition_is_counted_per_dimension_against_its_minimum() -> None:
    s = Scrape(rule(), "all")
    count = "rackguard_isr_dimension_count"
    assert [s.value(count, topic="orders", partition=str(p), dimension="region")
            for p in range(3)] == [1, 2, 2]
    assert [s.value(count, topic="orders", partition=str(p), dimension="zone")
            for p in range(3)] == [3, 2, 3]
    under, at = "rackguard_under_min_dimension_isr", "rackguard_at_min_dimension_isr"
    assert s.value(under, topic="orders", partition="0", dimension="region") == 1
    assert s.value(under, topic="orders", partition="0", dimension="zone") == 0
    assert s.value(at, topic="orders", partition="1", dimension="region") == 1
    assert s.value(at, topic="orders", partition="1", dimension="zone") == 1
    assert s.value(at, topic="orders", partition="2", dimension="zone") == 0
    # logs has no minimum: counted (all mode), never under nor at
    assert s.value(count, topic="logs", partition="0", dimension="region") == 1
    assert s.value(under, topic="logs", partition="0", dimension="region") == 0
    assert s.value("rackguard_dimension_checked_partitions", dimension="region") == 3
    assert s.value("rackguard_dimension_checked_partitions", dimension="zone") == 3


def test_per_leader_broker_and_dimension_with_zeroes() -> None:
    s = Scrape(rule())
    under = "rackguard_under_min_dimension_isr_partitions"
    at = "rackguard_at_min_dimension_isr_partitions"
    assert s.value(under, broker="1", dimension="region") == 1
    assert s.value(at, broker="4", dimension="region") == 1
    assert s.value(at, broker="2", dimension="region") == 1
    assert s.value(at, broker="4", dimension="zone") == 1
    assert s.value(under, broker="6", dimension="zone") == 0
    assert len(s.labels(under)) == len(CLUSTER) * 2


def test_at_or_under_exports_only_those_pairs() -> None:
    s = Scrape(rule())
    assert s.labels("rackguard_isr_dimension_count") == {
        ("orders", "0", "region"), ("orders", "1", "region"), ("orders", "1", "zone"),
        ("orders", "2", "region")}
    assert Scrape(rule(), "none").labels("rackguard_isr_dimension_count") == set()


def test_the_default_minimum_and_a_rule_change_reach_the_next_scrape() -> None:
    s = Scrape(RackRule(dimensions=DIMS, dimension_minimums={"region": 2}))
    assert s.value("rackguard_under_min_dimension_isr", topic="logs", partition="0",
                   dimension="region") == 1
    s.rule = RackRule(dimensions=DIMS, dimension_minimums={"region": 1})
    assert s.value("rackguard_dimension_checked_partitions", dimension="region") == 0
    assert s.labels("rackguard_under_min_dimension_isr") == set()


def test_without_dimensions_the_scrape_is_unchanged() -> None:
    s = Scrape(RackRule(default_min_racks=2), "all")
    text = s.collector().exposition().decode()
    assert "dimension" not in text
    names = {m.name for m in s.registry.collect()}
    assert names == {"rackguard_under_min_rack_isr", "rackguard_at_min_rack_isr",
                     "rackguard_isr_rack_count", "rackguard_under_min_rack_isr_partitions",
                     "rackguard_at_min_rack_isr_partitions",
                     "rackguard_rack_checked_partitions", "rackguard_metadata_age_seconds"}
    # the single-dimension series stay as they are with dimensions too
    d = Scrape(rule(default_min_racks=2), "all")
    assert d.value("rackguard_isr_rack_count", topic="orders", partition="0") == 3
    assert d.value("rackguard_under_min_rack_isr", topic="orders", partition="0") == 0


@pytest.mark.parametrize("series", ["all", "at_or_under", "none"])
def test_direct_text_says_what_the_collector_says(series: PartitionSeries) -> None:
    s = Scrape(rule(), series)
    s.store.apply_metadata(snap([topic('we"ird', [part(0, (1, 4), leader=-1)])],
                                brokers=CLUSTER), full=False)
    s.rule = RackRule(dimensions=DIMS, dimension_minimums={"region": 3})
    c = s.collector()
    expected = {(x.name, tuple(sorted(x.labels.items())), x.value)
                for m in c.collect() for x in m.samples}
    got = {(x.name, tuple(sorted(x.labels.items())), x.value)
           for m in text_string_to_metric_families(c.exposition().decode())
           for x in m.samples}
    assert got == expected
    assert ("rackguard_under_min_dimension_isr_partitions",
            (("broker", "none"), ("dimension", "region")), 1.0) in expected
