"""The proxy's own counters, on an injected prometheus registry.

Invariant: nothing here is a module-level global; each ``ProxyMetrics`` owns
its registry (tests build their own), and label children used on the hot
path are cached so a request costs dictionary look-ups, not label parsing.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from protocol.apis import api_name


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
        self.requests = Counter(
            "rackguard_requests", "Client requests by API", ["api"], registry=r
        )
        self.bytes = Counter(
            "rackguard_bytes", "Bytes through the proxy", ["direction"], registry=r
        )
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
        self._request_children: dict[int, Counter] = {}
        self.bytes_from_client = self.bytes.labels("client_to_broker")
        self.bytes_to_client = self.bytes.labels("broker_to_client")

    def request(self, api_key: int) -> None:
        child = self._request_children.get(api_key)
        if child is None:
            child = self._request_children[api_key] = self.requests.labels(api_name(api_key))
        child.inc()
