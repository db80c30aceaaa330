"""Counters and rate-limited logs of rack decisions.

Invariants: one call per produce request records all its partitions, in
plain Python counters (a dictionary increment per partition: no lock, no
prometheus_client call on the produce path); a collector registered in the
registry exposes them at scrape time under the same names, labels and types
as prometheus_client's Counter and Histogram would (the counter
``rackguard_produce_partitions{topic,decision,reason}``, the histogram
``rackguard_metadata_age_at_decision_seconds``, each with its ``_created``
samples), and, for refusals by a dimension's minimum (racks split into region/zone...),
``rackguard_produce_dimension_refusals{topic,dimension,decision}``. Counts only grow;
the event loop is their one writer and a scrape reads a copy. Rejections are logged at
most once per topic per ``log_interval_s`` with a count of those suppressed, so a rack
outage cannot flood the log.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from proxy.enforce.dimensions import shortfall
from proxy.enforce.policy import Decision, Verdict
from proxy.relay.actions import ClientInfo

log = logging.getLogger("rackguard.enforcement")

_AGE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)
PARTITIONS = "rackguard_produce_partitions"
PARTITIONS_HELP = "acks=all produce partitions checked, by topic, decision and reason"
DIMENSIONS = "rackguard_produce_dimension_refusals"
DIMENSIONS_HELP = ("acks=all produce partitions refused (or, in observe mode, that would "
                   "be) because their ISR spans too few values of a rack dimension")
AGE = "rackguard_metadata_age_at_decision_seconds"
AGE_HELP = "Age of the cluster view when a rack decision was made"

# (decision, reason) label values per verdict, outside and inside observe mode.
_LABELS: dict[tuple[Verdict, bool], tuple[str, str]] = {
    (v, observe): (
        ("observed_reject" if observe else "rejected", v.value) if v.rejects
        else ("forwarded", "" if v is Verdict.PASS else v.value))
    for v in Verdict for observe in (False, True)
}


class EnforcementMetrics:
    def __init__(
        self,
        registry: CollectorRegistry,
        clock: Callable[[], float],
        log_interval_s: float = 10.0,
    ) -> None:
        self._clock = clock
        self._interval = log_interval_s
        # (topic, decision, reason) -> partitions; the wall time each series appeared
        self._counts: dict[tuple[str, str, str], int] = {}
        self._created: dict[tuple[str, str, str], float] = {}
        # (topic, verdict, observe) -> the labels above, so a partition costs one lookup
        self._keys: dict[tuple[str | None, Verdict, bool], tuple[str, str, str]] = {}
        # per bucket (not cumulative; the last is +Inf), and the sum of observed ages
        self._age_buckets = [0] * (len(_AGE_BUCKETS) + 1)
        self._age_sum = 0.0
        self._age_created = time.time()
        self._dimension_counts: dict[tuple[str, str, str], int] = {}
        self._last_log: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        registry.register(_DecisionCollector(self))  # first: /metrics keeps its order
        self.unknown_partition_refreshes = Counter(
            "rackguard_unknown_partition_refreshes",
            "Metadata refreshes triggered by a produce naming an unknown partition",
            registry=registry,
        )

    def record(self, decisions: Sequence[Decision], observe: bool, client: ClientInfo) -> None:
        counts = self._counts
        keys = self._keys
        buckets = self._age_buckets
        unknown = Verdict.UNKNOWN
        age_sum = 0.0
        for d in decisions:
            verdict = d.verdict
            key = keys.get((d.topic, verdict, observe))
            if key is None:
                key = self._key(d.topic, verdict, observe)
            count = counts.get(key)
            if count is None:
                self._created[key] = time.time()
                count = 0
            counts[key] = count + 1
            if verdict is not unknown and d.required_racks > 1:
                age = d.metadata_age_s
                buckets[bisect_left(_AGE_BUCKETS, age)] += 1
                age_sum += age
            if key[1] != "forwarded":
                if d.dimensions is not None:
                    self._count_dimension(d, key[1])
                self._log_rejection(d, key[1], client)
        if age_sum:
            self._age_sum += age_sum

    def _key(self, topic: str | None, verdict: Verdict, observe: bool) -> tuple[str, str, str]:
        decision, reason = _LABELS[verdict, observe]
        key = self._keys[topic, verdict, observe] = (topic or "?", decision, reason)
        return key

    def _count_dimension(self, d: Decision, decision: str) -> None:
        assert d.dimensions is not None
        miss = shortfall(d.isr_racks, d.dimensions, d.minimums or {})
        if miss is not None:
            key = (d.topic or "?", miss.dimension, decision)
            self._dimension_counts = {**self._dimension_counts,
                                      key: self._dimension_counts.get(key, 0) + 1}

    def _log_rejection(self, d: Decision, decision: str, client: ClientInfo) -> None:
        topic = d.topic or "?"
        now = self._clock()
        last = self._last_log.get(topic)
        if last is not None and now - last < self._interval:
            self._suppressed[topic] = self._suppressed.get(topic, 0) + 1
            return
        suppressed = self._suppressed.pop(topic, 0)
        self._last_log[topic] = now
        more = f" ({suppressed} more on this topic since the last line)" if suppressed else ""
        verb = "would reject (observe mode)" if decision == "observed_reject" else "rejected"
        log.warning("%s produce from %s: %s%s", verb, client.peer, d.message(), more)

    # ----- read at scrape time (another thread: copies are taken in one step each)

    def families(self) -> tuple[Metric, ...]:
        counts = dict(self._counts)
        by_dimension = self._dimension_counts
        created = dict(self._created)
        buckets = list(self._age_buckets)
        age_sum = self._age_sum
        partitions = CounterMetricFamily(
            PARTITIONS, PARTITIONS_HELP, labels=["topic", "decision", "reason"])
        for key, value in counts.items():
            partitions.add_metric(list(key), float(value), created=created.get(key))
        ages = Metric(AGE, AGE_HELP, "histogram")
        total = 0
        for bound, n in zip((*_AGE_BUCKETS, float("inf")), buckets, strict=True):
            total += n
            ages.add_sample(f"{AGE}_bucket", {"le": floatToGoString(bound)}, float(total))
        ages.add_sample(f"{AGE}_count", {}, float(total))
        ages.add_sample(f"{AGE}_sum", {}, age_sum)
        ages.add_sample(f"{AGE}_created", {}, self._age_created)
        if not by_dimension:  # the family appears with the first refusal by a dimension
            return partitions, ages
        dimensions = CounterMetricFamily(DIMENSIONS, DIMENSIONS_HELP,
                                         labels=["topic", "dimension", "decision"])
        for key, value in sorted(by_dimension.items()):
            dimensions.add_metric(list(key), float(value))
        return partitions, ages, dimensions


class _DecisionCollector(Collector):
    def __init__(self, metrics: EnforcementMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterator[Metric]:
        return iter((CounterMetricFamily(PARTITIONS, PARTITIONS_HELP,
                                         labels=["topic", "decision", "reason"]),
                     Metric(AGE, AGE_HELP, "histogram"),
                     CounterMetricFamily(DIMENSIONS, DIMENSIONS_HELP,
                                         labels=["topic", "dimension", "decision"])))

    def collect(self) -> Iterator[Metric]:
        return iter(self._metrics.families())
