"""proxy.ops.metrics: per-request counters kept in plain Python, exposed at scrape time.

Invariant under test: what /metrics shows for ``ProxyMetrics`` is what the
prometheus_client Counters it used to hold (``rackguard_requests{api}`` and
``rackguard_bytes{direction}``) would show for the same calls: names, types,
labels, help, values and family order (``_created`` samples included,
timestamps aside); the rarer metrics are unchanged.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from protocol.apis import API_NAMES, api_name
from proxy.ops.metrics import ProxyMetrics


class Reference:
    """The metrics as they were kept before: prometheus_client objects, one call each."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        Gauge("rackguard_connections_open", "Open client connections", ["listener"], registry=r)
        Counter("rackguard_connections", "Client connections accepted", ["listener"], registry=r)
        self.requests = Counter("rackguard_requests", "Client requests by API", ["api"],
                                registry=r)
        self.bytes = Counter("rackguard_bytes", "Bytes through the proxy", ["direction"],
                             registry=r)
        Counter("rackguard_bad_frames", "Connections closed for bad input, by side and reason",
                ["side", "reason"], registry=r)
        Counter("rackguard_upstream_connect_failures", "Failed connections to upstream brokers",
                registry=r)
        Counter("rackguard_version_caps_applied",
                "ApiVersions entries lowered or removed by the proxy", ["api"], registry=r)
        Counter("rackguard_address_rewrites", "Responses whose broker addresses were rewritten",
                ["api"], registry=r)
        Counter("rackguard_unsolicited_responses",
                "Broker responses to acks=0 produces (which expect none), dropped", registry=r)
        Counter("rackguard_connections_refused",
                "Client connections closed at once by a limit, by limit", ["limit"], registry=r)
        Counter("rackguard_tls_reloads", "Reloads of the listeners' certificate, by result "
                "(a failed one keeps the old)", ["result"], registry=r)
        Counter("rackguard_drain", "Drains on SIGTERM/SIGINT by outcome: clean (every request "
                "read was answered before its connection closed) or timeout (drain_timeout_ms "
                "cut some off)", ["result"], registry=r)
        self.bytes_from_client = self.bytes.labels("client_to_broker")
        self.bytes_to_client = self.bytes.labels("broker_to_client")

    def request(self, api_key: int) -> None:
        self.requests.labels(api_name(api_key)).inc()


def without_created(text: bytes) -> str:
    return re.sub(r"^(\S+_created\S*) \S+$", r"\1 T", text.decode(), flags=re.M)


CALL = st.one_of(
    st.tuples(st.just("request"), st.sampled_from(sorted(API_NAMES))),
    st.tuples(st.just("from_client"), st.integers(0, 1 << 40)),
    st.tuples(st.just("to_client"), st.integers(0, 1 << 20)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(CALL, max_size=40))
def test_scrape_matches_prometheus_client(calls: list[tuple[str, int]]) -> None:
    mine, theirs = CollectorRegistry(), CollectorRegistry()
    metrics = ProxyMetrics(mine)
    reference = Reference(theirs)
    for target in (metrics, reference):
        for kind, value in calls:
            if kind == "request":
                target.request(value)
            elif kind == "from_client":
                target.bytes_from_client.inc(value)
            else:
                target.bytes_to_client.inc(value)
    # series appear in first-use order in both, so the whole text compares as is
    assert without_created(generate_latest(mine)) == without_created(generate_latest(theirs))


def test_sample_values_and_created() -> None:
    registry = CollectorRegistry()
    m = ProxyMetrics(registry)
    for key in (0, 0, 3, 0):
        m.request(key)
    m.bytes_from_client.inc(100)
    m.bytes_from_client.inc(20)
    m.bytes_to_client.inc(7)
    value = registry.get_sample_value
    assert value("rackguard_requests_total", {"api": "Produce"}) == 3
    assert value("rackguard_requests_total", {"api": "Metadata"}) == 1
    assert value("rackguard_requests_total", {"api": "Fetch"}) is None
    assert value("rackguard_bytes_total", {"direction": "client_to_broker"}) == 120
    assert value("rackguard_bytes_total", {"direction": "broker_to_client"}) == 7
    for labels in ({"api": "Produce"}, {"api": "Metadata"}):
        assert value("rackguard_requests_created", labels) is not None
    assert value("rackguard_bytes_created", {"direction": "client_to_broker"}) is not None


def test_counts_only_grow() -> None:
    m = ProxyMetrics()
    with pytest.raises(ValueError):
        m.bytes_from_client.inc(-1)


def test_the_names_cannot_be_registered_twice() -> None:
    registry = CollectorRegistry()
    ProxyMetrics(registry)
    with pytest.raises(ValueError):
        Counter("rackguard_requests", "again", registry=registry)
    with pytest.raises(ValueError):
        Counter("rackguard_bytes", "again", registry=registry)
