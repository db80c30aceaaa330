"""proxy.ops.kip_metrics: KIP-1290's rack-coverage metrics, read from the view at
scrape time."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from proxy.cluster.view import ClusterViewStore
from proxy.enforce.policy import RackRule
from proxy.ops.kip_metrics import PartitionSeries, RackCoverageCollector
from tests.unit._views import Clock, broker, part, snap, topic

SIX = (broker(1, "rack-a"), broker(2, "rack-b"), broker(3, "rack-c"),
       broker(4, "rack-a"), broker(5, "rack-b"), broker(6, "rack-c"))


class Scrape:
    def __init__(self, rule: RackRule, series: PartitionSeries = "at_or_under") -> None:
        self.clock = Clock()
        self.store = ClusterViewStore(self.clock)
        self.rule = rule
        self.registry = CollectorRegistry()
        self.registry.register(RackCoverageCollector(
            lambda: self.store.view, lambda: self.rule, self.clock, series))

    def value(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def names(self, name: str) -> set[tuple[str, ...]]:
        """Label values of every sample of one metric."""
        return {tuple(s.labels.values()) for m in self.registry.collect()
                for s in m.samples if s.name == name}


@pytest.fixture
def outage() -> Scrape:
    """orders (min 2): p0 spans 3 racks, p1 2 racks (at), p2 1 rack (under, leader 4)."""
    s = Scrape(RackRule(default_min_racks=2))
    s.store.apply_metadata(snap([topic("orders", [
        part(0, (1, 2, 3), replicas=(1, 2, 3)),
        part(1, (2, 3), replicas=(2, 3, 4)),
        part(2, (4, 1), replicas=(4, 1, 2)),
    ])], brokers=SIX), full=True)
    return s


def test_under_and_at_per_partition(outage: Scrape) -> None:
    s = outage
    assert s.value("rackguard_under_min_rack_isr", topic="orders", partition="2") == 1
    assert s.value("rackguard_at_min_rack_isr", topic="orders", partition="2") == 0
    assert s.value("rackguard_isr_rack_count", topic="orders", partition="2") == 1
    assert s.value("rackguard_under_min_rack_isr", topic="orders", partition="1") == 0
    assert s.value("rackguard_at_min_rack_isr", topic="orders", partition="1") == 1
    assert s.value("rackguard_isr_rack_count", topic="orders", partition="1") == 2
    # p0 spans more racks than required: at_or_under exports nothing for it
    assert s.value("rackguard_isr_rack_count", topic="orders", partition="0") is None
    assert s.value("rackguard_rack_checked_partitions") == 3


def test_per_leader_broker_counts_include_zeroes(outage: Scrape) -> None:
    s = outage
    assert s.value("rackguard_under_min_rack_isr_partitions", broker="4") == 1
    assert s.value("rackguard_at_min_rack_isr_partitions", broker="2") == 1
    for b in ("1", "3", "5", "6"):
        assert s.value("rackguard_under_min_rack_isr_partitions", broker=b) == 0
        assert s.value("rackguard_at_min_rack_isr_partitions", broker=b) == 0
    assert s.value("rackguard_under_min_rack_isr_partitions", broker="2") == 0
    assert s.value("rackguard_at_min_rack_isr_partitions", broker="4") == 0


def test_the_scrape_follows_the_current_view(outage: Scrape) -> None:
    s = outage
    s.store.apply_metadata(snap([topic("orders", [
        part(0, (1, 2, 3)), part(1, (2, 3, 4)), part(2, (4, 2, 3))])], brokers=SIX), full=True)
    assert s.names("rackguard_under_min_rack_isr") == set()
    assert s.value("rackguard_under_min_rack_isr_partitions", broker="4") == 0
    assert s.value("rackguard_at_min_rack_isr_partitions", broker="2") == 0


def test_a_rule_change_applies_to_the_next_scrape(outage: Scrape) -> None:
    s = outage
    s.rule = RackRule(default_min_racks=3)
    assert s.value("rackguard_under_min_rack_isr", topic="orders", partition="1") == 1
    assert s.value("rackguard_at_min_rack_isr", topic="orders", partition="0") == 1
    assert s.value("rackguard_under_min_rack_isr_partitions", broker="2") == 1


def test_required_one_is_neither_under_nor_at() -> None:
    s = Scrape(RackRule(default_min_racks=1, topic_min_racks={"orders": 2}), "all")
    s.store.apply_metadata(snap([
        topic("logs", [part(0, (1, 4)), part(1, ())]),
        topic("orders", [part(0, (1, 4))]),
    ], brokers=SIX), full=True)
    for p in ("0", "1"):
        assert s.value("rackguard_under_min_rack_isr", topic="logs", partition=p) == 0
        assert s.value("rackguard_at_min_rack_isr", topic="logs", partition=p) == 0
    assert s.value("rackguard_isr_rack_count", topic="logs", partition="0") == 1
    assert s.value("rackguard_isr_rack_count", topic="logs", partition="1") == 0
    assert s.value("rackguard_under_min_rack_isr", topic="orders", partition="0") == 1
    assert s.value("rackguard_under_min_rack_isr_partitions", broker="1") == 1  # orders only
    assert s.value("rackguard_rack_checked_partitions") == 1


def test_all_mode_exports_every_partition_and_none_mode_none(outage: Scrape) -> None:
    every = Scrape(RackRule(default_min_racks=2), "all")
    none = Scrape(RackRule(default_min_racks=2), "none")
    for s in (every, none):
        s.store = outage.store
    assert every.names("rackguard_isr_rack_count") == {
        ("orders", "0"), ("orders", "1"), ("orders", "2")}
    assert every.value("rackguard_isr_rack_count", topic="orders", partition="0") == 3
    assert none.names("rackguard_isr_rack_count") == set()
    assert none.names("rackguard_under_min_rack_isr") == set()
    assert none.value("rackguard_under_min_rack_isr_partitions", broker="4") == 1


def test_leaderless_and_unknown_members() -> None:
    s = Scrape(RackRule(default_min_racks=2))
    # p0 has no leader; p1's ISR names node 9, never seen in any broker list
    s.store.apply_metadata(snap([topic("t", [
        part(0, (), leader=-1), part(1, (1, 9))])], brokers=SIX), full=True)
    assert s.value("rackguard_under_min_rack_isr_partitions", broker="none") == 1
    assert s.value("rackguard_isr_rack_count", topic="t", partition="0") == 0
    assert s.value("rackguard_isr_rack_count", topic="t", partition="1") == 1
    assert s.value("rackguard_under_min_rack_isr_partitions", broker="1") == 1


def test_metadata_age(outage: Scrape) -> None:
    s = outage
    assert s.value("rackguard_metadata_age_seconds") == 0
    s.clock.t += 7.5
    assert s.value("rackguard_metadata_age_seconds") == 7.5
    empty = Scrape(RackRule(default_min_racks=2))
    age = empty.value("rackguard_metadata_age_seconds")
    assert age is not None and math.isinf(age)


def test_exposition_and_name_clash_detection(outage: Scrape) -> None:
    text = generate_latest(outage.registry).decode()
    assert 'rackguard_under_min_rack_isr{partition="2",topic="orders"} 1.0' in text
    assert "# TYPE rackguard_under_min_rack_isr_partitions gauge" in text
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Gauge("rackguard_isr_rack_count", "clash", registry=outage.registry)


def samples_of_collect(s: Scrape, series: PartitionSeries) -> set[tuple[str, tuple, float]]:
    c = RackCoverageCollector(lambda: s.store.view, lambda: s.rule, s.clock, series)
    return {(x.name, tuple(sorted(x.labels.items())), x.value)
            for m in c.collect() for x in m.samples}


def samples_of_text(s: Scrape, series: PartitionSeries) -> set[tuple[str, tuple, float]]:
    c = RackCoverageCollector(lambda: s.store.view, lambda: s.rule, s.clock, series)
    text = c.exposition().decode()
    return {(x.name, tuple(sorted(x.labels.items())), x.value)
            for m in text_string_to_metric_families(text) for x in m.samples}


@pytest.mark.parametrize("series", ["all", "at_or_under", "none"])
def test_direct_text_says_what_the_collector_says(outage: Scrape, series: PartitionSeries) -> None:
    outage.store.apply_metadata(snap([topic('we"ird\\name', [part(0, (1, 4), leader=-1)])],
                                     brokers=SIX), full=False)
    outage.clock.t += 1.25
    expected = samples_of_collect(outage, series)
    assert samples_of_text(outage, series) == expected
    assert ("rackguard_metadata_age_seconds", (), 1.25) in expected
    if series != "none":
        assert ("rackguard_under_min_rack_isr",
                (("partition", "0"), ("topic", 'we"ird\\name')), 1.0) in expected


def test_direct_text_of_an_empty_view_is_valid() -> None:
    s = Scrape(RackRule(default_min_racks=2))
    text = RackCoverageCollector(lambda: s.store.view, lambda: s.rule, s.clock).exposition()
    families = {m.name: m for m in text_string_to_metric_families(text.decode())}
    assert families["rackguard_metadata_age_seconds"].samples[0].value == math.inf
    assert families["rackguard_under_min_rack_isr"].samples == []
    assert families["rackguard_under_min_rack_isr"].type == "gauge"
