"""Fixtures: a proxy in-process in front of a fake broker, and a raw Kafka client."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Callable

import pytest

from protocol.framing import FrameSplitter
from proxy.ops.metrics import ProxyMetrics
from proxy.relay.server import ProxyServer
from proxy.settings import Settings, load_settings
from tests.component.fake_broker import FakeBroker, Handler


def free_port_block(size: int = 50) -> int:
    """A base port such that base..base+size look free (below 32768)."""
    for base in range(20000, 32000, size + 7):
        ok = True
        for port in (base, base + size // 2, base + size):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")


class RawClient:
    """A bare Kafka client: sends frames, reads whole response frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._splitter = FrameSplitter()
        self._frames: list[bytes] = []

    @classmethod
    async def connect(cls, port: int) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    def send(self, frame: bytes) -> None:
        self.writer.write(frame)

    async def recv(self, timeout: float = 5.0) -> bytes:
        while not self._frames:
            data = await asyncio.wait_for(self.reader.read(1 << 20), timeout)
            if not data:
                raise ConnectionError("closed by the proxy")
            self._frames.extend(bytes(f) for f in self._splitter.feed(data))
        return self._frames.pop(0)

    async def closed(self, timeout: float = 5.0) -> bool:
        try:
            data = await asyncio.wait_for(self.reader.read(1 << 16), timeout)
        except ConnectionError:
            return True
        return data == b""

    def close(self) -> None:
        self.writer.close()


def opaque_request(api_key: int, version: int, corr: int, body: bytes = b"") -> bytes:
    client_id = b"t"
    payload = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id + body
    return struct.pack(">i", len(payload)) + payload


def corr_of(response: bytes) -> int:
    return int(struct.unpack_from(">i", response, 4)[0])


@pytest.fixture
def port_base() -> int:
    return free_port_block()


@pytest.fixture
async def make_proxy(
    port_base: int,
) -> AsyncIterator[Callable[..., object]]:
    started: list[tuple[ProxyServer, FakeBroker]] = []

    async def factory(handler: Handler, **kwargs: object) -> tuple[ProxyServer, FakeBroker]:
        broker = await FakeBroker(handler).start()
        settings: Settings = load_settings(
            {
                "upstream": f"127.0.0.1:{broker.port}",
                "bootstrap_port": port_base,
                "broker_port_base": port_base + 1,
                **kwargs.pop("settings", {}),  # type: ignore[dict-item]
            }
        )
        server = ProxyServer(settings, metrics=ProxyMetrics(), **kwargs)  # type: ignore[arg-type]
        await server.start()
        started.append((server, broker))
        return server, broker

    yield factory
    for server, broker in started:
        await server.stop(timeout=1)
        await broker.stop()
