"""The rack coverage of one /metrics scrape with 100,000 partitions in the view: what it
exports in each mode, healthy and during a rack-c outage (every partition exactly at its
minimum of 2, the default mode's worst case). Its cost is a benchmark's, not a test's
(``benchmarks/metrics_scrape.py`` prints it; docs/operations.md quotes it)."""

from __future__ import annotations

import pytest

from benchmarks.metrics_scrape import MODES, scrape, snapshot
from proxy.ops.kip_metrics import PartitionSeries

TOPICS = 100
PER_TOPIC = 1_000


@pytest.mark.parametrize(("outage", "series"), MODES)
def test_scrape_of_100k_partitions(outage: bool, series: PartitionSeries) -> None:
    _, body = scrape(snapshot(TOPICS, PER_TOPIC, outage), series, repeat=1)
    lines = body.count(b"\n")
    if outage:  # every ISR spans rack-a and rack-b: exactly at the minimum of 2
        assert b'rackguard_at_min_rack_isr_partitions{broker="1"} ' in body
        assert b'rackguard_under_min_rack_isr_partitions{broker="1"} 0\n' in body
    if series == "none" or (series == "at_or_under" and not outage):
        assert lines < 100  # no per-partition series
    else:
        assert lines > 3 * TOPICS * PER_TOPIC
