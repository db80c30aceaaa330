"""The drain on SIGTERM against a fake broker: stop accepting, read no further request,
answer those in flight, close idle connections at once, give up at the drain timeout."""

from __future__ import annotations

import asyncio
import socket

from proxy.relay.server import ProxyServer
from tests.component.conftest import RawClient, corr_of, opaque_request
from tests.component.fake_broker import Received, echo_response

HEARTBEAT = 12


def drains(server: ProxyServer, result: str) -> float:
    value = server.metrics.registry.get_sample_value("rackguard_drain_total",
                                                     {"result": result})
    return 0.0 if value is None else value


def read(server: ProxyServer) -> float:
    value = server.metrics.registry.get_sample_value("rackguard_requests_total",
                                                     {"api": "Heartbeat"})
    return 0.0 if value is None else value


def held_broker() -> tuple[asyncio.Event, asyncio.Event, object]:
    """A broker that answers each request once ``release`` is set."""
    arrived, release = asyncio.Event(), asyncio.Event()

    async def handler(req: Received) -> list[bytes]:
        arrived.set()
        await release.wait()
        return [echo_response(req.correlation_id)]

    return arrived, release, handler


async def test_in_flight_answered_idle_closed_at_once_nothing_new_read(  # type: ignore[no-untyped-def]
    make_proxy,
) -> None:
    arrived, release, handler = held_broker()
    server, broker = await make_proxy(handler)
    busy = await RawClient.connect(server.bootstrap_port)
    idle = await RawClient.connect(server.bootstrap_port)
    idle.send(opaque_request(HEARTBEAT, 0, 1))
    release.set()
    assert corr_of(await idle.recv()) == 1
    release.clear()
    busy.send(opaque_request(HEARTBEAT, 0, 7))
    await asyncio.wait_for(arrived.wait(), 5)  # at the broker, unanswered

    draining = asyncio.ensure_future(server.stop(timeout=10))
    assert await idle.closed(timeout=2)  # an idle connection goes at once
    # the listener no longer accepts
    with socket.socket() as probe:
        probe.settimeout(1)
        assert probe.connect_ex(("127.0.0.1", server.settings.bootstrap_port)) != 0
    busy.send(opaque_request(HEARTBEAT, 0, 8))  # after the drain began: never read
    await asyncio.sleep(0.1)
    assert not draining.done()
    release.set()
    assert corr_of(await busy.recv()) == 7  # the request in flight is answered
    assert await busy.closed()  # and then the connection closes, 8 unanswered
    assert await asyncio.wait_for(draining, 5) == "clean"
    assert [r.correlation_id for r in broker.received] == [1, 7]  # 8 never forwarded
    assert drains(server, "clean") == 1 and drains(server, "timeout") == 0


async def test_drain_gives_up_at_its_timeout(make_proxy) -> None:  # type: ignore[no-untyped-def]
    arrived, _release, handler = held_broker()  # never released: the broker hangs
    server, _ = await make_proxy(handler)
    client = await RawClient.connect(server.bootstrap_port)
    client.send(opaque_request(HEARTBEAT, 0, 3))
    await asyncio.wait_for(arrived.wait(), 5)
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await server.stop(timeout=0.3) == "timeout"
    assert 0.3 <= loop.time() - began < 3
    assert await client.closed()
    assert drains(server, "timeout") == 1 and drains(server, "clean") == 0


async def test_a_drain_with_no_connection_is_clean_and_immediate(  # type: ignore[no-untyped-def]
    make_proxy,
) -> None:
    server, _ = await make_proxy(lambda req: [echo_response(req.correlation_id)])
    assert await asyncio.wait_for(server.stop(timeout=30), 2) == "clean"
    assert drains(server, "clean") == 1


async def test_the_drain_timeout_is_a_setting(make_proxy) -> None:  # type: ignore[no-untyped-def]
    arrived, _release, handler = held_broker()
    server, _ = await make_proxy(handler, settings={"drain_timeout_ms": 200})
    client = await RawClient.connect(server.bootstrap_port)
    client.send(opaque_request(HEARTBEAT, 0, 3))
    await asyncio.wait_for(arrived.wait(), 5)
    assert await asyncio.wait_for(server.stop(), 3) == "timeout"


async def test_pipelined_requests_read_before_the_drain_are_all_answered(  # type: ignore[no-untyped-def]
    make_proxy,
) -> None:
    arrived, release, handler = held_broker()
    server, broker = await make_proxy(handler)
    client = await RawClient.connect(server.bootstrap_port)
    for corr in range(10, 15):
        client.send(opaque_request(HEARTBEAT, 0, corr))
    await asyncio.wait_for(arrived.wait(), 5)  # the broker holds the first; the proxy
    while read(server) < 5:                     # has read and forwarded all five
        await asyncio.sleep(0.01)
    draining = asyncio.ensure_future(server.stop(timeout=10))
    await asyncio.sleep(0.05)
    release.set()
    assert [corr_of(await client.recv()) for _ in range(5)] == list(range(10, 15))
    assert await client.closed()
    assert await asyncio.wait_for(draining, 5) == "clean"
    assert [r.correlation_id for r in broker.received] == list(range(10, 15))


async def test_a_tls_connection_drains_the_same_way(  # type: ignore[no-untyped-def]
    make_proxy, tmp_path
) -> None:
    import ssl

    from tests.tls_certs import make_pki

    pki = make_pki(tmp_path, "proxy")
    arrived, release, handler = held_broker()
    server, _ = await make_proxy(handler, settings={"tls_cert": str(pki.cert),
                                                    "tls_key": str(pki.key)})
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.bootstrap_port,
                                                   ssl=ctx, server_hostname="localhost")
    writer.write(opaque_request(HEARTBEAT, 0, 21))
    await asyncio.wait_for(arrived.wait(), 5)
    draining = asyncio.ensure_future(server.stop(timeout=10))
    await asyncio.sleep(0.05)
    release.set()
    answer = await asyncio.wait_for(reader.read(1 << 16), 5)
    assert corr_of(answer) == 21
    assert await asyncio.wait_for(reader.read(1 << 16), 5) == b""  # then closed
    assert await asyncio.wait_for(draining, 5) == "clean"
    writer.close()
