"""Rack hints on the relay: the request hooks for Fetch, JoinGroup and
ConsumerGroupHeartbeat, and the Fetch byte counts and response callbacks behind the
locality metric.

Invariants: built only when a client rack is configured (without one the relay has no
hook for these APIs and costs nothing); in ``observe`` mode no request is read or
changed; in ``fill`` mode a request is changed only where it names no rack, and only
in the one field the codec replaces (:mod:`protocol.fetch_request`,
:mod:`~protocol.join_group`, :mod:`~protocol.consumer_group_heartbeat`);
versions the codecs do not know are forwarded unread. Fetch responses are never
changed (the frame that arrived is the frame forwarded) and, for the locality metric,
only their size is taken (by the relay, into the listener's count); a response is
walked (for redirected partitions) only when it answers a request the proxy gave the
rack and a redirect is possible at all (a broker in client_rack exists and the serving
one is not in it). Malformed requests, and malformed responses that are walked, raise
ProtocolError (the connection closes, as for any bad input).
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.apis import ApiKey
from protocol.consumer_group_heartbeat import MAX_VERSION as HEARTBEAT_MAX
from protocol.consumer_group_heartbeat import fill_heartbeat_rack
from protocol.fetch_request import FIRST_RACK_VERSION, FetchRackFill
from protocol.fetch_response import fetch_response_traffic
from protocol.headers import parse_request_header
from protocol.join_group import MAX_VERSION as JOIN_GROUP_MAX
from protocol.join_group import fill_join_group_rack
from proxy.cluster.view import ClusterView
from proxy.locality.metrics import ListenerTally, LocalityMetrics
from proxy.locality.rules import redirect_possible, subscription_choice
from proxy.relay.actions import Action, ClientInfo, Forward, RequestHook
from proxy.relay.response_queue import ResponseTransform


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
        self._listeners: dict[str, _FetchListener] = {}
        self.fetch = self._fetch_hook()

    def request_hooks(self) -> dict[int, RequestHook]:
        hooks: dict[int, RequestHook] = {ApiKey.FETCH: self.fetch}
        if self.fill:
            hooks[ApiKey.JOIN_GROUP] = self.join_group
            hooks[ApiKey.CONSUMER_GROUP_HEARTBEAT] = self.consumer_group_heartbeat
        return hooks

    # ----- Fetch
    def _fetch_hook(self) -> RequestHook:
        """The Fetch hook: a closure over what it needs, so a fetch costs one dictionary
        lookup, the fill (in ``fill`` mode) and the Forward, which names the listener's
        byte count (the relay adds the answer's size: no callback per answer, 0.1 µs
        less per fetch than one in benchmarks/micro.py)."""
        metrics = self._metrics
        fill = FetchRackFill(self.rack).fill if self.fill else None
        listeners = self._listeners

        def fetch(client: ClientInfo, frame: memoryview, api_key: int, api_version: int,
                  corr: int) -> Action:
            listener = listeners.get(client.listener)
            if listener is None:
                listener = listeners[client.listener] = _FetchListener(
                    metrics.tally(client.listener), self.rack, self._view())
            if fill is not None and api_version >= FIRST_RACK_VERSION:
                filled = fill(frame, api_version)
                if filled is not None:
                    metrics.fetch_filled += 1
                    return Forward(filled, True, listener.on_filled, listener.fetched)
            return Forward(frame, True, None, listener.fetched)

        return fetch

    def view_changed(self, old: ClusterView, new: ClusterView) -> None:
        """For the view store's subscribers: where a redirect is possible may change."""
        for listener in list(self._listeners.values()):
            listener.view_changed(self.rack, new)

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


class _FetchListener:
    """What one listener's fetches name: ``fetched``, the count of its answers' bytes
    (the relay adds each answer frame's size), and ``on_filled``, the response
    callback of requests the proxy gave the rack: ``walk`` (counting redirected
    partitions) only where a redirect is possible
    (:func:`~proxy.locality.rules.redirect_possible`), else none; decided anew
    with every cluster view, never per fetch."""

    __slots__ = ("fetched", "walk", "on_filled", "_node")

    def __init__(self, tally: ListenerTally, rack: str, view: ClusterView) -> None:
        self._node = tally.node
        self.fetched = tally.fetched

        def walk(frame: memoryview, version: int) -> memoryview:
            tally.redirects += fetch_response_traffic(frame, version).redirects
            return frame

        self.walk: ResponseTransform = walk
        self.on_filled: ResponseTransform | None = None
        self.view_changed(rack, view)

    def view_changed(self, rack: str, view: ClusterView) -> None:
        self.on_filled = (self.walk if redirect_possible(rack, view.racks, self._node)
                          else None)
