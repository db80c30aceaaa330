"""Connection limits, the first-request timeout and rate-limited bad-input logs, on an
in-process proxy in front of the fake broker."""

from __future__ import annotations

import logging
import struct

import pytest

from proxy.relay.server import ProxyServer
from tests.component.conftest import RawClient, corr_of, opaque_request
from tests.component.fake_broker import echo_response

HEARTBEAT = 12


def metric(server: ProxyServer, name: str, labels: dict[str, str]) -> float:
    value = server.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def _served(client: RawClient, corr: int) -> bool:
    client.send(opaque_request(HEARTBEAT, 0, corr))
    return corr_of(await client.recv()) == corr


@pytest.mark.parametrize(("limit", "settings"), [
    ("max_connections_per_client", {"max_connections_per_client": 2}),
    ("max_connections", {"max_connections": 2}),
])
async def test_a_connection_over_the_limit_is_closed_at_once(
        make_proxy, limit: str, settings: dict[str, int]) -> None:  # type: ignore[no-untyped-def]
    server, _ = await make_proxy(lambda req: [echo_response(req.correlation_id)],
                                 settings=settings)
    first = await RawClient.connect(server.bootstrap_port)
    second = await RawClient.connect(server.bootstrap_port)
    assert await _served(first, 1) and await _served(second, 2)
    third = await RawClient.connect(server.bootstrap_port)
    assert await third.closed()
    assert metric(server, "rackguard_connections_refused_total", {"limit": limit}) == 1
    assert await _served(first, 3)  # the admitted ones are untouched
    first.close()
    assert await first.closed()
    fourth = None
    for _ in range(50):  # the proxy sees the close a moment after the client
        fourth = await RawClient.connect(server.bootstrap_port)
        try:
            if await _served(fourth, 4):
                break
        except ConnectionError:
            fourth = None
    assert fourth is not None, "a freed slot is given to a new connection"
    assert server.connection_limits.total == 2


async def test_a_connection_that_never_completes_a_request_is_closed(make_proxy) -> None:  # type: ignore[no-untyped-def]
    server, _ = await make_proxy(lambda req: [echo_response(req.correlation_id)],
                                 settings={"first_request_timeout_ms": 200})
    active = await RawClient.connect(server.bootstrap_port)
    assert await _served(active, 1)
    silent = await RawClient.connect(server.bootstrap_port)
    partial = await RawClient.connect(server.bootstrap_port)
    partial.send(struct.pack(">i", 100) + b"\x00" * 10)  # a frame that never ends
    assert await silent.closed() and await partial.closed()
    assert metric(server, "rackguard_bad_frames_total",
                  {"side": "client", "reason": "no_request"}) == 2
    assert await _served(active, 2)  # past the deadline, but it had completed a request


async def test_garbage_connections_are_summarised_not_logged_one_by_one(
        make_proxy, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    server, _ = await make_proxy(lambda req: [echo_response(req.correlation_id)])
    with caplog.at_level(logging.WARNING, "rackguard.connection"):
        for _ in range(300):
            bad = await RawClient.connect(server.bootstrap_port)
            bad.send(struct.pack(">i", -5))
            assert await bad.closed()
        server.bad_input.flush()
    lines = [r.getMessage() for r in caplog.records if r.name == "rackguard.connection"]
    assert metric(server, "rackguard_bad_frames_total",
                  {"side": "client", "reason": "bad_frame"}) == 300
    assert len(lines) == 2, lines
    assert "bad frame" in lines[0] and "299 more bad frame" in lines[1]
