"""Rack hints on the relay: the request hooks for Fetch, JoinGroup and
ConsumerGroupHeartbeat, and the Fetch response observer behind the locality metric.

Invariants: built only when a client rack is configured (without one the relay has no
hook for these APIs and costs nothing); in ``observe`` mode no request is read or
changed; in ``fill`` mode a request is changed only where it names no rack, and only
in the one field the codec replaces (:mod:`rackguard.protocol.fetch_request`,
:mod:`~rackguard.protocol.join_group`, :mod:`~rackguard.protocol.consumer_group_heartbeat`);
versions the codecs do not know are forwarded unread. Fetch responses are read, never
changed: the frame that arrived is the frame forwarded. Malformed requests and
responses raise ProtocolError (the connection closes, as for any bad input).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rackguard.protocol.apis import ApiKey
from rackguard.protocol.consumer_group_heartbeat import MAX_VERSION as HEARTBEAT_MAX
from rackguard.protocol.consumer_group_heartbeat import fill_heartbeat_rack
from rackguard.protocol.fetch_request import FIRST_RACK_VERSION, fill_fetch_rack
from rackguard.protocol.fetch_response import fetch_response_traffic
from rackguard.protocol.headers import parse_request_header
from rackguard.protocol.join_group import MAX_VERSION as JOIN_GROUP_MAX
from rackguard.protocol.join_group import fill_join_group_rack
from rackguard.proxy.cluster.view import ClusterView
from rackguard.proxy.locality.metrics import LocalityMetrics
from rackguard.proxy.locality.rules import listener_node, locality, subscription_choice
from rackguard.proxy.relay.connection import Action, ClientInfo, Forward, RequestHook
from rackguard.proxy.relay.response_queue import ResponseTransform


class RackHints:
    def __init__(
        self,
        rack: str,
        fill: bool,
        view: Callable[[], ClusterView],
        metrics: LocalityMetrics,
    ) -> None:
        self.rack = rack
        self.fill = fill
        self._view = view
        self._metrics = metrics
        self._observers: dict[str, ResponseTransform] = {}

    def request_hooks(self) -> dict[int, RequestHook]:
        hooks: dict[int, RequestHook] = {ApiKey.FETCH: self.fetch}
        if self.fill:
            hooks[ApiKey.JOIN_GROUP] = self.join_group
            hooks[ApiKey.CONSUMER_GROUP_HEARTBEAT] = self.consumer_group_heartbeat
        return hooks

    # ----- Fetch
    def fetch(
        self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int, corr: int
    ) -> Action:
        observer = self._observers.get(client.listener)
        if observer is None:
            observer = self._observers[client.listener] = self._observer(client.listener)
        if self.fill and api_version >= FIRST_RACK_VERSION:
            filled = fill_fetch_rack(frame, api_version, self.rack)
            if filled is not None:
                self._metrics.fill("Fetch")
                return Forward(filled, True, observer)
        return Forward(frame, True, observer)

    def _observer(self, listener: str) -> ResponseTransform:
        node = listener_node(listener)
        fetched = self._metrics.fetched
        rack = self.rack
        view = self._view
        seen: list[Any] = [None, "unknown"]  # the view last looked at, and its answer

        def observe(frame: memoryview, version: int) -> memoryview:
            record_bytes, redirects = fetch_response_traffic(frame, version)
            current = view()
            if current is not seen[0]:  # views are immutable: one look per new view
                seen[0] = current
                seen[1] = locality(rack, current.racks.get(node) if node is not None else None)
            fetched(seen[1], record_bytes, redirects)
            return frame

        return observe

    # ----- consumer groups
    def join_group(
        self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int, corr: int
    ) -> Action:
        if api_version <= JOIN_GROUP_MAX:
            header = parse_request_header(frame)
            filled = fill_join_group_rack(frame, api_version, header.body_offset, self.rack,
                                          subscription_choice)
            if filled is not None:
                self._metrics.fill("JoinGroup")
                return Forward(filled)
        return Forward(frame)

    def consumer_group_heartbeat(
        self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int, corr: int
    ) -> Action:
        if api_version <= HEARTBEAT_MAX:
            filled = fill_heartbeat_rack(frame, api_version, self.rack)
            if filled is not None:
                self._metrics.fill("ConsumerGroupHeartbeat")
                return Forward(filled)
        return Forward(frame)
