"""KIP-1290's rack-coverage metrics, computed from the current cluster view at scrape time.

Invariant: nothing here runs on the produce path and nothing is kept between
scrapes. Each scrape reads the one immutable :class:`ClusterView` that is
current at that moment and the rack rule in force, computes a
:class:`Coverage` once and renders it, so every figure of one scrape comes
from the same snapshot, and a partition that leaves the cluster leaves the
next scrape (no stale per-partition gauges).

Definitions, per partition of topic ``t`` (``required = rule.required_racks(t)``,
``racks`` = distinct racks of the ISR members, counted as the rule counts them):

* ``rackguard_isr_rack_count``     = racks (the KIP's IsrRackCount);
* ``rackguard_under_min_rack_isr`` = 1 if required > 1 and racks < required
  (UnderMinRackIsr);
* ``rackguard_at_min_rack_isr``    = 1 if required > 1 and racks == required
  (AtMinRackIsr).

``min.insync.racks = 1`` disables the check (as in the KIP), so such a
partition is never under nor at the minimum: it exports 0 for both (in
``all`` mode) and is counted in neither per-broker count. Per leader broker
(label ``broker``; ``none`` for partitions without a leader):
``rackguard_under_min_rack_isr_partitions`` and
``rackguard_at_min_rack_isr_partitions`` (UnderMinRackIsrPartitionCount,
AtMinRackIsrPartitionCount); every broker in the view gets both, 0 included.

Which per-partition series are exported is :data:`PartitionSeries`: ``all``,
``at_or_under`` (only rack-checked partitions at or under their minimum: a
healthy cluster exports none, so scrapes stay cheap at scale) or ``none``.
Per-broker counts, the checked-partition count and the metadata age are
always exported.

Where racks have dimensions (``rack_dimensions``), the same scrape adds the coverage
per dimension (:mod:`.dimension_metrics`, series of their own); these are unchanged.

Two renderings of one computation: :meth:`RackCoverageCollector.collect`
(a prometheus ``Collector``, for registries and tests) and
:meth:`RackCoverageCollector.exposition` (Prometheus text written directly,
what /metrics serves: prometheus_client spends ~8 us per sample, too slow
for 300,000 series in one scrape). A test checks they say the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.cluster.view import ClusterView
from proxy.enforce.policy import RackRule
from proxy.ops import dimension_metrics

PartitionSeries = Literal["all", "at_or_under", "none"]
NO_LEADER = "none"

UNDER = "rackguard_under_min_rack_isr"
AT = "rackguard_at_min_rack_isr"
RACK_COUNT = "rackguard_isr_rack_count"
UNDER_PER_BROKER = "rackguard_under_min_rack_isr_partitions"
AT_PER_BROKER = "rackguard_at_min_rack_isr_partitions"
CHECKED = "rackguard_rack_checked_partitions"
AGE = "rackguard_metadata_age_seconds"

HELP = {
    UNDER: "1 when the partition's ISR spans fewer racks than min.insync.racks "
           "(KIP-1290 UnderMinRackIsr)",
    AT: "1 when the partition's ISR spans exactly min.insync.racks racks "
        "(KIP-1290 AtMinRackIsr)",
    RACK_COUNT: "Distinct racks of the partition's ISR (KIP-1290 IsrRackCount)",
    UNDER_PER_BROKER: "Partitions led by this broker that are under min.insync.racks "
                      "(KIP-1290 UnderMinRackIsrPartitionCount)",
    AT_PER_BROKER: "Partitions led by this broker that are exactly at min.insync.racks "
                   "(KIP-1290 AtMinRackIsrPartitionCount)",
    CHECKED: "Partitions whose topic requires more than one rack",
    AGE: "Seconds since the proxy's last full metadata refresh (+Inf before the first)",
}


@dataclass(frozen=True, slots=True)
class Coverage:
    """One scrape's figures. ``rows``: (topic, partition, under, at, racks) per series."""

    rows: list[tuple[str, int, bool, bool, int]]
    under_by_broker: dict[str, int]
    at_by_broker: dict[str, int]
    checked: int
    age_s: float


def compute(view: ClusterView, rule: RackRule, now: float, series: PartitionSeries) -> Coverage:
    every = series == "all"
    some = series == "at_or_under"
    under_by: dict[str, int] = {str(n): 0 for n in view.brokers}
    at_by: dict[str, int] = dict(under_by)
    rows: list[tuple[str, int, bool, bool, int]] = []
    rack_counts: dict[tuple[int, ...], int] = {}  # ISRs repeat: count each one once
    checked = 0
    for name, topic in view.topics.items():
        required = rule.required_racks(name)
        enforced = required > 1
        if not enforced and not every:
            continue
        for index, row in topic.partitions.rows.items():
            _index, _error, leader_id, _epoch, _replicas, isr, _offline = row
            racks = rack_counts.get(isr)
            if racks is None:
                racks = rack_counts[isr] = len(view.isr_racks(isr))
            under = enforced and racks < required
            at = enforced and racks == required
            if enforced:
                checked += 1
                if under or at:
                    leader = str(leader_id) if leader_id >= 0 else NO_LEADER
                    target = under_by if under else at_by
                    target[leader] = target.get(leader, 0) + 1
            if every or (some and (under or at)):
                rows.append((name, index, under, at, racks))
    for broker in under_by.keys() | at_by.keys():
        under_by.setdefault(broker, 0)
        at_by.setdefault(broker, 0)
    return Coverage(rows, under_by, at_by, checked, view.age(now))


class RackCoverageCollector(Collector):
    """Rack coverage of whatever view and rule are current when scraped."""

    def __init__(
        self,
        view: Callable[[], ClusterView],
        rule: Callable[[], RackRule],
        clock: Callable[[], float],
        partition_series: PartitionSeries = "at_or_under",
    ) -> None:
        self._view = view
        self._rule = rule
        self._clock = clock
        self._series = partition_series

    def coverage(self) -> Coverage:
        return compute(self._view(), self._rule(), self._clock(), self._series)

    def _both(self) -> tuple[Coverage, dimension_metrics.DimensionCoverage | None]:
        """The coverage and, where racks have dimensions, the coverage per dimension, of
        one view and one rule."""
        view, rule = self._view(), self._rule()
        return (compute(view, rule, self._clock(), self._series),
                dimension_metrics.compute(view, rule, self._series))

    # ----- prometheus_client rendering
    def describe(self) -> Iterator[Metric]:
        """The families, without samples (lets a registry check name clashes)."""
        return iter((*self._families(), *dimension_metrics.families()))

    def collect(self) -> Iterator[Metric]:
        c, by_dimension = self._both()
        under_f, at_f, count_f, under_b, at_b, checked_f, age_f = self._families()
        for topic, index, under, at, racks in c.rows:
            labels = [topic, str(index)]
            under_f.add_metric(labels, float(under))
            at_f.add_metric(labels, float(at))
            count_f.add_metric(labels, float(racks))
        for broker in sorted(c.under_by_broker):
            under_b.add_metric([broker], float(c.under_by_broker[broker]))
            at_b.add_metric([broker], float(c.at_by_broker[broker]))
        checked_f.add_metric([], float(c.checked))
        age_f.add_metric([], c.age_s)
        yield from (under_f, at_f, count_f, under_b, at_b, checked_f, age_f)
        if by_dimension is not None:
            yield from dimension_metrics.collect(by_dimension)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        part = ["topic", "partition"]
        return (
            GaugeMetricFamily(UNDER, HELP[UNDER], labels=part),
            GaugeMetricFamily(AT, HELP[AT], labels=part),
            GaugeMetricFamily(RACK_COUNT, HELP[RACK_COUNT], labels=part),
            GaugeMetricFamily(UNDER_PER_BROKER, HELP[UNDER_PER_BROKER], labels=["broker"]),
            GaugeMetricFamily(AT_PER_BROKER, HELP[AT_PER_BROKER], labels=["broker"]),
            GaugeMetricFamily(CHECKED, HELP[CHECKED]),
            GaugeMetricFamily(AGE, HELP[AGE]),
        )

    # ----- direct text rendering (what /metrics serves)
    def exposition(self) -> bytes:
        """The same families in the Prometheus text format (0.0.4), written directly."""
        c, by_dimension = self._both()
        under_lines: list[str] = []
        at_lines: list[str] = []
        count_lines: list[str] = []
        for topic, index, under, at, racks in c.rows:
            labels = f'{{topic="{_escape(topic)}",partition="{index}"}} '
            under_lines.append(f"{UNDER}{labels}{int(under)}\n")
            at_lines.append(f"{AT}{labels}{int(at)}\n")
            count_lines.append(f"{RACK_COUNT}{labels}{racks}\n")
        brokers = sorted(c.under_by_broker)
        out = [
            _header(UNDER), *under_lines,
            _header(AT), *at_lines,
            _header(RACK_COUNT), *count_lines,
            _header(UNDER_PER_BROKER),
            *(f'{UNDER_PER_BROKER}{{broker="{b}"}} {c.under_by_broker[b]}\n' for b in brokers),
            _header(AT_PER_BROKER),
            *(f'{AT_PER_BROKER}{{broker="{b}"}} {c.at_by_broker[b]}\n' for b in brokers),
            _header(CHECKED), f"{CHECKED} {c.checked}\n",
            _header(AGE), f"{AGE} {_number(c.age_s)}\n",
        ]
        if by_dimension is not None:
            out += dimension_metrics.exposition(by_dimension, _escape)
        return "".join(out).encode()


def _header(name: str) -> str:
    return f"# HELP {name} {HELP[name]}\n# TYPE {name} gauge\n"


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)
