"""Counters of rack hints: fetched bytes by locality, redirects, requests given a rack.

Invariants: the counts touched per Fetch are plain Python numbers (an attribute or
dictionary update: no lock, no prometheus_client call on the fetch path); a collector
registered in the injected registry exposes them at scrape time as counters with
``_total`` and ``_created`` samples, plus ``rackguard_client_rack_info{rack,mode}`` = 1.
The event loop is their one writer; a scrape reads copies, and counts only grow.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from rackguard.proxy.locality.rules import LOCALITIES, Locality

FETCH_BYTES = "rackguard_fetch_bytes"
FETCH_BYTES_HELP = ("Record bytes of Fetch responses through the proxy, by the serving "
                    "broker's rack against client_rack")
REDIRECTS = "rackguard_fetch_redirects"
REDIRECTS_HELP = ("Fetch response partitions that named a preferred read replica instead "
                  "of carrying records (KIP-392)")
FILLED = "rackguard_rack_filled_requests"
FILLED_HELP = "Requests the proxy gave client_rack because they named no rack, by API"
INFO = "rackguard_client_rack_info"
INFO_HELP = "The rack this proxy fills in and measures against (1), and the mode"


class LocalityMetrics:
    def __init__(self, registry: CollectorRegistry, rack: str, mode: str) -> None:
        self.rack = rack
        self.mode = mode
        self.fetch_bytes: dict[Locality, int] = dict.fromkeys(LOCALITIES, 0)
        self.redirects = 0
        self.filled: dict[str, int] = {}
        self._created = time.time()
        self._filled_created: dict[str, float] = {}
        registry.register(_Collector(self))

    def fetched(self, where: Locality, record_bytes: int, redirects: int) -> None:
        self.fetch_bytes[where] += record_bytes
        if redirects:
            self.redirects += redirects

    def fill(self, api: str) -> None:
        n = self.filled.get(api)
        if n is None:
            self._filled_created[api] = time.time()
            n = 0
        self.filled[api] = n + 1

    def families(self) -> list[Metric]:
        created = self._created
        by_locality = CounterMetricFamily(FETCH_BYTES, FETCH_BYTES_HELP, labels=["locality"])
        for where, value in dict(self.fetch_bytes).items():
            by_locality.add_metric([where], float(value), created=created)
        redirects = CounterMetricFamily(REDIRECTS, REDIRECTS_HELP)
        redirects.add_metric([], float(self.redirects), created=created)
        filled = CounterMetricFamily(FILLED, FILLED_HELP, labels=["api"])
        stamps = dict(self._filled_created)
        for api, value in dict(self.filled).items():
            filled.add_metric([api], float(value), created=stamps.get(api))
        info = GaugeMetricFamily(INFO, INFO_HELP, labels=["rack", "mode"])
        info.add_metric([self.rack, self.mode], 1.0)
        return [by_locality, redirects, filled, info]


class _Collector(Collector):
    def __init__(self, metrics: LocalityMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterator[Metric]:
        return iter((CounterMetricFamily(FETCH_BYTES, FETCH_BYTES_HELP, labels=["locality"]),
                     CounterMetricFamily(REDIRECTS, REDIRECTS_HELP),
                     CounterMetricFamily(FILLED, FILLED_HELP, labels=["api"]),
                     GaugeMetricFamily(INFO, INFO_HELP, labels=["rack", "mode"])))

    def collect(self) -> Iterator[Metric]:
        return iter(self._metrics.families())
