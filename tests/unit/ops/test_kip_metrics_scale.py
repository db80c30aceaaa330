"""The cost of one /metrics scrape with 100,000 partitions in the view.

Builds a MetadataSnapshot directly (100 topics x 1,000 partitions, six
brokers in three racks, replication factor 3 with one replica per rack),
applies it to a ClusterViewStore and times the rack-coverage part of a
/metrics body (``RackCoverageCollector.exposition``, view read, coverage
computed and rendered): healthy and during a rack-c outage (every partition
exactly at its minimum of 2, the worst case of the default mode), in the
``at_or_under``, ``all`` and ``none`` modes. The figures are printed
(``pytest -s``) and quoted in docs/operations.md. Run it alone for the figures:

    .venv/bin/python -m pytest tests/unit/ops/test_kip_metrics_scale.py -s -q
"""

from __future__ import annotations

import time

import pytest
from rackguard.protocol.metadata import MetadataSnapshot, PartitionMetadata, TopicMetadata
from rackguard.proxy.cluster.view import ClusterViewStore
from rackguard.proxy.enforce.policy import RackRule
from rackguard.proxy.ops.kip_metrics import PartitionSeries, RackCoverageCollector

from tests.unit._views import broker

TOPICS = 100
PER_TOPIC = 1_000
BROKERS = tuple(broker(n, ("rack-a", "rack-b", "rack-c")[(n - 1) % 3]) for n in range(1, 7))
TARGET_S = 1.0


def snapshot(outage: bool) -> MetadataSnapshot:
    topics = []
    for t in range(TOPICS):
        parts = []
        for p in range(PER_TOPIC):
            first = (t + p) % 6 + 1  # racks a, b, c in turn: one replica per rack
            replicas = tuple((first - 1 + k) % 6 + 1 for k in range(3))
            isr = tuple(n for n in replicas if not (outage and n in (3, 6)))
            parts.append(PartitionMetadata(p, 0, isr[0], 1, replicas, isr, ()))
        topics.append(TopicMetadata(f"topic-{t:03d}", None, 0, False, tuple(parts)))
    return MetadataSnapshot(BROKERS, "c", 1, tuple(topics))


def timed_scrape(outage: bool, series: PartitionSeries) -> tuple[float, int, bytes]:
    store = ClusterViewStore(time.monotonic)
    store.apply_metadata(snapshot(outage), full=True)
    assert store.view.partition_count == TOPICS * PER_TOPIC
    coverage = RackCoverageCollector(
        lambda: store.view, lambda: RackRule(default_min_racks=2), time.monotonic, series)
    best = float("inf")
    body = b""
    for _ in range(2):
        start = time.perf_counter()
        body = coverage.exposition()
        best = min(best, time.perf_counter() - start)
    return best, body.count(b"\n"), body


@pytest.mark.parametrize(("outage", "series"), [
    (False, "at_or_under"), (True, "at_or_under"), (True, "all"), (True, "none")])
def test_scrape_of_100k_partitions(outage: bool, series: PartitionSeries) -> None:
    seconds, lines, body = timed_scrape(outage, series)
    state = "rack-c down" if outage else "healthy"
    print(f"\nscrape, {TOPICS * PER_TOPIC:,} partitions, {state}, {series}: "
          f"{seconds * 1000:.0f} ms, {lines:,} lines, {len(body) / 1e6:.1f} MB")
    if outage:  # every ISR spans rack-a and rack-b: exactly at the minimum of 2
        assert b'rackguard_at_min_rack_isr_partitions{broker="1"} ' in body
        assert b'rackguard_under_min_rack_isr_partitions{broker="1"} 0\n' in body
    if series == "none" or (series == "at_or_under" and not outage):
        assert lines < 100  # no per-partition series
    else:
        assert lines > 3 * TOPICS * PER_TOPIC
    assert seconds < TARGET_S
