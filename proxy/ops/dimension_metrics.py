"""Rack coverage per dimension, where racks have dimensions (``rack_dimensions``, e.g.
region/zone; :mod:`proxy.enforce.dimensions`), computed from the current view at scrape
time like :mod:`.kip_metrics`, whose series it adds to and never changes.

Definitions, per partition of topic ``t`` and dimension ``d`` (``required`` = the
topic's minimum for ``d``, ``rule.minimums(t)``, 1 where it names none; ``values`` =
distinct values of ``d`` among the ISR members' racks, counted as the rule counts them):

* ``rackguard_isr_dimension_count{topic,partition,dimension}``   = values;
* ``rackguard_under_min_dimension_isr{topic,partition,dimension}`` = 1 if required > 1
  and values < required;
* ``rackguard_at_min_dimension_isr{topic,partition,dimension}``    = 1 if required > 1
  and values == required.

Per leader broker and dimension (every broker of the view, 0 included):
``rackguard_under_min_dimension_isr_partitions{broker,dimension}`` and
``rackguard_at_min_dimension_isr_partitions{broker,dimension}``; per dimension:
``rackguard_dimension_checked_partitions{dimension}`` (partitions whose topic needs more
than one value of it). The per-partition series follow ``metrics_partition_series``
(``all``: every partition and dimension; ``at_or_under``: the (partition, dimension)
pairs at or under their minimum; ``none``).

Without dimensions (the default) :func:`compute` returns None and nothing is exported.
Invariant: nothing kept between scrapes; one view and one rule per scrape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily

from proxy.cluster.view import ClusterView
from proxy.enforce.dimensions import RackDimensions, distinct_values
from proxy.enforce.policy import RackRule

COUNT = "rackguard_isr_dimension_count"
UNDER = "rackguard_under_min_dimension_isr"
AT = "rackguard_at_min_dimension_isr"
UNDER_PER_BROKER = "rackguard_under_min_dimension_isr_partitions"
AT_PER_BROKER = "rackguard_at_min_dimension_isr_partitions"
CHECKED = "rackguard_dimension_checked_partitions"

HELP = {
    COUNT: "Distinct values of one rack dimension among the partition's ISR",
    UNDER: "1 when the partition's ISR spans fewer values of the dimension than its "
           "min.insync.racks.DIMENSION",
    AT: "1 when the partition's ISR spans exactly min.insync.racks.DIMENSION values of "
        "the dimension",
    UNDER_PER_BROKER: "Partitions led by this broker under their minimum of the dimension",
    AT_PER_BROKER: "Partitions led by this broker exactly at their minimum of the dimension",
    CHECKED: "Partitions whose topic requires more than one value of the dimension",
}

NO_LEADER = "none"
Outcome = tuple[tuple[str, bool, bool, int], ...]  # (dimension, under, at, values) each


@dataclass(frozen=True, slots=True)
class DimensionCoverage:
    """One scrape's figures. ``rows``: (topic, partition, dimension, under, at, values)."""

    dimensions: tuple[str, ...]
    rows: list[tuple[str, int, str, bool, bool, int]]
    under_by_broker: dict[tuple[str, str], int]  # (broker, dimension) -> partitions
    at_by_broker: dict[tuple[str, str], int]
    checked: dict[str, int]


def _value_counts(view: ClusterView, dims: RackDimensions,
                  isr: tuple[int, ...]) -> tuple[int, ...]:
    """Distinct values of each dimension (in ``dims.names`` order) among the ISR's racks."""
    per = distinct_values(view.isr_racks(isr), dims, dims.names)
    return tuple(len(per[name]) for name in dims.names)


def compute(view: ClusterView, rule: RackRule, series: str) -> DimensionCoverage | None:
    dims = rule.dimensions
    if dims is None:
        return None
    names = dims.names
    every = series == "all"
    some = series == "at_or_under"
    under_by = {(str(b), d): 0 for b in view.brokers for d in names}
    at_by = dict(under_by)
    checked = dict.fromkeys(names, 0)
    rows: list[tuple[str, int, str, bool, bool, int]] = []
    memo: dict[tuple[int, ...], tuple[int, ...]] = {}  # ISRs repeat: count each once
    for name, topic in view.topics.items():
        minimums = rule.minimums(name) or {}
        required = tuple(minimums.get(d, 1) for d in names)
        if not every and all(r <= 1 for r in required):
            continue
        partitions = topic.partitions.rows
        for d, need in zip(names, required, strict=True):
            if need > 1:
                checked[d] += len(partitions)
        # per ISR of this topic: every (dimension, under, at, values), and those under or at
        outcomes: dict[tuple[int, ...], tuple[Outcome, Outcome]] = {}
        for index, row in partitions.items():
            isr = row[5]
            known = outcomes.get(isr)
            if known is None:
                counts = memo.get(isr)
                if counts is None:
                    counts = memo[isr] = _value_counts(view, dims, isr)
                every_dim = tuple((d, need > 1 and have < need, need > 1 and have == need, have)
                                  for d, need, have in zip(names, required, counts, strict=True))
                known = outcomes[isr] = (every_dim, tuple(o for o in every_dim if o[1] or o[2]))
            every_dim, flagged = known
            if flagged:
                leader = str(row[2]) if row[2] >= 0 else NO_LEADER
                for d, under, _at, _have in flagged:
                    target = under_by if under else at_by
                    target[(leader, d)] = target.get((leader, d), 0) + 1
            if every or (some and flagged):
                rows.extend((name, index, d, under, at, have)
                            for d, under, at, have in (every_dim if every else flagged))
    for key in under_by.keys() | at_by.keys():
        under_by.setdefault(key, 0)
        at_by.setdefault(key, 0)
    return DimensionCoverage(names, rows, under_by, at_by, checked)


def families() -> tuple[GaugeMetricFamily, ...]:
    part = ["topic", "partition", "dimension"]
    return (
        GaugeMetricFamily(UNDER, HELP[UNDER], labels=part),
        GaugeMetricFamily(AT, HELP[AT], labels=part),
        GaugeMetricFamily(COUNT, HELP[COUNT], labels=part),
        GaugeMetricFamily(UNDER_PER_BROKER, HELP[UNDER_PER_BROKER],
                          labels=["broker", "dimension"]),
        GaugeMetricFamily(AT_PER_BROKER, HELP[AT_PER_BROKER], labels=["broker", "dimension"]),
        GaugeMetricFamily(CHECKED, HELP[CHECKED], labels=["dimension"]),
    )


def collect(c: DimensionCoverage) -> tuple[GaugeMetricFamily, ...]:
    """The figures as prometheus_client families."""
    under_f, at_f, count_f, under_b, at_b, checked_f = families()
    for topic, index, d, under, at, values in c.rows:
        labels = [topic, str(index), d]
        under_f.add_metric(labels, float(under))
        at_f.add_metric(labels, float(at))
        count_f.add_metric(labels, float(values))
    for key in sorted(c.under_by_broker):
        under_b.add_metric(list(key), float(c.under_by_broker[key]))
        at_b.add_metric(list(key), float(c.at_by_broker[key]))
    for d in c.dimensions:
        checked_f.add_metric([d], float(c.checked[d]))
    return under_f, at_f, count_f, under_b, at_b, checked_f


def exposition(c: DimensionCoverage, esc: Callable[[str], str]) -> list[str]:
    """The same figures as Prometheus text lines (``esc``: the label value escaper)."""
    under_lines: list[str] = []
    at_lines: list[str] = []
    count_lines: list[str] = []
    for topic, index, d, under, at, values in c.rows:
        labels = f'{{topic="{esc(topic)}",partition="{index}",dimension="{esc(d)}"}} '
        under_lines.append(f"{UNDER}{labels}{int(under)}\n")
        at_lines.append(f"{AT}{labels}{int(at)}\n")
        count_lines.append(f"{COUNT}{labels}{values}\n")
    keys = sorted(c.under_by_broker)
    return [
        _header(UNDER), *under_lines,
        _header(AT), *at_lines,
        _header(COUNT), *count_lines,
        _header(UNDER_PER_BROKER),
        *(f'{UNDER_PER_BROKER}{{broker="{b}",dimension="{esc(d)}"}} '
          f'{c.under_by_broker[(b, d)]}\n' for b, d in keys),
        _header(AT_PER_BROKER),
        *(f'{AT_PER_BROKER}{{broker="{b}",dimension="{esc(d)}"}} '
          f'{c.at_by_broker[(b, d)]}\n' for b, d in keys),
        _header(CHECKED),
        *(f'{CHECKED}{{dimension="{esc(d)}"}} {c.checked[d]}\n' for d in c.dimensions),
    ]


def _header(name: str) -> str:
    return f"# HELP {name} {HELP[name]}\n# TYPE {name} gauge\n"
