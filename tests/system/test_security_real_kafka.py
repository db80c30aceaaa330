"""rackguard in front of real Apache Kafka speaking SASL_SSL (SCRAM-SHA-512).

A cluster of its own (tests/system/cluster.py with ClusterSecurity: a SASL_SSL
listener on every broker beside the inter-broker PLAINTEXT one, users created
when the storage is formatted, a PEM key store from a CA made here). The proxy
speaks TLS to its clients, TLS and its own SCRAM login to the brokers, and
relays each client's own SCRAM exchange. Checked: an idempotent acks=all
producer and a consumer (librdkafka and kafka-python) through the proxy; a
wrong password gets Kafka's refusal unchanged; a client that skips
authentication gets nothing through; the rack rule (a topic asking for more
racks than exist) still refuses acks=all for an authenticated client; the config topic
is followed on the proxy's own SASL_SSL connection through re-authentications.
"""

from __future__ import annotations

import ssl
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import RackguardProxy
from tests.integration.kip_support import RACKS_PREFIX, raw_produce
from tests.integration.security_support import TlsRawConnection, sasl_login
from tests.prometheus_text import metrics_url, read_samples, sample
from tests.system import kafka_dist
from tests.system.cluster import BROKER_RACKS, ClusterSecurity, KafkaCluster
from tests.tls_certs import Pki, make_pki

USERS = {"alice": "alice-secret", "rackguard": "proxy-secret"}
REAUTH_MS = 4000  # the brokers' session lifetime: clients re-authenticate (KIP-368)
SASL_AUTHENTICATION_FAILED = 58
NOT_ENOUGH_REPLICAS = 19


@dataclass
class SecureRig:
    cluster: KafkaCluster
    proxy: RackguardProxy
    proxy_pki: Pki
    broker_pki: Pki
    metrics_port: int

    def metric(self, name: str, labels: dict[str, str]) -> float:
        return sample(read_samples(metrics_url(self.metrics_port)), name, **labels) or 0.0

    def client_ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.proxy_pki.ca_file))

    def librdkafka(self, password: str = USERS["alice"]) -> dict[str, object]:
        return {"bootstrap.servers": self.proxy.bootstrap, "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.proxy_pki.ca_file),
                "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice",
                "sasl.password": password, "log_level": 3}


def _keystore(pki: Pki, directory: Path) -> Path:
    """One PEM: the broker's key as unencrypted PKCS#8, then its certificate chain."""
    key = serialization.load_pem_private_key(pki.key.read_bytes(), password=None)
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    store = directory / "broker-keystore.pem"
    store.write_bytes(pkcs8 + pki.cert.read_bytes())
    return store


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureRig]:
    problem = kafka_dist.unavailable_reason()
    if problem:
        pytest.skip(problem)
    work = tmp_path_factory.mktemp("kafka-sasl-ssl")
    broker_pki = make_pki(work, "brokers")
    proxy_pki = make_pki(work, "proxy")
    cluster = KafkaCluster.create(work, security=ClusterSecurity(
        _keystore(broker_pki, work), dict(USERS), reauth_ms=REAUTH_MS))
    cluster.start()
    metrics_port = free_port()
    secret = work / "proxy-password"
    secret.write_text(USERS["rackguard"])
    proxy = RackguardProxy(cluster.secure_bootstrap, work, tuple(BROKER_RACKS), (
        "--security-protocol", "SASL_SSL", "--ssl-cafile", str(broker_pki.ca_file),
        "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "rackguard",
        "--sasl-password-file", str(secret),
        "--tls-cert", str(proxy_pki.cert), "--tls-key", str(proxy_pki.key),
        "--metadata-refresh-interval-ms", "500", "--topic-min-insync-racks", "strict=4",
        "--metrics-port", str(metrics_port)))
    try:
        proxy.start(timeout=60)
        yield SecureRig(cluster, proxy, proxy_pki, broker_pki, metrics_port)
    finally:
        proxy.stop()
        cluster.stop()


def _produce(rig: SecureRig, topic: str, values: list[bytes], **conf: object) -> list[object]:
    from confluent_kafka import Producer

    producer = Producer({**rig.librdkafka(), "acks": -1, "enable.idempotence": True,
                         "message.timeout.ms": 30000, **conf})
    errors: list[object] = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(60) == 0
    return errors


def test_idempotent_produce_and_consume_through_the_proxy(secure: SecureRig) -> None:
    from kafka import KafkaConsumer

    values = [f"v{i}".encode() for i in range(20)]
    assert _produce(secure, "open", values) == [None] * 20
    consumer = KafkaConsumer(
        "open", bootstrap_servers=secure.proxy.bootstrap, security_protocol="SASL_SSL",
        ssl_cafile=str(secure.proxy_pki.ca_file), sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice", sasl_plain_password=USERS["alice"],
        auto_offset_reset="earliest", consumer_timeout_ms=30000)
    try:
        got = []
        for record in consumer:
            got.append(record.value)
            if len(got) == len(values):
                break
    finally:
        consumer.close()
    assert sorted(got) == sorted(values)


def test_a_wrong_password_gets_kafkas_refusal_unchanged(secure: SecureRig) -> None:
    host, port = secure.proxy.listen_host, secure.proxy.bootstrap_port
    with TlsRawConnection(host, port, secure.client_ssl()) as conn:
        through = sasl_login(conn, "alice", "wrong")[-1]
    node = secure.cluster.brokers[0]
    direct_ctx = ssl.create_default_context(cafile=str(secure.broker_pki.ca_file))
    with TlsRawConnection("127.0.0.1", node.secure_port or 0, direct_ctx) as conn:
        direct = sasl_login(conn, "alice", "wrong")[-1]
    assert through.error_code == SASL_AUTHENTICATION_FAILED
    assert through.to_dict() == direct.to_dict()


def test_a_client_that_skips_authentication_gets_nothing(secure: SecureRig) -> None:
    host, port = secure.proxy.listen_host, secure.proxy.bootstrap_port
    with TlsRawConnection(host, port, secure.client_ssl()) as conn:
        with pytest.raises(ConnectionError):
            conn.request(MetadataRequest(version=4, topics=None,
                                         allow_auto_topic_creation=False),
                         MetadataResponse, 4)


def test_the_rack_rule_applies_to_an_authenticated_client(secure: SecureRig) -> None:
    # acks=1 is never checked: it creates the topic; acks=all needs 4 racks of the 3
    assert _produce(secure, "strict", [b"created"], acks=1, **{"enable.idempotence": False}
                    ) == [None]
    host, port = secure.proxy.listen_host, secure.proxy.bootstrap_port
    with TlsRawConnection(host, port, secure.client_ssl()) as conn:
        assert sasl_login(conn, "alice", USERS["alice"])[-1].error_code == 0
        results = raw_produce(conn, [("strict", 0, [b"refused"])])
    assert [r.error_code for r in results] == [NOT_ENOUGH_REPLICAS]
    assert (results[0].error_message or "").startswith(RACKS_PREFIX)


def test_reauthentication_passes_through_on_open_connections(secure: SecureRig) -> None:
    """The brokers end a session after REAUTH_MS unless the client re-authenticates on the
    same connection: a producer going for three lifetimes re-authenticates through the
    proxy, and none of its records fails."""
    from confluent_kafka import Producer

    producer = Producer({**secure.librdkafka(), "acks": -1, "enable.idempotence": True,
                         "message.timeout.ms": 30000, "linger.ms": 5})
    errors: list[object] = []
    authenticate = {"api": "SaslAuthenticate"}
    producer.produce("reauth", b"first", on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(60) == 0
    logins = secure.metric("rackguard_requests_total", authenticate)
    connections = secure.metric("rackguard_connections_total", {"listener": "bootstrap"}) + \
        sum(secure.metric("rackguard_connections_total", {"listener": f"node-{n}"})
            for n in BROKER_RACKS)
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    while time.monotonic() < deadline:
        producer.produce("reauth", b"v", on_delivery=lambda err, msg: errors.append(err))
        producer.poll(0.1)
    assert producer.flush(60) == 0
    assert set(errors) == {None}
    after = secure.metric("rackguard_connections_total", {"listener": "bootstrap"}) + \
        sum(secure.metric("rackguard_connections_total", {"listener": f"node-{n}"})
            for n in BROKER_RACKS)
    # SCRAM takes two SaslAuthenticate rounds per login: more than the new connections
    # (a partition on another leader) account for were re-authentications of open ones
    new_logins = secure.metric("rackguard_requests_total", authenticate) - logins
    assert new_logins > 2 * (after - connections), (new_logins, after - connections)


def test_the_config_topic_is_followed_over_sasl_ssl(secure: SecureRig) -> None:
    """The config topic's reader fetches on a connection of the proxy's own (TLS, its SCRAM
    login): /readyz says the topic was read to its end, and over three session lifetimes
    (the reader logs in again before each one ends) no read fails and one Fetch or more
    is sent per second."""
    url = f"http://127.0.0.1:{secure.metrics_port}/readyz"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                ready = answer.read().decode()
                break
        except OSError:
            assert time.monotonic() < deadline, "/readyz never ready"
            time.sleep(0.5)
    assert "not read to its end" not in ready and "no answer" not in ready, ready
    fetch = {"api": "Fetch", "direction": "sent"}
    before = secure.metric("rackguard_own_request_bytes_total", fetch)
    failures = secure.metric("rackguard_config_topic_read_failures_total", {})
    time.sleep(3 * REAUTH_MS / 1000)
    assert secure.metric("rackguard_config_topic_read_failures_total", {}) == failures
    sent = secure.metric("rackguard_own_request_bytes_total", fetch) - before
    assert sent > 3 * REAUTH_MS / 1000 * 50, sent  # about two Fetch requests a second
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert "no answer" not in answer.read().decode()
