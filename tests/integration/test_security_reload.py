"""Certificate rotation under load: the listeners' certificate is replaced (SIGHUP) while a
producer keeps producing through the proxy over TLS. Open connections are not dropped and
keep working; new connections get the new certificate; a bad new certificate keeps the
old one and the log says why."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from kafka import KafkaProducer

from .kip_support import topic, wait_until
from .security_support import Secured, TlsRawConnection, start_secured

pytestmark = pytest.mark.integration


def _issuer(s: Secured) -> str:
    """The common name of the certificate a new connection to the proxy gets."""
    with TlsRawConnection(s.proxy.listen_host, s.proxy.bootstrap_port, s.client_ssl()) as c:
        cert = c.sock.getpeercert()  # type: ignore[attr-defined]
    assert cert is not None
    return str(dict(x[0] for x in cert["subject"])["commonName"])


def _replace(s: Secured, directory: Path, name: str) -> None:
    """Put a new certificate (signed by the same CA) in place, each file atomically."""
    cert, key = s.proxy_pki.issue(directory, name)
    for new, live in ((key, s.proxy_pki.key), (cert, s.proxy_pki.cert)):
        tmp = live.with_suffix(".tmp")
        tmp.write_bytes(new.read_bytes())
        os.replace(tmp, live)


def _api_versions(conn: TlsRawConnection, corr: int) -> int:
    from kafka.protocol.metadata import ApiVersionsRequest

    request = ApiVersionsRequest(version=0)
    request.with_header(correlation_id=corr, client_id="long-lived")
    return len(conn.send_raw(bytes(request.encode(header=True, framed=True))))


def test_rotation_under_load_drops_no_connection(tmp_path: Path) -> None:
    s = start_secured("SSL", tmp_path, topic("rotate"),
                      extra=("--tls-reload-interval-ms", "600000"))  # SIGHUP only
    stop = threading.Event()
    acked: list[int] = []
    errors: list[str] = []

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=s.proxy.bootstrap, acks="all",
                                 linger_ms=2, **s.kafka_python())
        try:
            i = 0
            while not stop.is_set():
                try:
                    producer.send("rotate", f"v{i}".encode()).get(timeout=10)
                    acked.append(i)
                except Exception as exc:  # noqa: BLE001 - every failure is the finding
                    errors.append(repr(exc))
                i += 1
        finally:
            producer.close(5)

    worker = threading.Thread(target=produce, name="producer")
    try:
        assert _issuer(s) == "proxy"
        long_lived = TlsRawConnection(s.proxy.listen_host, s.proxy.bootstrap_port,
                                      s.client_ssl())
        assert _api_versions(long_lived, 1) > 8
        worker.start()
        wait_until(lambda: len(acked) >= 20, 20, "the producer to be going")
        before = len(acked)

        _replace(s, tmp_path, "renewed")
        s.proxy.sighup()
        s.proxy.wait_for_log("TLS certificate reloaded")
        assert _issuer(s) == "renewed"

        s.proxy_pki.key.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n")
        s.proxy.sighup()
        s.proxy.wait_for_log("TLS reload failed, keeping the previous certificate")
        assert _issuer(s) == "renewed"

        wait_until(lambda: len(acked) >= before + 20, 20, "produces after the rotation")
        assert _api_versions(long_lived, 2) > 8  # opened before the rotation, still served
        long_lived.close()
    finally:
        stop.set()
        if worker.is_alive() or worker.ident is not None:
            worker.join(30)
        log = s.proxy.log_text()
        s.stop()
    assert errors == []
    assert "closing connection" not in log and "broker closed the connection" not in log
