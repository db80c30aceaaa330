"""Counters and rate-limited logs of rack decisions.

Invariant: one call per produce request records all its partitions; label
children are cached per (topic, decision, reason); rejections are logged at
most once per topic per ``log_interval_s`` with a count of those suppressed,
so a rack outage cannot flood the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

from proxy.connection import ClientInfo
from proxy.policy import Decision, Verdict

log = logging.getLogger("rackguard.enforcement")

_AGE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)


class EnforcementMetrics:
    def __init__(
        self,
        registry: CollectorRegistry,
        clock: Callable[[], float],
        log_interval_s: float = 10.0,
    ) -> None:
        self._clock = clock
        self._interval = log_interval_s
        self.partitions = Counter(
            "rackguard_produce_partitions",
            "acks=all produce partitions checked, by topic, decision and reason",
            ["topic", "decision", "reason"],
            registry=registry,
        )
        self.metadata_age = Histogram(
            "rackguard_metadata_age_at_decision_seconds",
            "Age of the cluster view when a rack decision was made",
            buckets=_AGE_BUCKETS,
            registry=registry,
        )
        self.unknown_partition_refreshes = Counter(
            "rackguard_unknown_partition_refreshes",
            "Metadata refreshes triggered by a produce naming an unknown partition",
            registry=registry,
        )
        self._children: dict[tuple[str, str, str], Counter] = {}
        self._last_log: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def record(self, decisions: Sequence[Decision], observe: bool, client: ClientInfo) -> None:
        for d in decisions:
            if d.verdict.rejects:
                decision = "observed_reject" if observe else "rejected"
                reason = d.verdict.value
                self._log_rejection(d, decision, client)
            else:
                decision = "forwarded"
                reason = "" if d.verdict is Verdict.PASS else d.verdict.value
            key = (d.topic or "?", decision, reason)
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = self.partitions.labels(*key)
            child.inc()
            if d.verdict is not Verdict.UNKNOWN and d.required_racks > 1:
                self.metadata_age.observe(d.metadata_age_s)

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
