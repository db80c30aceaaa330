"""Counters of rack hints: fetched bytes by locality, redirects, requests given a rack.

Invariants: the counts touched per Fetch are plain Python numbers on a per-listener
:class:`ListenerTally` (an attribute update: no lock, no dictionary, no view lookup, no
prometheus_client call on the fetch path). The locality of a listener's bytes is decided
when they are folded into the totals, at scrape time (and whenever the totals are read):
the bytes counted since the last fold go to the locality of the listener's broker in the
cluster view of that moment, so the totals only grow. A collector registered in the
injected registry exposes them as counters with ``_total`` and ``_created`` samples,
plus ``rackguard_client_rack_info{rack,mode}`` = 1. The event loop is the one writer of
the tallies; folds (scrape threads) are serialised by a lock and write only the totals.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.cluster.view import ClusterView
from proxy.locality.rules import LOCALITIES, Locality, listener_node, locality
from proxy.relay.response_queue import ByteCount

FETCH_BYTES = "rackguard_fetch_bytes"
FETCH_BYTES_HELP = ("Bytes of Fetch response frames through the proxy, by the serving "
                    "broker's rack against client_rack")
REDIRECTS = "rackguard_fetch_redirects"
REDIRECTS_HELP = ("Partitions of Fetch requests given client_rack that a broker outside it "
                  "answered with a preferred read replica instead of records (KIP-392)")
FILLED = "rackguard_rack_filled_requests"
FILLED_HELP = "Requests the proxy gave client_rack because they named no rack, by API"
INFO = "rackguard_client_rack_info"
INFO_HELP = "The rack this proxy fills in and measures against (1), and the mode"


class ListenerTally:
    """What one listener (one broker, or the bootstrap) served: response bytes, counted
    by the relay (``fetched``, named in the Forward of each Fetch), and redirects."""

    __slots__ = ("listener", "node", "fetched", "folded", "redirects")

    def __init__(self, listener: str) -> None:
        self.listener = listener
        self.node = listener_node(listener)
        self.fetched = ByteCount()  # of Fetch response frames (counted by the relay)
        self.folded = 0  # of those, already added to a locality's total (by folds)
        self.redirects = 0


class LocalityMetrics:
    def __init__(self, registry: CollectorRegistry, rack: str, mode: str,
                 view: Callable[[], ClusterView]) -> None:
        self.rack = rack
        self.mode = mode
        self._view = view
        self._tallies: dict[str, ListenerTally] = {}
        self._totals: dict[Locality, int] = dict.fromkeys(LOCALITIES, 0)
        self._fold_lock = threading.Lock()
        self.fetch_filled = 0  # Fetch requests given the rack (the hot one: an attribute)
        self.filled: dict[str, int] = {}  # the other APIs
        self._created = time.time()
        self._filled_created: dict[str, float] = {}
        registry.register(_Collector(self))

    def tally(self, listener: str) -> ListenerTally:
        """The tally of a listener (made on its first fetch, kept for the proxy's life:
        one per broker)."""
        tally = self._tallies.get(listener)
        if tally is None:
            tally = self._tallies[listener] = ListenerTally(listener)
        return tally

    def fill(self, api: str) -> None:
        n = self.filled.get(api)
        if n is None:
            self._filled_created[api] = time.time()
            n = 0
        self.filled[api] = n + 1

    def fetch_bytes(self) -> dict[Locality, int]:
        """Bytes by locality, the listeners' new bytes folded in first."""
        with self._fold_lock:
            view = self._view()
            totals = self._totals
            for tally in list(self._tallies.values()):
                fetched = tally.fetched.total
                if fetched != tally.folded:
                    rack = view.racks.get(tally.node) if tally.node is not None else None
                    totals[locality(self.rack, rack)] += fetched - tally.folded
                    tally.folded = fetched
            return dict(totals)

    @property
    def redirects(self) -> int:
        return sum(t.redirects for t in list(self._tallies.values()))

    def filled_counts(self) -> dict[str, int]:
        counts = dict(self.filled)
        if self.fetch_filled:
            counts["Fetch"] = self.fetch_filled
        return counts

    def families(self) -> list[Metric]:
        created = self._created
        by_locality = CounterMetricFamily(FETCH_BYTES, FETCH_BYTES_HELP, labels=["locality"])
        for where, value in self.fetch_bytes().items():
            by_locality.add_metric([where], float(value), created=created)
        redirects = CounterMetricFamily(REDIRECTS, REDIRECTS_HELP)
        redirects.add_metric([], float(self.redirects), created=created)
        filled = CounterMetricFamily(FILLED, FILLED_HELP, labels=["api"])
        stamps = dict(self._filled_created)
        for api, value in self.filled_counts().items():
            filled.add_metric([api], float(value), created=stamps.get(api, created))
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
