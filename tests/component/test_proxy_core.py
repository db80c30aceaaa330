"""The proxy's data path against a scriptable fake broker (no real client library)."""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import Callable

from benchmarks.produce_frames import kp_request, make_batch
from protocol.metadata import read_metadata
from proxy.relay.actions import ClientInfo, Forward, Reply
from proxy.relay.response_queue import ByteCount
from proxy.relay.server import ProxyServer
from tests.component.conftest import RawClient, corr_of, opaque_request
from tests.component.fake_broker import (
    CLOSE,
    FakeBroker,
    Received,
    echo_response,
    metadata_response,
)

HEARTBEAT = 12


def produce_frame(corr: int, acks: int, version: int = 9) -> bytes:
    return kp_request(version, [("t", [(0, make_batch(1))])], acks=acks, correlation_id=corr)


def metric(server: ProxyServer, name: str, labels: dict[str, str]) -> float:
    value = server.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_pipelined_requests_keep_their_order(make_proxy) -> None:  # type: ignore[no-untyped-def]
    async def slow_echo(req: Received) -> list[bytes]:
        await asyncio.sleep(random.random() / 500)
        return [echo_response(req.correlation_id, req.frame[-4:])]

    server, broker = await make_proxy(slow_echo)
    client = await RawClient.connect(server.bootstrap_port)
    corrs = random.sample(range(1, 1_000_000), 200)
    for corr in corrs:
        client.send(opaque_request(HEARTBEAT, 0, corr, struct.pack(">i", corr)))
    got = [corr_of(await client.recv()) for _ in corrs]
    assert got == corrs
    assert [r.correlation_id for r in broker.received] == corrs
    client.close()


async def test_acks0_produce_expects_no_response(make_proxy) -> None:  # type: ignore[no-untyped-def]
    def handler(req: Received) -> list[bytes]:
        if req.api_key == 0:
            return []  # acks=0: a broker sends nothing
        return [echo_response(req.correlation_id)]

    server, broker = await make_proxy(handler)
    client = await RawClient.connect(server.bootstrap_port)
    client.send(produce_frame(1, acks=0))
    client.send(opaque_request(HEARTBEAT, 0, 2))
    client.send(produce_frame(3, acks=0))
    client.send(opaque_request(HEARTBEAT, 0, 4))
    assert corr_of(await client.recv()) == 2
    assert corr_of(await client.recv()) == 4
    assert [r.correlation_id for r in broker.received] == [1, 2, 3, 4]
    # the produce bytes reached the broker unchanged
    assert broker.received[0].frame == produce_frame(1, acks=0)


async def test_proxy_made_response_waits_behind_inflight(make_proxy) -> None:  # type: ignore[no-untyped-def]
    replied = asyncio.Event()

    async def slow(req: Received) -> list[bytes]:
        await replied.wait()  # the broker answers only once the proxy has its own reply
        return [echo_response(req.correlation_id, b"upstream")]

    def reject_all(client: ClientInfo, frame: memoryview, key: int, version: int,
                   corr: int) -> Reply:
        replied.set()
        return Reply(echo_response(corr, b"local"))

    server, broker = await make_proxy(slow, produce_hook=reject_all)
    client = await RawClient.connect(server.bootstrap_port)
    client.send(opaque_request(HEARTBEAT, 0, 10))
    client.send(produce_frame(11, acks=-1))
    first, second = await client.recv(), await client.recv()
    assert (corr_of(first), first[8:]) == (10, b"upstream")
    assert (corr_of(second), second[8:]) == (11, b"local")
    assert [r.correlation_id for r in broker.received] == [10]


async def until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """A deadline poll on the event loop the proxy runs on, instead of a sleep."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.005)


def _paused(server: ProxyServer, side: str) -> bool:
    """Whether the proxy has paused reading ``side`` ("client" or "upstream") of a
    connection: its transport no longer reads."""
    for conn in server._connections:
        transport = conn._transport if side == "client" else conn._upstream
        if transport is not None and not transport.is_reading():
            return True
    return False


async def test_backpressure_stops_reading_the_broker(make_proxy) -> None:  # type: ignore[no-untyped-def]
    count, size = 1600, 64 * 1024  # 100 MiB: far more than the kernel's socket buffers

    def handler(req: Received) -> list[bytes]:
        return [echo_response(req.correlation_id, b"x" * size)]

    server, broker = await make_proxy(handler, settings={"write_high_water": 256 * 1024})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.bootstrap_port)
    for corr in range(count):
        writer.write(opaque_request(HEARTBEAT, 0, corr))
    # the client reads nothing: the proxy stops reading the broker (an event, polled)
    await until(lambda: _paused(server, "upstream"), "the proxy to stop reading the broker")
    # so the broker could not answer everything (its own buffers bound what it wrote)
    assert len(broker.received) < count // 2
    for corr in range(count):
        data = await asyncio.wait_for(reader.readexactly(size + 8), 10)
        assert corr_of(data) == corr
    writer.close()


async def test_backpressure_stops_reading_the_client(make_proxy) -> None:  # type: ignore[no-untyped-def]
    release = asyncio.Event()

    async def stalled(req: Received) -> list[bytes]:
        await release.wait()  # the broker stops reading while it sits on a request
        return [echo_response(req.correlation_id)]

    server, broker = await make_proxy(stalled, settings={"write_high_water": 256 * 1024})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.bootstrap_port)
    payload = b"y" * (64 * 1024)
    count = 400
    for corr in range(count):
        writer.write(opaque_request(HEARTBEAT, 0, corr, payload))
    await until(lambda: _paused(server, "client"), "the proxy to stop reading the client")
    # the proxy stopped reading the client: the client's own buffer keeps most of it
    assert writer.transport.get_write_buffer_size() > count * len(payload) // 4
    release.set()
    for corr in range(count):
        data = await asyncio.wait_for(reader.readexactly(8), 10)
        assert corr_of(data) == corr
    writer.close()


async def test_large_and_small_frames_arrive_intact_both_ways(make_proxy) -> None:  # type: ignore[no-untyped-def]
    # sizes around the splitter's thresholds: scratch reads, direct reads into a frame's
    # own (pooled) buffer, and a frame above EAGER_MAX that grows as it arrives
    rng = random.Random(7)
    sizes = [0, 10, 70_000, 1_000_000, 5, 3 * 1024 * 1024, 200_000, 1_000_000, 1]
    bodies = {corr: rng.randbytes(n) for corr, n in enumerate(sizes, start=1)}

    def handler(req: Received) -> list[bytes]:
        body = req.frame[14 + 1:]  # after the header (client id "t")
        return [echo_response(req.correlation_id, body[::-1])]

    server, broker = await make_proxy(handler)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.bootstrap_port)
    for corr, body in bodies.items():
        writer.write(opaque_request(HEARTBEAT, 0, corr, body))
    answers = {}
    for _ in bodies:
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
        data = await asyncio.wait_for(reader.readexactly(size), 10)
        answers[struct.unpack_from(">i", data)[0]] = data[4:]
    assert [r.correlation_id for r in broker.received] == list(bodies)
    assert [r.frame[15:] for r in broker.received] == list(bodies.values())
    assert answers == {corr: body[::-1] for corr, body in bodies.items()}
    writer.close()


async def test_broker_disconnect_closes_the_client(make_proxy) -> None:  # type: ignore[no-untyped-def]
    server, _ = await make_proxy(lambda req: CLOSE)
    client = await RawClient.connect(server.bootstrap_port)
    client.send(opaque_request(HEARTBEAT, 0, 1))
    assert await client.closed()


async def test_bad_input_closes_only_that_connection(make_proxy) -> None:  # type: ignore[no-untyped-def]
    server, _ = await make_proxy(lambda req: [echo_response(req.correlation_id)])
    good = await RawClient.connect(server.bootstrap_port)
    cases = {
        "bad_frame": struct.pack(">i", -5),
        "unknown_api_key": opaque_request(9999, 0, 1),
        "bad_header": struct.pack(">i", 3) + b"abc",
    }
    for reason, payload in cases.items():
        bad = await RawClient.connect(server.bootstrap_port)
        bad.send(payload)
        assert await bad.closed(), reason
        assert metric(server, "rackguard_bad_frames_total",
                      {"side": "client", "reason": reason}) == 1
        good.send(opaque_request(HEARTBEAT, 0, 7))
        assert corr_of(await good.recv()) == 7


async def test_oversized_frame_is_refused(make_proxy) -> None:  # type: ignore[no-untyped-def]
    server, broker = await make_proxy(lambda req: [], settings={"max_frame_size": 4096})
    bad = await RawClient.connect(server.bootstrap_port)
    bad.send(struct.pack(">i", 5000) + b"\x00" * 100)
    assert await bad.closed()
    assert broker.received == []


async def test_metadata_is_rewritten_and_node_listener_opens(make_proxy, port_base) -> None:  # type: ignore[no-untyped-def]
    holder: dict[str, int] = {}

    def handler(req: Received) -> list[bytes]:
        if req.api_key == 3:
            return [metadata_response(req.correlation_id, req.api_version,
                                      [(7, "127.0.0.1", holder["port"], "rack-a")])]
        return [echo_response(req.correlation_id)]

    server, broker = await make_proxy(handler)
    holder["port"] = broker.port
    client = await RawClient.connect(server.bootstrap_port)
    client.send(opaque_request(3, 9, 1, b"\x01\x00\x00\x00"))  # v9: null topics, flags, tags
    frame = await client.recv()
    snap = read_metadata(frame, 9)
    assert [(b.node_id, b.host, b.port, b.rack) for b in snap.brokers] == [
        (7, "127.0.0.1", port_base + 1 + 7, "rack-a")
    ]
    assert server.book.get(7) == ("127.0.0.1", broker.port)
    node = await RawClient.connect(port_base + 1 + 7)  # the listener is already bound
    node.send(opaque_request(HEARTBEAT, 0, 99))
    assert corr_of(await node.recv()) == 99


async def test_graceful_stop_lets_inflight_finish(make_proxy) -> None:  # type: ignore[no-untyped-def]
    arrived, release = asyncio.Event(), asyncio.Event()

    async def slow(req: Received) -> list[bytes]:
        arrived.set()
        await release.wait()
        return [echo_response(req.correlation_id)]

    server, _ = await make_proxy(slow)
    client = await RawClient.connect(server.bootstrap_port)
    client.send(opaque_request(HEARTBEAT, 0, 5))
    await asyncio.wait_for(arrived.wait(), 10)  # in flight: at the broker, not answered
    stopping = asyncio.ensure_future(server.stop(timeout=5))
    await asyncio.sleep(0)  # stop runs up to its wait for the in-flight request
    release.set()
    assert corr_of(await client.recv()) == 5
    await stopping
    assert await client.closed()


async def test_broker_answering_acks0_is_tolerated(make_proxy) -> None:  # type: ignore[no-untyped-def]
    """Some Kafka-compatible brokers answer acks=0 produces; the client expects nothing."""
    server, broker = await make_proxy(lambda req: [echo_response(req.correlation_id)])
    client = await RawClient.connect(server.bootstrap_port)
    client.send(produce_frame(1, acks=0))
    client.send(opaque_request(HEARTBEAT, 0, 2))
    client.send(produce_frame(3, acks=0))
    client.send(opaque_request(HEARTBEAT, 0, 4))
    assert corr_of(await client.recv()) == 2
    assert corr_of(await client.recv()) == 4
    assert metric(server, "rackguard_unsolicited_responses_total", {}) == 2
    assert len(broker.received) == 4


async def test_upstream_outlives_a_leaving_acks0_client_until_the_broker_answered(  # type: ignore[no-untyped-def]
    make_proxy,
) -> None:
    """A broker that answers acks=0 (and may drop what it has not processed when the
    connection closes) keeps its connection after the client leaves until the last
    acks=0 request is answered, past the plain 0.5 s linger; then it is closed. That
    the broker answers is known from another connection: this client leaves before
    the first answer."""
    eof_when_answered: list[bool] = []
    broker_ref: list[FakeBroker] = []

    async def handler(req: Received) -> list[bytes]:
        if req.correlation_id == 2:  # the last acks=0 request: slow to process
            await asyncio.sleep(1.2)
            eof_when_answered.append(broker_ref[0].readers[req.conn].at_eof())
        return [echo_response(req.correlation_id)]

    server, broker = await make_proxy(handler)
    broker_ref.append(broker)
    first = await RawClient.connect(server.bootstrap_port)
    first.send(produce_frame(1, acks=0))  # answered at once: this broker answers acks=0
    for _ in range(100):
        if metric(server, "rackguard_unsolicited_responses_total", {}) == 1:
            break
        await asyncio.sleep(0.01)
    first.close()
    client = await RawClient.connect(server.bootstrap_port)
    client.send(produce_frame(2, acks=0))
    client.close()
    for _ in range(300):
        if eof_when_answered:
            break
        await asyncio.sleep(0.01)
    assert eof_when_answered == [False]  # still connected when it answered, at 1.2 s
    conn = broker.received[-1].conn
    for _ in range(300):  # then closed promptly, not after the 5 s cap
        if broker.readers[conn].at_eof():
            break
        await asyncio.sleep(0.01)
    assert broker.readers[conn].at_eof()


async def test_requests_sent_just_before_the_client_leaves_still_arrive(make_proxy) -> None:  # type: ignore[no-untyped-def]
    """An acks=0 producer may send and close at once, before the proxy has connected
    upstream; without a proxy those bytes would have reached the broker."""
    server, broker = await make_proxy(lambda req: [])
    for corr in range(5):
        _, writer = await asyncio.open_connection("127.0.0.1", server.bootstrap_port)
        writer.write(produce_frame(corr, acks=0))
        writer.close()
    for _ in range(200):
        if len(broker.received) == 5:
            break
        await asyncio.sleep(0.01)
    assert sorted(r.correlation_id for r in broker.received) == list(range(5))
    for _ in range(200):
        if metric(server, "rackguard_connections_open", {"listener": "bootstrap"}) == 0:
            break
        await asyncio.sleep(0.01)
    assert metric(server, "rackguard_connections_open", {"listener": "bootstrap"}) == 0


async def test_newer_api_versions_is_negotiated_down(make_proxy) -> None:  # type: ignore[no-untyped-def]
    from protocol.api_versions import read_api_versions

    server, broker = await make_proxy(lambda req: [echo_response(req.correlation_id)])
    client = await RawClient.connect(server.bootstrap_port)
    client.send(opaque_request(18, 9, 41))  # a future ApiVersions the proxy cannot read
    frame = await client.recv()
    assert corr_of(frame) == 41
    assert read_api_versions(frame, 0) == (35, [(18, 0, 4)])
    assert broker.received == []  # answered by the proxy, like a broker would


async def test_version_above_what_the_proxy_reads_is_refused(make_proxy) -> None:  # type: ignore[no-untyped-def]
    server, broker = await make_proxy(lambda req: [echo_response(req.correlation_id)])
    for key, version in ((3, 14), (1, 16), (10, 7), (78, 0)):
        client = await RawClient.connect(server.bootstrap_port)
        client.send(opaque_request(key, version, 1))
        assert await client.closed(), (key, version)
    assert broker.received == []
    assert metric(server, "rackguard_bad_frames_total",
                  {"side": "client", "reason": "unsupported_version"}) == 4


async def test_a_hook_asks_the_broker_on_the_clients_connection(make_proxy) -> None:  # type: ignore[no-untyped-def]
    async def slow(req: Received) -> list[bytes]:
        if req.correlation_id == 20:
            await asyncio.sleep(0.2)  # answered after the proxy's own request was sent
        return [echo_response(req.correlation_id, b"up-%d" % req.correlation_id)]

    async def ask_first(client: ClientInfo, frame: memoryview, key: int, version: int,
                        corr: int) -> Reply:
        answer = await client.ask(lambda own: opaque_request(HEARTBEAT, 0, own), HEARTBEAT, 0)
        return Reply(echo_response(corr, b"local after " + answer[8:]))

    server, broker = await make_proxy(slow, produce_hook=ask_first)
    client = await RawClient.connect(server.bootstrap_port)
    client.send(opaque_request(HEARTBEAT, 0, 20))
    client.send(produce_frame(21, acks=-1))
    client.send(opaque_request(HEARTBEAT, 0, 22))
    answers = [await client.recv() for _ in range(3)]
    assert [corr_of(a) for a in answers] == [20, 21, 22]
    assert answers[1][8:] == b"local after up--1"  # the broker's answer to the proxy
    # upstream saw the client's first request, the proxy's own, then the client's third,
    # on the one connection: the held request went after the hook's decision
    assert [r.correlation_id for r in broker.received] == [20, -1, 22]
    assert len({r.conn for r in broker.received}) == 1


async def test_a_hooks_byte_count_gets_each_answers_size(make_proxy) -> None:  # type: ignore[no-untyped-def]
    """A Forward naming a count: the relay adds each answer frame's size as it arrived
    (before the transform), and the client gets the transform's answer."""
    def handler(req: Received) -> list[bytes]:
        return [echo_response(req.correlation_id, b"x" * req.correlation_id)]

    count = ByteCount()
    seen: list[int] = []

    def counted(client: ClientInfo, frame: memoryview, key: int, version: int,
                corr: int) -> Forward:
        def transform(answer: memoryview, version: int) -> bytes:
            seen.append(count.total)
            return bytes(answer[:-1]) + b"!"  # the same size

        return Forward(frame, True, transform if corr == 2 else None, count)

    server, broker = await make_proxy(handler, produce_hook=counted)
    client = await RawClient.connect(server.bootstrap_port)
    for corr in (1, 2, 30):
        client.send(produce_frame(corr, acks=-1))
    client.send(opaque_request(HEARTBEAT, 0, 4))  # not counted: no hook names the count
    answers = [await client.recv() for _ in range(4)]
    sizes = [len(echo_response(corr, b"x" * corr)) for corr in (1, 2, 30)]
    assert count.total == sum(sizes)
    assert seen == [sizes[0] + sizes[1]]  # counted before its transform ran
    assert answers[1].endswith(b"x!") and [corr_of(a) for a in answers] == [1, 2, 30, 4]
    client.close()


async def test_a_hooks_answer_reader_sees_each_answer_before_its_transform(make_proxy) -> None:  # type: ignore[no-untyped-def]
    """A Forward naming a reader: the relay hands it each answer frame as it arrived, with
    the request's version, before the transform; the client gets the transform's answer."""
    def handler(req: Received) -> list[bytes]:
        return [echo_response(req.correlation_id, b"x" * req.correlation_id)]

    read: list[tuple[bytes, int]] = []

    def reading(client: ClientInfo, frame: memoryview, key: int, version: int,
                corr: int) -> Forward:
        def transform(answer: memoryview, version: int) -> bytes:
            return bytes(answer[:-1]) + b"!"

        return Forward(frame, True, transform, read=lambda a, v: read.append((bytes(a), v)))

    server, broker = await make_proxy(handler, produce_hook=reading)
    client = await RawClient.connect(server.bootstrap_port)
    for corr in (1, 2):
        client.send(produce_frame(corr, acks=-1))
    answers = [await client.recv() for _ in range(2)]
    assert [a for a, _ in read] == [echo_response(c, b"x" * c) for c in (1, 2)]
    assert answers == [echo_response(c, b"x" * c)[:-1] + b"!" for c in (1, 2)]
    client.close()
