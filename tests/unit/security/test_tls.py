"""TLS contexts and the certificate reload: real handshakes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

import pytest

from proxy.security.reload import ReloadingServerContext
from proxy.security.tls import (
    ServerTls,
    TlsError,
    UpstreamTls,
    server_context,
    upstream_context,
)
from tests.tls_certs import Pki, make_pki


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path)


def _client(pki: Pki, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    return ctx


async def _echo_server(ctx: ssl.SSLContext) -> tuple[asyncio.Server, int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(100):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ctx)
    return server, server.sockets[0].getsockname()[1]


async def _talk(port: int, ctx: ssl.SSLContext) -> tuple[bytes, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                   server_hostname="localhost")
    try:
        writer.write(b"ping")
        data = await asyncio.wait_for(reader.read(4), 5)
        subject = dict(x[0] for x in writer.get_extra_info("peercert")["subject"])
        return data, subject["commonName"]
    finally:
        writer.close()


def test_contexts_refuse_anything_below_tls_1_2(pki: Pki) -> None:
    assert server_context(ServerTls(pki.cert, pki.key)).minimum_version == \
        ssl.TLSVersion.TLSv1_2
    up = upstream_context(UpstreamTls(ca=pki.ca_file))
    assert up.minimum_version == ssl.TLSVersion.TLSv1_2
    assert up.check_hostname and up.verify_mode == ssl.CERT_REQUIRED


def test_hostname_check_off_still_verifies_the_chain(pki: Pki) -> None:
    up = upstream_context(UpstreamTls(ca=pki.ca_file, check_hostname=False))
    assert not up.check_hostname and up.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize("broken", ["missing", "garbage", "mismatch"])
def test_an_unusable_certificate_is_one_line_naming_the_file(
        pki: Pki, tmp_path: Path, broken: str) -> None:
    key = pki.key
    if broken == "missing":
        key = tmp_path / "nope.key"
    elif broken == "garbage":
        key = tmp_path / "garbage.key"
        key.write_text("not a key\n")
    else:
        _, key = pki.issue(tmp_path, "other")
    with pytest.raises(TlsError) as info:
        server_context(ServerTls(pki.cert, key))
    assert str(key) in str(info.value) and "\n" not in str(info.value)


def test_a_bad_cipher_string_is_refused(pki: Pki) -> None:
    with pytest.raises(TlsError, match="cipher"):
        server_context(ServerTls(pki.cert, pki.key, ciphers="NO-SUCH-CIPHER"))


async def test_mtls_refuses_a_client_without_a_certificate(pki: Pki, tmp_path: Path) -> None:
    client_pki = make_pki(tmp_path, "clients")
    ctx = server_context(ServerTls(pki.cert, pki.key, client_ca=client_pki.ca_file))
    server, port = await _echo_server(ctx)
    try:
        good = client_pki.issue(tmp_path, "app-1")
        assert await _talk(port, _client(pki, good)) == (b"ping", "server")
        # TLS 1.3 reports a missing client certificate after the handshake: no echo
        with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
            data, _ = await _talk(port, _client(pki))
            if not data:
                raise ConnectionError("closed")
        stranger = make_pki(tmp_path, "strangers").issue(tmp_path, "intruder")
        with pytest.raises((ssl.SSLError, ConnectionError)):
            data, _ = await _talk(port, _client(pki, stranger))
            if not data:
                raise ConnectionError("closed")
    finally:
        server.close()


async def test_reload_serves_new_connections_the_new_certificate_and_keeps_open_ones(
        pki: Pki, tmp_path: Path) -> None:
    tls = ServerTls(pki.cert, pki.key)
    results: list[bool] = []
    reloader = ReloadingServerContext(tls, results.append)
    server, port = await _echo_server(reloader.listener)
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=_client(pki), server_hostname="localhost")
        writer.write(b"a")
        assert await reader.read(1) == b"a"
        assert await _talk(port, _client(pki)) == (b"ping", "server")
        cert, key = pki.issue(tmp_path, "renewed")
        pki.cert.write_bytes(cert.read_bytes())
        pki.key.write_bytes(key.read_bytes())
        assert reloader.check() is True
        assert await _talk(port, _client(pki)) == (b"ping", "renewed")
        writer.write(b"b")  # the connection opened before the reload still works
        assert await reader.read(1) == b"b"
        writer.close()
        assert reloader.check() is None  # nothing changed since
        assert results == [True]
    finally:
        server.close()


async def test_a_bad_new_certificate_keeps_the_old_one_and_says_why(
        pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    reloader = ReloadingServerContext(ServerTls(pki.cert, pki.key))
    server, port = await _echo_server(reloader.listener)
    try:
        pki.key.write_text("-----BEGIN PRIVATE KEY-----\ngarbage\n")
        with caplog.at_level(logging.ERROR, "rackguard.tls"):
            assert reloader.check() is False
        assert "keeping the previous certificate" in caplog.text
        assert str(pki.key) in caplog.text
        assert await _talk(port, _client(pki)) == (b"ping", "server")
        assert reloader.check() is None  # reported once, not at every look
    finally:
        server.close()


async def test_reload_replaces_the_client_ca(pki: Pki, tmp_path: Path) -> None:
    old_clients = make_pki(tmp_path, "old-clients")
    new_clients = make_pki(tmp_path, "new-clients")
    ca = tmp_path / "client-ca.pem"
    ca.write_bytes(old_clients.ca_file.read_bytes())
    reloader = ReloadingServerContext(ServerTls(pki.cert, pki.key, client_ca=ca))
    server, port = await _echo_server(reloader.listener)
    old = old_clients.issue(tmp_path, "old-app")
    new = new_clients.issue(tmp_path, "new-app")
    try:
        assert (await _talk(port, _client(pki, old)))[0] == b"ping"
        ca.write_bytes(new_clients.ca_file.read_bytes())
        assert reloader.reload() is True
        assert (await _talk(port, _client(pki, new)))[0] == b"ping"
        with pytest.raises((ssl.SSLError, ConnectionError)):
            data, _ = await _talk(port, _client(pki, old))
            if not data:
                raise ConnectionError("closed")
    finally:
        server.close()


async def test_a_tls_1_3_minimum_refuses_a_tls_1_2_client(pki: Pki) -> None:
    ctx = server_context(ServerTls(pki.cert, pki.key, minimum=ssl.TLSVersion.TLSv1_3))
    server, port = await _echo_server(ctx)
    try:
        old = _client(pki)
        old.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _talk(port, old)
        assert await _talk(port, _client(pki)) == (b"ping", "server")
    finally:
        server.close()
