"""A scriptable fake Kafka broker for component tests of the proxy.

It answers each request with whatever the test's handler returns: a list of
response frames (possibly empty, e.g. for acks=0), ``CLOSE`` to drop the
connection, or a coroutine result after a delay. It records every request
frame it received, so tests can check exactly what the proxy forwarded.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse

from protocol.framing import FrameSplitter
from protocol.headers import parse_request_header

CLOSE = object()
Handler = Callable[["Received"], "Awaitable[object] | object"]


@dataclass
class Received:
    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes
    conn: int = 0  # index of the connection in FakeBroker.readers / transports


@dataclass
class FakeBroker:
    handler: Handler
    node_id: int = 1
    host: str = "127.0.0.1"
    port: int = 0
    received: list[Received] = field(default_factory=list)
    transports: list[asyncio.Transport] = field(default_factory=list)
    readers: list[asyncio.StreamReader] = field(default_factory=list)
    _server: asyncio.Server | None = None

    async def start(self) -> FakeBroker:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for t in self.transports:
            t.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.transports.append(writer.transport)  # type: ignore[arg-type]
        self.readers.append(reader)
        conn = len(self.readers) - 1
        splitter = FrameSplitter()
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                for frame in splitter.feed(data):
                    h = parse_request_header(frame)
                    req = Received(h.api_key, h.api_version, h.correlation_id, bytes(frame),
                                   conn)
                    self.received.append(req)
                    result = self.handler(req)
                    if asyncio.iscoroutine(result):
                        result = await result
                    if result is CLOSE:
                        writer.close()
                        return
                    for out in result or []:  # type: ignore[union-attr]
                        writer.write(out)
                    await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def metadata_response(corr: int, version: int, brokers: list[tuple[int, str, int, str | None]],
                      topics: list[object] | None = None) -> bytes:
    cls = MetadataResponse
    resp = cls(
        version=version,
        throttle_time_ms=0,
        brokers=[cls.MetadataResponseBroker(node_id=n, host=h, port=p, rack=r)
                 for n, h, p, r in brokers],
        cluster_id="fake",
        controller_id=brokers[0][0] if brokers else -1,
        topics=topics or [],
    )
    resp.with_header(correlation_id=corr)
    return bytes(resp.encode(header=True, framed=True))


def api_versions_response(corr: int, version: int, entries: list[tuple[int, int, int]]) -> bytes:
    cls = ApiVersionsResponse
    resp = cls(
        version=version,
        error_code=0,
        api_keys=[cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                  for k, lo, hi in entries],
        throttle_time_ms=0,
    )
    resp.with_header(correlation_id=corr)
    return bytes(resp.encode(header=True, framed=True))


def echo_response(corr: int, payload: bytes = b"") -> bytes:
    """A response frame with a non-flexible header and an arbitrary body."""
    body = struct.pack(">i", corr) + payload
    return struct.pack(">i", len(body)) + body
