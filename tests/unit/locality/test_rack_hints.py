"""proxy.locality: the rules, where client_rack comes from, and the relay hooks.

Invariants under test: the hooks change only requests naming no rack (and never in
observe mode), forward every other frame as the very object they got, skip versions
the codecs do not know; the Fetch response callback forwards the response it got and
counts its frame size under the serving broker's locality (decided when the counts
are folded, and never taken back), walking it for redirects only where the proxy gave
the request its rack and a redirect is possible; the rack source takes the first
non-empty line and refuses to guess on any failure.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse, JoinGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Sub
from prometheus_client import CollectorRegistry, generate_latest

from protocol.fetch_request import read_fetch_rack
from protocol.primitives import ProtocolError
from proxy.cluster.view import ClusterView
from proxy.locality.hooks import RackHints
from proxy.locality.metrics import LocalityMetrics
from proxy.locality.rules import (
    listener_node,
    locality,
    redirect_possible,
    subscription_choice,
)
from proxy.locality.source import RackSourceError, resolve_client_rack
from proxy.relay.actions import ClientInfo, Forward
from proxy.settings import Settings, load_settings

RACK = "zone-b"
VIEW = ClusterView(racks=MappingProxyType({1: "zone-a", 2: "zone-b", 3: None}))


def hints(fill: bool = True, views: list[ClusterView] | None = None
          ) -> tuple[RackHints, LocalityMetrics, CollectorRegistry]:
    """Hints over ``views[-1]`` (the test appends a new view to change it)."""
    seen = views if views is not None else [VIEW]
    registry = CollectorRegistry()
    metrics = LocalityMetrics(registry, RACK, "fill" if fill else "observe", lambda: seen[-1])
    return RackHints(RACK, fill, lambda: seen[-1], metrics), metrics, registry


def fetch(version: int, rack: str) -> memoryview:
    req = FetchRequest(version=version, max_wait_ms=1, min_bytes=1, max_bytes=9,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[],
                       forgotten_topics_data=[], rack_id=rack)
    req.with_header(correlation_id=1, client_id="c")
    return memoryview(bytes(req.encode(header=True, framed=True)))


def answer(action: Forward, frame: memoryview, version: int = 12) -> object:
    """What the relay does with the answer to a forwarded request: count, then transform."""
    if action.count is not None:
        action.count.total += len(frame)
    return frame if action.transform is None else action.transform(frame, version)


def call(hook: Callable[..., object], frame: memoryview, key: int, version: int,
         listener: str = "node-2") -> Forward:
    action = hook(ClientInfo("peer", listener), frame, key, version, 1)
    assert isinstance(action, Forward)
    return action


def test_rules() -> None:
    assert subscription_choice("range") is True and subscription_choice("sticky") is True
    assert subscription_choice("my-assignor") is False
    assert subscription_choice("stream") is None
    assert listener_node("node-12") == 12 and listener_node("bootstrap") is None
    assert listener_node("node-x") is None
    assert locality("a", "a") == "same_rack" and locality("a", "b") == "cross_rack"
    assert locality("a", None) == "unknown" and locality("a", "") == "unknown"
    racks = {1: "a", 2: "b", 3: None}
    assert redirect_possible("b", racks, 1) and redirect_possible("b", racks, 3)
    assert redirect_possible("b", racks, None)  # behind the bootstrap: not known
    assert not redirect_possible("b", racks, 2)  # served in the rack already
    assert not redirect_possible("c", racks, 1)  # no broker in the rack to send it to


@pytest.mark.parametrize("version", [11, 12, 15])
def test_fetch_fill_and_leave(version: int) -> None:
    h, metrics, _ = hints()
    empty = fetch(version, "")
    action = call(h.fetch, empty, 1, version)
    assert read_fetch_rack(action.frame) == RACK
    own = fetch(version, "mine")
    assert call(h.fetch, own, 1, version).frame is own
    observe, _, _ = hints(fill=False)
    assert call(observe.fetch, empty, 1, version).frame is empty
    assert metrics.filled_counts() == {"Fetch": 1}


def test_old_fetch_is_not_read_but_observed() -> None:
    h, _, _ = hints()
    frame = memoryview(b"not a fetch request at all")
    action = call(h.fetch, frame, 1, 10)
    assert action.frame is frame and action.count is not None and action.transform is None


def fetch_response(version: int, records: bytes, preferred: int = -1) -> memoryview:
    part = FetchResponse.FetchableTopicResponse.PartitionData(
        partition_index=0, error_code=0, high_watermark=1, last_stable_offset=1,
        log_start_offset=0, aborted_transactions=None, preferred_read_replica=preferred,
        records=records)
    resp = FetchResponse(version=version, throttle_time_ms=0, error_code=0, session_id=0,
                         responses=[FetchResponse.FetchableTopicResponse(
                             topic="t", partitions=[part])])
    resp.with_header(correlation_id=1)
    return memoryview(bytes(resp.encode(header=True, framed=True)))


def test_fetch_bytes_by_serving_rack() -> None:
    h, metrics, registry = hints(fill=False)
    expected = {"same_rack": 0, "cross_rack": 0, "unknown": 0}
    for listener, size, where in (("node-2", 100, "same_rack"), ("node-1", 30, "cross_rack"),
                                  ("node-3", 7, "unknown"), ("bootstrap", 5, "unknown"),
                                  ("node-9", 1, "unknown")):
        action = call(h.fetch, fetch(12, ""), 1, 12, listener)
        assert action.transform is None and action.count is not None  # counted, not read
        response = fetch_response(12, b"r" * size)
        assert answer(action, response) is response
        expected[where] += len(response)  # the whole frame, size prefix included
    # only the size is taken: the response is not read (observe mode walks nothing)
    redirect = call(h.fetch, fetch(12, ""), 1, 12, "node-1")
    junk = memoryview(b"not a Fetch response")
    assert answer(redirect, junk) is junk
    expected["cross_rack"] += len(junk)
    assert metrics.fetch_bytes() == expected
    assert metrics.redirects == 0
    text = generate_latest(registry).decode()
    assert f'rackguard_fetch_bytes_total{{locality="cross_rack"}} {expected["cross_rack"]}.0' in (
        text)
    assert 'rackguard_client_rack_info{mode="observe",rack="zone-b"} 1.0' in text


def test_locality_is_decided_at_the_fold_and_never_taken_back() -> None:
    views = [ClusterView(racks=MappingProxyType({1: None}))]
    h, metrics, _ = hints(fill=False, views=views)
    first = call(h.fetch, fetch(12, ""), 1, 12, "node-1")
    answer(first, memoryview(b"x" * 10))
    views.append(ClusterView(racks=MappingProxyType({1: RACK})))  # the rack became known
    answer(first, memoryview(b"x" * 5))
    assert metrics.fetch_bytes() == {"same_rack": 15, "cross_rack": 0, "unknown": 0}
    views.append(ClusterView(racks=MappingProxyType({1: "zone-a"})))  # moved (rare)
    answer(first, memoryview(b"x" * 3))
    assert metrics.fetch_bytes() == {"same_rack": 15, "cross_rack": 3, "unknown": 0}
    assert metrics.fetch_bytes() == {"same_rack": 15, "cross_rack": 3, "unknown": 0}


def test_redirects_walked_only_where_a_filled_fetch_can_be_redirected() -> None:
    views = [VIEW]  # zone-a: 1, zone-b (the proxy's): 2, no rack: 3
    h, metrics, _ = hints(views=views)
    junk = memoryview(b"not a Fetch response")
    redirected = fetch_response(12, b"", preferred=2)
    # to node 1 (zone-a), filled, a broker in zone-b exists: walked
    action = call(h.fetch, fetch(12, ""), 1, 12, "node-1")
    assert action.transform is not None
    assert answer(action, redirected) is redirected
    assert metrics.redirects == 1
    with pytest.raises(ProtocolError):
        answer(action, junk)  # walked: a malformed response closes the connection
    # served in the rack, or a client's own rack (not filled): only counted
    for listener, rack in (("node-2", ""), ("node-1", "mine")):
        action = call(h.fetch, fetch(12, rack), 1, 12, listener)
        assert action.transform is None
        assert answer(action, junk) is junk
        answer(action, redirected)
    # no broker in zone-b any more: nothing can redirect, nothing is walked
    views.append(ClusterView(racks=MappingProxyType({1: "zone-a", 3: None})))
    h.view_changed(VIEW, views[-1])  # what the view store tells its subscribers
    action = call(h.fetch, fetch(12, ""), 1, 12, "node-1")
    assert action.transform is None
    assert answer(action, junk) is junk
    assert metrics.redirects == 1
    # and a broker in zone-b again: walked again
    views.append(VIEW)
    h.view_changed(views[-2], VIEW)
    action = call(h.fetch, fetch(12, ""), 1, 12, "node-1")
    assert action.transform is not None
    answer(action, redirected)
    assert metrics.redirects == 2
    assert metrics.filled_counts() == {"Fetch": 4}


def join(version: int, meta: bytes, protocol_type: str = "consumer") -> memoryview:
    req = JoinGroupRequest(version=version, group_id="g", session_timeout_ms=1,
                           rebalance_timeout_ms=1, member_id="", group_instance_id=None,
                           protocol_type=protocol_type, reason=None, protocols=[
                               JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                         metadata=meta)])
    req.with_header(correlation_id=1, client_id="c")
    return memoryview(bytes(req.encode(header=True, framed=True)))


def test_join_group_hook() -> None:
    h, metrics, _ = hints()
    hooks = h.request_hooks()
    assert set(hooks) == {1, 11, 68}
    meta = bytes(Sub(version=0, topics=["t"], user_data=None).encode())
    action = call(hooks[11], join(7, meta), 11, 7)
    decoded = JoinGroupRequest.decode(bytes(action.frame), version=7, header=True,
                                      framed=True)
    assert Sub.decode(decoded.protocols[0].metadata).rack_id == RACK
    same = join(7, meta, protocol_type="connect")
    assert call(hooks[11], same, 11, 7).frame is same
    future = memoryview(b"a JoinGroup v10 is forwarded unread")
    assert call(hooks[11], future, 11, 10).frame is future
    assert call(hooks[68], future, 68, 2).frame is future
    assert metrics.filled_counts() == {"JoinGroup": 1}
    observe, _, _ = hints(fill=False)
    assert set(observe.request_hooks()) == {1}


# ----- where the rack comes from

def test_rack_sources(tmp_path: Path) -> None:
    def settings(**kw: object) -> Settings:
        return load_settings({"upstream": "k:9092", **kw}, env={})

    def no_run(command: str) -> str:
        raise AssertionError("not run")

    assert resolve_client_rack(settings(), no_run) is None
    assert resolve_client_rack(settings(client_rack=" a "), no_run) == "a"
    zone = tmp_path / "zone"
    zone.write_text("\n  eu-1b \nignored\n")
    assert resolve_client_rack(settings(client_rack_file=zone), no_run, ) == "eu-1b"
    lookup = settings(client_rack_command="lookup --zone")
    assert resolve_client_rack(lookup, lambda c: f"{c.split()[0]}-z\n") == "lookup-z"
    assert resolve_client_rack(
        settings(client_rack="x", client_rack_command="c"), no_run) == "x"
    for bad in (settings(client_rack_file=tmp_path / "missing"),):
        with pytest.raises(RackSourceError):
            resolve_client_rack(bad)
    with pytest.raises(RackSourceError, match="empty"):
        resolve_client_rack(settings(client_rack_command="c"), lambda c: "\n \n")

    def fails(command: str) -> str:
        raise subprocess.CalledProcessError(3, command)

    with pytest.raises(RackSourceError, match="exit status 3"):
        resolve_client_rack(settings(client_rack_command="c"), fails)
    with pytest.raises(RackSourceError):
        resolve_client_rack(settings(client_rack_command="/nonexistent/cmd"))
    assert resolve_client_rack(settings(client_rack_command="echo zone-c")) == "zone-c"


# ----- installed at start, or the start refused

async def test_app_installs_hooks_only_with_a_rack() -> None:
    from proxy.app import Rackguard, StartupError

    base = {"upstream": "127.0.0.1:9", "bootstrap_port": 0}
    plain = Rackguard(load_settings(base, env={}))
    await plain._install_rack_hints()
    assert plain.rack_hints is None
    assert {1, 11, 68}.isdisjoint(plain.server._hooks.request_hooks)

    app = Rackguard(load_settings({**base, "client_rack": "zone-b"}, env={}))
    await app._install_rack_hints()
    assert app.rack_hints is not None and app.rack_hints.fill
    assert {1, 11, 68} <= set(app.server._hooks.request_hooks)
    assert b'rackguard_client_rack_info{mode="fill",rack="zone-b"} 1.0' in app.metrics_text()
    # the hints follow the cluster view: with a broker in zone-b, a filled fetch to one
    # in another rack is walked for redirects (a non-Fetch answer is refused)
    hook = app.server._hooks.request_hooks[1]
    before = hook(ClientInfo("p", "node-1"), fetch(12, ""), 1, 12, 1)
    assert isinstance(before, Forward) and before.transform is None
    junk = memoryview(b"not a Fetch response")
    assert answer(before, junk) is junk  # no broker known: only counted
    app.store.install(ClusterView(racks=MappingProxyType({1: "zone-a", 2: "zone-b"})))
    after = hook(ClientInfo("p", "node-1"), fetch(12, ""), 1, 12, 2)
    assert isinstance(after, Forward) and after.transform is not None
    with pytest.raises(ProtocolError):
        answer(after, junk)

    def broken(settings: Settings) -> str | None:
        raise RackSourceError("client_rack_command 'x': exit status 1")

    refused = Rackguard(load_settings(base, env={}), rack_source=broken)
    with pytest.raises(StartupError, match="exit status 1"):
        await refused.start()
