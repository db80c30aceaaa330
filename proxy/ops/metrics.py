"""The proxy's own counters, on an injected prometheus registry.

Invariants: nothing here is a module-level global; each ``ProxyMetrics`` owns
its registry (tests build their own). The counters touched on every request
or read (``rackguard_requests{api}`` and ``rackguard_bytes{direction}``) are
plain Python numbers: an increment is an attribute or dictionary update, with
no lock and no prometheus_client call; a collector registered in the
registry, in the place those Counters had, exposes them at scrape time under
the same names, help, labels and types as prometheus_client's Counter would
(``_total`` and ``_created`` samples). The event loop is their one writer; a
scrape (another thread) reads copies taken in one step each, and counts only
grow. The rarer counters (connections, bad frames, rewrites) stay
prometheus_client objects.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from protocol.apis import api_name

REQUESTS = "rackguard_requests"
REQUESTS_HELP = "Client requests by API"
BYTES = "rackguard_bytes"
BYTES_HELP = "Bytes through the proxy"


class Tally:
    """A counter child's ``inc`` on a plain attribute (the hot path's byte counts)."""

    __slots__ = ("value", "created")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.connections_open = Gauge(
            "rackguard_connections_open", "Open client connections", ["listener"], registry=r
        )
        self.connections_total = Counter(
            "rackguard_connections", "Client connections accepted", ["listener"], registry=r
        )
        # api key -> requests; the wall time each series appeared
        self._requests: dict[int, int] = {}
        self._requests_created: dict[int, float] = {}
        self.bytes_from_client = Tally()
        self.bytes_to_client = Tally()
        r.register(_HotCollector(self))  # here: /metrics keeps its order
        self.bad_frames = Counter(
            "rackguard_bad_frames",
            "Connections closed for bad input, by side and reason",
            ["side", "reason"],
            registry=r,
        )
        self.upstream_failures = Counter(
            "rackguard_upstream_connect_failures",
            "Failed connections to upstream brokers",
            registry=r,
        )
        self.version_caps = Counter(
            "rackguard_version_caps_applied",
            "ApiVersions entries lowered or removed by the proxy",
            ["api"],
            registry=r,
        )
        self.address_rewrites = Counter(
            "rackguard_address_rewrites",
            "Responses whose broker addresses were rewritten",
            ["api"],
            registry=r,
        )
        self.unsolicited_responses = Counter(
            "rackguard_unsolicited_responses",
            "Broker responses to acks=0 produces (which expect none), dropped",
            registry=r,
        )
        self.connections_refused = Counter(
            "rackguard_connections_refused",
            "Client connections closed at once by a limit, by limit",
            ["limit"],
            registry=r,
        )
        self.tls_reloads = Counter(
            "rackguard_tls_reloads",
            "Reloads of the listeners' certificate, by result (a failed one keeps the old)",
            ["result"],
            registry=r,
        )
        self.drains = Counter(
            "rackguard_drain",
            "Drains on SIGTERM/SIGINT by outcome: clean (every request read was answered "
            "before its connection closed) or timeout (drain_timeout_ms cut some off)",
            ["result"],
            registry=r,
        )
        # set once any connection saw one: the upstream answers acks=0 (see connection.py)
        self.upstream_answers_acks0 = False

    def unsolicited_response(self) -> None:
        self.unsolicited_responses.inc()
        self.upstream_answers_acks0 = True

    def request(self, api_key: int) -> None:
        counts = self._requests
        n = counts.get(api_key)
        if n is None:
            self._requests_created[api_key] = time.time()
            n = 0
        counts[api_key] = n + 1

    # ----- read at scrape time (another thread: copies are taken in one step each)

    def families(self) -> tuple[Metric, Metric]:
        counts = dict(self._requests)
        created = dict(self._requests_created)
        requests = CounterMetricFamily(REQUESTS, REQUESTS_HELP, labels=["api"])
        for key, value in counts.items():
            requests.add_metric([api_name(key)], float(value), created=created.get(key))
        sent = CounterMetricFamily(BYTES, BYTES_HELP, labels=["direction"])
        for direction, tally in (("client_to_broker", self.bytes_from_client),
                                 ("broker_to_client", self.bytes_to_client)):
            sent.add_metric([direction], float(tally.value), created=tally.created)
        return requests, sent


class _HotCollector(Collector):
    def __init__(self, metrics: ProxyMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterator[Metric]:
        return iter((CounterMetricFamily(REQUESTS, REQUESTS_HELP, labels=["api"]),
                     CounterMetricFamily(BYTES, BYTES_HELP, labels=["direction"])))

    def collect(self) -> Iterator[Metric]:
        return iter(self._metrics.families())
