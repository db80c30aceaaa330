"""Broker addresses: what the proxy learned upstream, and what clients are told.

Every response that names a broker (Metadata, FindCoordinator, DescribeCluster,
NodeEndpoints in Produce responses) passes through :class:`AddressRewriter`:
the upstream host and port are recorded in the :class:`AddressBook` and
replaced by the proxy's advertised host and the node's deterministic port
(``broker_port_base + node_id``). ApiVersions responses are capped to what the
proxy can parse.

Invariants: no response of those APIs reaches a client unrewritten; a
response naming a node is released only after that node's listener is bound,
so a client never learns a port that refuses it. The address book is the one
place upstream addresses are kept; it is replaced entry by entry only through
``learn``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from protocol.addresses import BrokerAddress
from protocol.api_versions import PROXY_VERSION_CAPS, cap_api_versions
from protocol.apis import API_NAMES, ApiKey, api_name
from protocol.describe_cluster import (
    describe_cluster_endpoint_type,
    rewrite_describe_cluster,
)
from protocol.find_coordinator import rewrite_find_coordinator
from protocol.metadata import rewrite_metadata_brokers
from protocol.produce import rewrite_produce_response_endpoints_seen
from proxy.ops.metrics import ProxyMetrics
from proxy.relay.response_queue import ResponseTransform

log = logging.getLogger("rackguard.addressing")


class AddressBook:
    """node id -> upstream (host, port), as last reported by the cluster."""

    def __init__(self) -> None:
        self._nodes: dict[int, tuple[str, int]] = {}

    def learn(self, brokers: Iterable[BrokerAddress]) -> None:
        for broker in brokers:
            if broker.node_id < 0:
                continue
            address = (broker.host, broker.port)
            if self._nodes.get(broker.node_id) != address:
                if broker.node_id in self._nodes:
                    log.info("broker %d moved from %s:%d to %s:%d", broker.node_id,
                             *self._nodes[broker.node_id], *address)
                self._nodes = {**self._nodes, broker.node_id: address}

    def get(self, node_id: int) -> tuple[str, int] | None:
        return self._nodes.get(node_id)

    def node_ids(self) -> list[int]:
        return sorted(self._nodes)


class AddressRewriter:
    """Response transforms for every API that carries broker addresses."""

    def __init__(
        self,
        book: AddressBook,
        advertised_host: str,
        node_port: Callable[[int], int],
        has_listener: Callable[[int], bool],
        ensure_listeners: Callable[[list[int]], Awaitable[None]],
        metrics: ProxyMetrics,
        observers: Iterable[Callable[[memoryview, int], None]] = (),
    ) -> None:
        self._book = book
        self._host = advertised_host
        self._node_port = node_port
        self._has_listener = has_listener
        self._ensure_listeners = ensure_listeners
        self._metrics = metrics
        self._metadata_observers = list(observers)

    def map_address(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        return self._host, self._node_port(node_id)

    def transforms(self) -> dict[int, ResponseTransform]:
        return {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: self.metadata,
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
            ApiKey.PRODUCE: self.produce,
        }

    def _release(
        self, api_key: int, data: bytes, brokers: list[BrokerAddress]
    ) -> bytes | Awaitable[bytes]:
        self._metrics.address_rewrites.labels(api_name(api_key)).inc()
        self._book.learn(brokers)
        missing = [b.node_id for b in brokers if b.node_id >= 0 and not self._has_listener(
            b.node_id)]
        if not missing:
            return data
        return self._after_listeners(missing, data)

    async def _after_listeners(self, node_ids: list[int], data: bytes) -> bytes:
        await self._ensure_listeners(node_ids)
        return data

    def api_versions(self, frame: memoryview, version: int) -> bytes:
        data, changes = cap_api_versions(frame, version, PROXY_VERSION_CAPS, API_NAMES)
        for change in changes:
            self._metrics.version_caps.labels(api_name(change[0])).inc()
        return data

    def metadata(self, frame: memoryview, version: int) -> bytes | Awaitable[bytes]:
        for observe in self._metadata_observers:
            observe(frame, version)  # observers must not block: they schedule their work
        data, brokers = rewrite_metadata_brokers(frame, version, self.map_address)
        return self._release(ApiKey.METADATA, data, brokers)

    def find_coordinator(self, frame: memoryview, version: int) -> bytes | Awaitable[bytes]:
        data, brokers = rewrite_find_coordinator(frame, version, self.map_address)
        return self._release(ApiKey.FIND_COORDINATOR, data, brokers)

    def describe_cluster(self, frame: memoryview, version: int) -> bytes | Awaitable[bytes]:
        data, brokers = rewrite_describe_cluster(frame, version, self.map_address)
        if describe_cluster_endpoint_type(frame, version) != 1:
            # controllers, not brokers: their ids are not broker ids, so nothing is learned;
            # the addresses are still replaced so that none leaks
            return data
        return self._release(ApiKey.DESCRIBE_CLUSTER, data, brokers)

    def produce(self, frame: memoryview, version: int) -> bytes | memoryview | Awaitable[bytes]:
        if version < 10:
            return frame
        data, seen = rewrite_produce_response_endpoints_seen(frame, version, self.map_address)
        if data is None:
            return frame
        brokers = [BrokerAddress(e.node_id, e.host, e.port, e.rack) for e in seen]
        return self._release(ApiKey.PRODUCE, data, brokers)
