"""TLS and SASL through the proxy, against the simulator speaking the same (docs/security.md).

For each of SSL, SASL_PLAINTEXT and SASL_SSL (both sides speak it): librdkafka
(confluent-kafka), kafka-python, aiokafka and the Java client produce
idempotently with acks=all and consume back through the proxy, whose own
poller logs in with SCRAM-SHA-512 from a password file. With SASL: a wrong
password gets the broker's refusal byte for byte; a client that skips
authentication gets nothing through; a user the brokers do not let produce
(the simulator's stand-in for an ACL) gets the broker's
TOPIC_AUTHORIZATION_FAILED; a re-authentication (KIP-368) on an open
connection passes through; and the rack rule still applies to an
authenticated client.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from .harness import java
from .kip_support import (
    NOT_ENOUGH_REPLICAS,
    RACKS_PREFIX,
    kill_all_but_rack_a,
    make_producer,
    raw_produce,
    restore_racks,
    stored_values,
    topic,
)
from .security_support import (
    PROTOCOLS,
    USERS,
    Secured,
    TlsRawConnection,
    sasl_login,
    start_secured,
)

pytestmark = pytest.mark.integration
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
TOPICS = [topic(f"sec-{c}") for c in (*CLIENTS, "java")] + [topic("racks"), topic("acl")]
N = 10
TOPIC_AUTHORIZATION_FAILED = 29
SASL_AUTHENTICATION_FAILED = 58


@pytest.fixture(scope="module", params=PROTOCOLS)
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Secured]:
    directory = tmp_path_factory.mktemp(f"sec-{request.param.lower()}")
    setup = start_secured(request.param, directory, *TOPICS)
    yield setup
    setup.stop()


def _consume(client: str, s: Secured, name: str, n: int) -> list[bytes]:
    bootstrap = s.proxy.bootstrap
    if client == "kafka-python":
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(name, bootstrap_servers=bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=15000,
                                 **s.kafka_python())
        try:
            out = []
            for record in consumer:
                out.append(record.value)
                if len(out) >= n:
                    break
            return out
        finally:
            consumer.close()
    if client == "aiokafka":
        from aiokafka import AIOKafkaConsumer

        async def run() -> list[bytes]:
            consumer = AIOKafkaConsumer(name, bootstrap_servers=bootstrap,
                                        auto_offset_reset="earliest", **s.aiokafka())
            await consumer.start()
            try:
                out: list[bytes] = []
                async with asyncio.timeout(15):
                    while len(out) < n:
                        batches = await consumer.getmany(timeout_ms=500)
                        out += [r.value for rs in batches.values() for r in rs]
                return out
            finally:
                await consumer.stop()

        return asyncio.run(run())
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{name}",
                         "auto.offset.reset": "earliest", "log_level": 3, **s.librdkafka()})
    try:
        consumer.subscribe([name])
        out = []
        for _ in range(300):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
            if len(out) >= n:
                break
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_python_clients_produce_and_consume(secured: Secured, client: str) -> None:
    name = f"sec-{client}"
    values = [f"{secured.protocol}-{client}-{i}".encode() for i in range(N)]
    opts = secured.settings(client)
    if client == "confluent-kafka":
        opts.update({"enable.idempotence": True, "message.timeout.ms": 20000})
        producer = make_producer(client, secured.proxy.bootstrap, "all", **opts)
    elif client == "kafka-python":
        producer = make_producer(client, secured.proxy.bootstrap, "all",
                                 enable_idempotence=True, request_timeout_ms=10000,
                                 delivery_timeout_ms=20000, **opts)
    else:
        producer = make_producer(client, secured.proxy.bootstrap, "all",
                                 enable_idempotence=True, request_timeout_ms=10000, **opts)
    try:
        outcomes = producer.send(name, None, values)
    finally:
        producer.close()
    assert all(o.ok for o in outcomes), outcomes
    assert sorted(stored_values(secured.cluster, name, range(3))) == sorted(values)
    assert sorted(_consume(client, secured, name, N)) == sorted(values)


@pytest.mark.java
def test_java_client_produces_and_consumes(secured: Secured, java_client: java.JavaClient
                                           ) -> None:
    opts = secured.java()
    r = java_client.run("produce", timeout=90, topic="sec-java", n=N, **opts)
    assert r.result is not None and r.result["acked"] == N, str(r)
    r = java_client.run("consume", timeout=90, topic="sec-java", n=N, group="g-java", **opts)
    assert r.result is not None and r.result["consumed"] == N, str(r)


def _sasl(secured: Secured) -> None:
    if not secured.sasl:
        pytest.skip("no SASL in this set-up")


def test_a_wrong_password_gets_the_brokers_refusal_unchanged(secured: Secured) -> None:
    _sasl(secured)
    with secured.raw() as conn:
        through = sasl_login(conn, "alice", "not-her-password")
        assert conn.closed_by_peer()  # the broker closes after a failed authentication
    host, port = secured.cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(secured.broker_pki.ca_file))
    with TlsRawConnection(host, int(port), ctx if secured.tls else None) as direct:
        straight = sasl_login(direct, "alice", "not-her-password")  # the broker, no proxy
    assert through[-1].error_code == SASL_AUTHENTICATION_FAILED
    assert through[-1].to_dict() == straight[-1].to_dict()


def test_a_client_that_skips_authentication_gets_nothing_through(secured: Secured) -> None:
    _sasl(secured)
    before = secured.cluster.record_count("acl")
    with secured.raw() as conn:
        conn.sock.sendall(bytes(_produce_frame()))
        assert conn.closed_by_peer()
    with secured.raw() as conn:
        with pytest.raises(ConnectionError):
            conn.request(MetadataRequest(version=4, topics=None,
                                         allow_auto_topic_creation=False),
                         MetadataResponse, 4)
    assert secured.cluster.record_count("acl") == before
    secured.proxy.wait_for_log("before the broker authenticated the client")


def _produce_frame() -> bytes:
    from .kip_support import produce_request

    request = produce_request([("acl", 0, [b"sneaky"])])
    request.with_header(correlation_id=1, client_id="sneaky")
    return bytes(request.encode(version=9, header=True, framed=True))


def test_authorization_stays_with_the_broker(secured: Secured) -> None:
    _sasl(secured)
    with secured.raw() as conn:
        assert sasl_login(conn, "reader", USERS["reader"])[-1].error_code == 0
        results = raw_produce(conn, [("acl", 0, [b"denied"])])
    assert [r.error_code for r in results] == [TOPIC_AUTHORIZATION_FAILED]


def test_reauthentication_passes_through(secured: Secured) -> None:
    _sasl(secured)
    with secured.raw() as conn:
        for mechanism in ("SCRAM-SHA-512", "PLAIN", "SCRAM-SHA-256"):  # KIP-368: again
            answers = sasl_login(conn, "alice", USERS["alice"], mechanism)
            assert all(a.error_code == 0 for a in answers), answers
            _, meta = conn.request(MetadataRequest(version=4, topics=None,
                                                   allow_auto_topic_creation=False),
                                   MetadataResponse, 4)
            assert {t.name for t in meta.topics} >= {"acl", "racks"}


def test_the_rack_rule_applies_after_authentication(secured: Secured) -> None:
    if secured.protocol != "SASL_SSL":
        pytest.skip("checked on SASL_SSL")
    kill_all_but_rack_a(secured.cluster)
    try:
        secured.proxy.refreshed_since(time.monotonic())  # the proxy's view follows
        with secured.raw() as conn:
            assert sasl_login(conn, "alice", USERS["alice"])[-1].error_code == 0
            results = raw_produce(conn, [("racks", 0, [b"one-rack"])])
        assert [r.error_code for r in results] == [NOT_ENOUGH_REPLICAS]
        assert (results[0].error_message or "").startswith(RACKS_PREFIX)
        assert stored_values(secured.cluster, "racks", [0]) == []
    finally:
        restore_racks(secured.cluster)
        secured.proxy.refreshed_since(time.monotonic())


def test_mtls_refuses_a_client_without_a_certificate(tmp_path: Path) -> None:
    from tests.tls_certs import make_pki

    clients = make_pki(tmp_path, "clients")
    setup = start_secured("SSL", tmp_path, topic("mtls"), client_ca=clients.ca_file)
    try:
        with setup.raw() as conn:  # a TLS client with no certificate
            conn.sock.sendall(_api_versions_frame())
            assert conn.closed_by_peer()
        cert, key = clients.issue(tmp_path, "app-1")
        ctx = setup.client_ssl()
        ctx.load_cert_chain(str(cert), str(key))
        with TlsRawConnection(setup.proxy.listen_host, setup.proxy.bootstrap_port, ctx) as conn:
            raw = conn.send_raw(_api_versions_frame())
            assert len(raw) > 8
    finally:
        setup.stop()


def _api_versions_frame() -> bytes:
    from kafka.protocol.metadata import ApiVersionsRequest

    request = ApiVersionsRequest(version=0)
    request.with_header(correlation_id=1, client_id="probe")
    return bytes(request.encode(header=True, framed=True))


def test_oauthbearer_is_relayed_too(secured: Secured) -> None:
    """OAUTHBEARER (librdkafka's unsecured JWT): one round, the gate opens at the broker's
    empty success token; a token for a user the brokers do not know gets their refusal."""
    _sasl(secured)
    from confluent_kafka import Producer

    def produce(principal: str) -> list[Any]:
        conf = {**secured.librdkafka(), "sasl.mechanisms": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": f"principal={principal}",
                "bootstrap.servers": secured.proxy.bootstrap, "acks": -1,
                "message.timeout.ms": 8000, "log_level": 0}
        conf.pop("sasl.username"), conf.pop("sasl.password")
        producer = Producer(conf)
        results: list[Any] = []
        producer.produce("acl", b"bearer", on_delivery=lambda err, msg: results.append(err))
        producer.flush(30)
        return results

    assert produce("alice") == [None]
    refused = produce("mallory")
    assert len(refused) == 1 and refused[0] is not None
    assert stored_values(secured.cluster, "acl", range(3)).count(b"bearer") == 1


def test_the_config_topic_is_written_and_read_with_the_proxys_credentials(
        secured: Secured) -> None:
    """min.insync.racks set through the Admin API (an authenticated client) is stored in the
    config topic by the proxy's own clients, over TLS and with its SASL login, and read
    back: DescribeConfigs through the proxy shows it."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=secured.proxy.bootstrap,
                             request_timeout_ms=15000, **secured.kafka_python())
    try:
        result = admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, "racks", configs={"min.insync.racks": "3"})],
            incremental=True)
        assert result == {"topic": {"racks": "OK"}}, result
        shown = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "racks")])
        assert shown["topic"]["racks"]["min.insync.racks"]["value"] == "3"
        admin.alter_configs([ConfigResource(  # back as it was for the other tests
            ConfigResourceType.TOPIC, "racks", configs={"min.insync.racks": "2"})],
            incremental=True)
    finally:
        admin.close()
    assert "reading failed" not in secured.proxy.log_text()
