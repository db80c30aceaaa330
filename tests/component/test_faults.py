"""Faults on either side close what they must and nothing else: while each happens, another
client keeps getting every answer through the same proxy (a concurrent "producer" of
requests the fake broker echoes), and the proxy is left with no connection of the victim.

The faults: a broker that dies in the middle of a request, one that accepts and never
answers, a client that half-closes its socket, a client that vanishes with 100 requests in
flight, a broker that answers with a frame for another correlation id.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable

import pytest

from proxy.relay.server import ProxyServer
from tests.component.conftest import RawClient, corr_of, opaque_request
from tests.component.fake_broker import CLOSE, Received, echo_response

HEARTBEAT = 12
VICTIM = 10_000  # correlation ids from here on are the victim's


class Steady:
    """A client sending one request at a time and checking every answer, until stopped."""

    def __init__(self, client: RawClient) -> None:
        self.client = client
        self.answered = 0
        self.task: asyncio.Task[None] | None = None
        self.stopping = False

    async def _run(self) -> None:
        corr = 1
        while not self.stopping:  # a flag, not a cancel: 3.11's wait_for can lose a cancel
            self.client.send(opaque_request(HEARTBEAT, 0, corr))
            assert corr_of(await self.client.recv(timeout=5)) == corr
            self.answered += 1
            corr += 1

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def more_than(self, n: int) -> None:
        async with asyncio.timeout(5):
            while self.answered <= n:
                assert self.task is not None
                if self.task.done():
                    self.task.result()  # raises what broke it
                await asyncio.sleep(0.005)

    async def stop(self) -> None:
        """Stop after the answer in flight; raise what broke it, if anything did."""
        assert self.task is not None
        self.stopping = True
        async with asyncio.timeout(10):
            await self.task


def handler(victim: Callable[[Received], object]) -> Callable[[Received], object]:
    def handle(req: Received) -> object:
        if req.correlation_id >= VICTIM:
            return victim(req)
        return [echo_response(req.correlation_id)]
    return handle


@pytest.fixture
async def steady_proxy(make_proxy) -> AsyncIterator[Callable[..., object]]:  # type: ignore[no-untyped-def]
    steadies: list[Steady] = []

    async def factory(victim: Callable[[Received], object]) -> tuple[ProxyServer, Steady]:
        server, _ = await make_proxy(handler(victim))
        steady = Steady(await RawClient.connect(server.bootstrap_port))
        steady.start()
        await steady.more_than(3)
        steadies.append(steady)
        return server, steady

    yield factory
    for steady in steadies:  # (each test stops its own and checks it; this only tidies)
        steady.stopping = True


async def _only_steady_left(server: ProxyServer) -> None:
    async with asyncio.timeout(5):
        while len(server._connections) > 1:
            await asyncio.sleep(0.005)


async def test_a_broker_that_dies_mid_request(steady_proxy) -> None:  # type: ignore[no-untyped-def]
    server, steady = await steady_proxy(lambda req: CLOSE)
    victim = await RawClient.connect(server.bootstrap_port)
    victim.send(opaque_request(HEARTBEAT, 0, VICTIM))
    assert await victim.closed()
    before = steady.answered
    await steady.more_than(before + 20)
    await _only_steady_left(server)
    await steady.stop()


async def _hang(req: Received) -> object:
    await asyncio.get_running_loop().create_future()  # never done
    return []


async def test_a_broker_that_never_answers(steady_proxy) -> None:  # type: ignore[no-untyped-def]
    server, steady = await steady_proxy(_hang)
    victim = await RawClient.connect(server.bootstrap_port)
    victim.send(opaque_request(HEARTBEAT, 0, VICTIM))
    with pytest.raises(TimeoutError):
        await victim.recv(timeout=0.3)  # the client gives up, as clients do
    await steady.more_than(steady.answered + 20)
    victim.close()
    await _only_steady_left(server)  # its upstream connection went with it
    await steady.more_than(steady.answered + 20)
    await steady.stop()


async def test_a_client_that_half_closes(steady_proxy) -> None:  # type: ignore[no-untyped-def]
    server, steady = await steady_proxy(lambda req: [echo_response(req.correlation_id)])
    victim = await RawClient.connect(server.bootstrap_port)
    victim.send(opaque_request(HEARTBEAT, 0, VICTIM))
    victim.send(b"\x00\x00\x00\x40" + b"\x00" * 8)  # and a frame cut short
    sock = victim.writer.get_extra_info("socket")
    sock.shutdown(socket.SHUT_WR)
    await _only_steady_left(server)
    await steady.more_than(steady.answered + 20)
    assert server.metrics.registry.get_sample_value(
        "rackguard_bad_frames_total", {"side": "client", "reason": "truncated_frame"}) == 1
    await steady.stop()


async def test_a_client_that_vanishes_with_100_requests_in_flight(steady_proxy) -> None:  # type: ignore[no-untyped-def]
    async def slow(req: Received) -> object:
        await asyncio.sleep(0.002)
        return [echo_response(req.correlation_id)]

    server, steady = await steady_proxy(slow)
    victim = await RawClient.connect(server.bootstrap_port)
    for i in range(100):
        victim.send(opaque_request(HEARTBEAT, 0, VICTIM + i))
    await asyncio.sleep(0)  # let them leave
    victim.writer.transport.abort()  # gone: no FIN, no reading of answers
    await _only_steady_left(server)
    await steady.more_than(steady.answered + 20)
    await steady.stop()


async def test_a_broker_answer_for_another_correlation_id(steady_proxy) -> None:  # type: ignore[no-untyped-def]
    server, steady = await steady_proxy(lambda req: [echo_response(req.correlation_id + 7)])
    victim = await RawClient.connect(server.bootstrap_port)
    victim.send(opaque_request(HEARTBEAT, 0, VICTIM))
    assert await victim.closed()
    assert server.metrics.registry.get_sample_value(
        "rackguard_bad_frames_total", {"side": "broker", "reason": "bad_response"}) == 1
    await _only_steady_left(server)
    await steady.more_than(steady.answered + 20)
    await steady.stop()
