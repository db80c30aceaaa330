"""proxy.enforce.policy with rack dimensions: a stretch cluster whose racks say region
and zone (``eu-central-1/eu-central-1a``); a topic needing 2 regions and 2 zones is
refused NOT_ENOUGH_RACKS naming the dimension that falls short, even where its ISR spans
enough racks; without dimensions (the default) the rule is the single-dimension one,
decision for decision; the settings reach the rule."""

from __future__ import annotations

import pytest

from proxy.app import rack_rule
from proxy.cluster.view import ClusterView, ClusterViewStore
from proxy.enforce.dimensions import RackDimensions
from proxy.enforce.policy import RackRule, Verdict, decide
from proxy.settings import SettingsError, load_settings
from tests.unit._views import Clock, broker, part, snap, topic
from tests.unit.enforce.test_policy import request

T0 = 1000.0
CLUSTER = (
    broker(1, "eu-central-1/eu-central-1a"), broker(2, "eu-central-1/eu-central-1b"),
    broker(3, "eu-central-1/eu-central-1c"), broker(4, "eu-west-1/eu-west-1a"),
    broker(5, "eu-west-1/eu-west-1b"), broker(6, "eu-west-1/eu-west-1c"),
)
TOPICS = [topic("orders", [
    part(0, (1, 2, 3)),  # 3 racks, 1 region
    part(1, (1, 4)),     # 2 racks, 2 regions, 2 zones
    part(2, (1, 2, 4)),  # 3 racks, 2 regions, 3 zones
    part(3, (1,)),       # 1 rack
]), topic("logs", [part(0, (1, 2))])]
DIMS = RackDimensions.parse("region/zone")


@pytest.fixture
def view() -> ClusterView:
    store = ClusterViewStore(Clock(T0))
    store.apply_metadata(snap(TOPICS, brokers=CLUSTER), full=True)
    return store.view


def test_a_region_short_isr_is_refused_naming_the_region(view: ClusterView) -> None:
    rule = RackRule(default_min_racks=2, dimensions=DIMS,
                    topic_dimension_minimums={"orders": {"region": 2, "zone": 2}})
    got = decide(request(("orders", [0, 1, 2, 3]), ("logs", [0])), view, rule, T0)
    assert [d.verdict for d in got] == [Verdict.NOT_ENOUGH_RACKS, Verdict.PASS, Verdict.PASS,
                                        Verdict.NOT_ENOUGH_RACKS, Verdict.PASS]
    assert got[0].message() == (
        "NOT_ENOUGH_RACKS: orders-0: in-sync replicas [1, 2, 3] span 1 region(s) "
        "[eu-central-1], min.insync.racks.region=2")
    assert got[3].message().startswith("NOT_ENOUGH_RACKS: orders-3: in-sync replicas [1] "
                                       "span 1 rack(s)")  # the rack count comes first


def test_zone_minimum_and_the_default_for_every_topic(view: ClusterView) -> None:
    rule = RackRule(dimensions=DIMS, dimension_minimums={"zone": 3})
    assert rule.enabled
    got = decide(request(("orders", [1, 2])), view, rule, T0)
    assert [d.verdict for d in got] == [Verdict.NOT_ENOUGH_RACKS, Verdict.PASS]
    assert "span 2 zone(s)" in got[0].message()
    assert "min.insync.racks.zone=3" in got[0].message()


def test_without_dimensions_the_rule_is_unchanged(view: ClusterView) -> None:
    req = request(("orders", [0, 1, 2, 3]), ("logs", [0]))
    plain = RackRule(default_min_racks=2)
    ignored = RackRule(default_min_racks=2, dimension_minimums={"region": 2})  # no dims
    assert decide(req, view, plain, T0) == decide(req, view, ignored, T0)
    assert not RackRule(dimensions=DIMS).enabled
    assert RackRule(dimensions=DIMS).minimums("orders") is None


def test_settings_reach_the_rule() -> None:
    s = load_settings({"upstream": "k:9", "rack_dimensions": "region/zone",
                       "min_insync_racks_by_dimension": "region=2",
                       "topic_min_insync_racks_by_dimension": "orders/zone=3,orders/region=2"},
                      env={})
    rule = rack_rule(s)
    assert rule.dimensions == DIMS
    assert rule.minimums("logs") == {"region": 2}
    assert rule.minimums("orders") == {"zone": 3, "region": 2}
    for bad in ({"min_insync_racks_by_dimension": "region=2"},
                {"rack_dimensions": "region/zone", "min_insync_racks_by_dimension": "city=2"},
                {"rack_dimensions": "region/zone",
                 "topic_min_insync_racks_by_dimension": "orders=2"}):
        with pytest.raises(SettingsError):
            load_settings({"upstream": "k:9", **bad}, env={})


def test_refusals_are_counted_per_dimension(view: ClusterView) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from proxy.enforce.metrics import EnforcementMetrics
    from proxy.relay.actions import ClientInfo
    from tests.prometheus_text import parse_samples, sample

    registry = CollectorRegistry()
    metrics = EnforcementMetrics(registry, lambda: T0)
    rule = RackRule(default_min_racks=2, dimensions=DIMS,
                    dimension_minimums={"region": 2, "zone": 3})
    got = decide(request(("orders", [0, 1, 2]), ("logs", [0])), view, rule, T0)
    metrics.record(got, False, ClientInfo("peer", "bootstrap"))
    text = parse_samples(generate_latest(registry).decode())
    assert sample(text, "rackguard_produce_dimension_refusals_total", topic="orders",
                  dimension="region", decision="rejected") == 1
    assert sample(text, "rackguard_produce_dimension_refusals_total", topic="orders",
                  dimension="zone", decision="rejected") == 1
    assert sample(text, "rackguard_produce_dimension_refusals_total", topic="logs",
                  dimension="region", decision="rejected") == 1
