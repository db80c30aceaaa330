"""proxy.enforce.metrics: rack decisions counted in plain Python, exposed at scrape time.

Invariant under test: what /metrics shows is what prometheus_client's own
Counter (``rackguard_produce_partitions{topic,decision,reason}``) and
Histogram (``rackguard_metadata_age_at_decision_seconds``) would show for the
same decisions: names, types, labels, help and values (``_created`` samples
included, timestamps aside); rejections are logged at most once per topic
per interval.
"""

from __future__ import annotations

import logging
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from proxy.enforce.metrics import _AGE_BUCKETS, EnforcementMetrics
from proxy.enforce.policy import Decision, Verdict
from proxy.relay.actions import ClientInfo

CLIENT = ClientInfo("10.0.0.1:4000", "node-1")


class Reference:
    """The metrics as they were kept before: prometheus_client objects, one call each."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.partitions = Counter(
            "rackguard_produce_partitions",
            "acks=all produce partitions checked, by topic, decision and reason",
            ["topic", "decision", "reason"], registry=registry)
        self.age = Histogram(
            "rackguard_metadata_age_at_decision_seconds",
            "Age of the cluster view when a rack decision was made",
            buckets=_AGE_BUCKETS, registry=registry)
        Counter("rackguard_unknown_partition_refreshes",
                "Metadata refreshes triggered by a produce naming an unknown partition",
                registry=registry)

    def record(self, decisions: list[Decision], observe: bool) -> None:
        for d in decisions:
            if d.verdict.rejects:
                decision = "observed_reject" if observe else "rejected"
                reason = d.verdict.value
            else:
                decision = "forwarded"
                reason = "" if d.verdict is Verdict.PASS else d.verdict.value
            self.partitions.labels(d.topic or "?", decision, reason).inc()
            if d.verdict is not Verdict.UNKNOWN and d.required_racks > 1:
                self.age.observe(d.metadata_age_s)


def without_created(text: bytes) -> str:
    return re.sub(r"^(\S+_created\S*) \S+$", r"\1 T", text.decode(), flags=re.M)


def scrape_lines(text: str) -> list[str]:
    """Sample lines sorted within each family (series order is not part of the format)."""
    blocks = re.split(r"(?m)^(?=# HELP)", text)
    out: list[str] = []
    for block in blocks:
        lines = block.splitlines()
        out.extend(ln for ln in lines if ln.startswith("#"))
        out.extend(sorted(ln for ln in lines if not ln.startswith("#")))
    return out


DECISION = st.builds(
    lambda topic, verdict, required, age: Decision(
        topic or b"id", topic, 0, verdict, required, metadata_age_s=age),
    st.sampled_from(["orders", "pay", None]),
    st.sampled_from(list(Verdict)),
    st.integers(min_value=1, max_value=3),
    st.one_of(st.floats(min_value=0, max_value=100), st.just(math.inf),
              st.sampled_from(_AGE_BUCKETS)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(DECISION, max_size=6), st.booleans()), max_size=8))
def test_scrape_matches_prometheus_client(requests: list[tuple[list[Decision], bool]]) -> None:
    mine, theirs = CollectorRegistry(), CollectorRegistry()
    metrics = EnforcementMetrics(mine, lambda: 0.0, log_interval_s=1e9)
    reference = Reference(theirs)
    logging.getLogger("rackguard.enforcement").disabled = True
    try:
        for decisions, observe in requests:
            metrics.record(decisions, observe, CLIENT)
            reference.record(decisions, observe)
    finally:
        logging.getLogger("rackguard.enforcement").disabled = False
    ours = scrape_lines(without_created(generate_latest(mine)))
    expected = scrape_lines(without_created(generate_latest(theirs)))
    # the sum of ages is added per request, prometheus_client adds per partition: the
    # float sums may differ in the last bits, nothing else may
    assert [ln for ln in ours if "_sum " not in ln] == [ln for ln in expected if "_sum " not in ln]
    sums = [(a, b) for a, b in zip(ours, expected, strict=True) if "_sum " in a]
    assert sums and all(a.split()[0] == b.split()[0] for a, b in sums)
    assert all(float(a.split()[1]) == pytest.approx(float(b.split()[1]), rel=1e-9, abs=1e-12)
               for a, b in sums)


def test_sample_values_and_labels() -> None:
    registry = CollectorRegistry()
    m = EnforcementMetrics(registry, lambda: 0.0)
    racks = Decision("t", "t", 0, Verdict.NOT_ENOUGH_RACKS, 2, metadata_age_s=0.3)
    ok = Decision("t", "t", 1, Verdict.PASS, 2, metadata_age_s=0.3)
    m.record([racks, ok, ok], observe=True, client=CLIENT)
    m.record([racks], observe=False, client=CLIENT)
    value = registry.get_sample_value
    assert value("rackguard_produce_partitions_total",
                 {"topic": "t", "decision": "forwarded", "reason": ""}) == 2
    assert value("rackguard_produce_partitions_total",
                 {"topic": "t", "decision": "observed_reject", "reason": "NOT_ENOUGH_RACKS"}) == 1
    assert value("rackguard_produce_partitions_total",
                 {"topic": "t", "decision": "rejected", "reason": "NOT_ENOUGH_RACKS"}) == 1
    assert value("rackguard_produce_partitions_created",
                 {"topic": "t", "decision": "rejected", "reason": "NOT_ENOUGH_RACKS"}) is not None
    assert value("rackguard_metadata_age_at_decision_seconds_count") == 4
    assert value("rackguard_metadata_age_at_decision_seconds_bucket", {"le": "0.25"}) == 0
    assert value("rackguard_metadata_age_at_decision_seconds_bucket", {"le": "0.5"}) == 4
    assert value("rackguard_metadata_age_at_decision_seconds_sum") == pytest.approx(1.2)


def test_names_are_claimed_in_the_registry() -> None:
    registry = CollectorRegistry()
    EnforcementMetrics(registry, lambda: 0.0)
    with pytest.raises(ValueError):
        Counter("rackguard_produce_partitions", "clash", registry=registry)


def test_rejections_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    m = EnforcementMetrics(CollectorRegistry(), lambda: now[0], log_interval_s=10.0)
    d = Decision("t", "t", 0, Verdict.NOT_ENOUGH_RACKS, 2, (1,), ("a",))
    with caplog.at_level(logging.WARNING, logger="rackguard.enforcement"):
        m.record([d, d, d], observe=False, client=CLIENT)
        now[0] = 11.0
        m.record([d], observe=True, client=CLIENT)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("rejected produce from 10.0.0.1:4000: NOT_ENOUGH_RACKS: t-0")
    assert lines[1].startswith("would reject (observe mode)")
    assert lines[1].endswith("(2 more on this topic since the last line)")
