"""The listeners over TLS (mTLS here), in process in front of the fake broker: a client with
a certificate is relayed; one without is refused and leaves nothing behind (no connection
kept, no gauge raised), whatever the number of such attempts."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from tests.component.conftest import opaque_request
from tests.component.fake_broker import echo_response
from tests.tls_certs import make_pki

HEARTBEAT = 12


async def _exchange(port: int, ctx: ssl.SSLContext, corr: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                   server_hostname="localhost")
    try:
        writer.write(opaque_request(HEARTBEAT, 0, corr))
        return await asyncio.wait_for(reader.read(1 << 16), 5)
    finally:
        writer.close()


async def test_mtls_listener(make_proxy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server_pki = make_pki(tmp_path, "proxy")
    clients = make_pki(tmp_path, "clients")
    server, broker = await make_proxy(
        lambda req: [echo_response(req.correlation_id)],
        settings={"tls_cert": str(server_pki.cert), "tls_key": str(server_pki.key),
                  "tls_client_ca": str(clients.ca_file)})
    with_cert = ssl.create_default_context(cafile=str(server_pki.ca_file))
    with_cert.load_cert_chain(*map(str, clients.issue(tmp_path, "app")))
    answer = await _exchange(server.bootstrap_port, with_cert, 7)
    assert answer[4:8] == (7).to_bytes(4, "big")
    without = ssl.create_default_context(cafile=str(server_pki.ca_file))
    for corr in range(20):
        try:
            answer = await _exchange(server.bootstrap_port, without, corr)
        except (ssl.SSLError, ConnectionError):
            answer = b""
        assert answer == b""
    assert [r.correlation_id for r in broker.received] == [7]
    for _ in range(100):  # the one good connection's close reaches the proxy a moment later
        if not server._connections:
            break
        await asyncio.sleep(0.01)
    assert not server._connections
    assert server.metrics.registry.get_sample_value(
        "rackguard_connections_open", {"listener": "bootstrap"}) == 0


async def test_a_handshake_that_never_comes_is_dropped(make_proxy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server_pki = make_pki(tmp_path, "proxy")
    server, _ = await make_proxy(
        lambda req: [echo_response(req.correlation_id)],
        settings={"tls_cert": str(server_pki.cert), "tls_key": str(server_pki.key),
                  "first_request_timeout_ms": 300})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.bootstrap_port)
    try:  # plain TCP, no ClientHello: the proxy gives up after the timeout
        assert await asyncio.wait_for(reader.read(1), 10) == b""
    finally:
        writer.close()
