"""Support for the security tests: a simulated cluster speaking TLS and/or SASL, and
``rackguard serve`` in front of it speaking the same to its clients.

Three set-ups, named after the protocol both sides speak: ``SSL`` (TLS on both
sides), ``SASL_PLAINTEXT`` (each client authenticates itself to the brokers
through the proxy; the proxy logs its own connections in with SCRAM-SHA-512)
and ``SASL_SSL`` (both). Certificates are made for the test (trustme); the
proxy's listeners present one signed by the "proxy" CA, the simulated brokers
one signed by the "brokers" CA, which only the proxy trusts.

Users of the simulated brokers: ``alice`` (produces and consumes), ``reader``
(whose Produce requests the brokers refuse, as an ACL would) and ``rackguard``
(the proxy's own login).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scramp
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from simulator.config import SimulatorConfig, TopicSpec, racked_brokers
from simulator.sasl import SaslUsers
from simulator.threaded import ThreadedCluster
from tests.tls_certs import Pki, make_pki

from .harness import wire
from .harness.ports import free_port_block
from .kip_support import NODE_IDS, RACKS, KipProxy

PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
USERS = {"alice": "alice-secret", "reader": "reader-secret", "rackguard": "proxy-secret"}
CLIENT_MECHANISM = "SCRAM-SHA-512"


@dataclass
class Secured:
    """A running set-up: the cluster, the proxy and what clients need to reach it."""

    protocol: str
    cluster: ThreadedCluster
    proxy: KipProxy
    proxy_pki: Pki
    broker_pki: Pki
    directory: Path

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def client_ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.proxy_pki.ca_file))

    # client settings, without the bootstrap address (``proxy.bootstrap``)
    def kafka_python(self, user: str = "alice", password: str | None = None) -> dict[str, Any]:
        cfg: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            cfg["ssl_cafile"] = str(self.proxy_pki.ca_file)
        if self.sasl:
            cfg.update(sasl_mechanism=CLIENT_MECHANISM, sasl_plain_username=user,
                       sasl_plain_password=USERS[user] if password is None else password)
        return cfg

    def aiokafka(self, user: str = "alice") -> dict[str, Any]:
        cfg: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            cfg["ssl_context"] = self.client_ssl()
        if self.sasl:
            cfg.update(sasl_mechanism=CLIENT_MECHANISM, sasl_plain_username=user,
                       sasl_plain_password=USERS[user])
        return cfg

    def librdkafka(self, user: str = "alice", password: str | None = None) -> dict[str, Any]:
        cfg: dict[str, Any] = {"security.protocol": self.protocol}
        if self.tls:
            cfg["ssl.ca.location"] = str(self.proxy_pki.ca_file)
        if self.sasl:
            cfg.update({"sasl.mechanisms": CLIENT_MECHANISM, "sasl.username": user,
                        "sasl.password": USERS[user] if password is None else password})
        return cfg

    def java(self, user: str = "alice") -> dict[str, str]:
        """RackguardClient options (``prop.<name>``: a client property)."""
        cfg = {"bootstrap": self.proxy.bootstrap, "prop.security.protocol": self.protocol}
        if self.tls:
            cfg["prop.ssl.truststore.type"] = "PEM"
            cfg["prop.ssl.truststore.location"] = str(self.proxy_pki.ca_file)
        if self.sasl:
            cfg["prop.sasl.mechanism"] = CLIENT_MECHANISM
            cfg["prop.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{user}" password="{USERS[user]}";')
        return cfg

    def settings(self, client: str, user: str = "alice") -> dict[str, Any]:
        return {"kafka-python": self.kafka_python, "aiokafka": self.aiokafka,
                "confluent-kafka": self.librdkafka}[client](user)

    def raw(self, address: tuple[str, int] | None = None) -> wire.RawKafkaConnection:
        """A lock-step connection to the proxy (its bootstrap port unless ``address``)."""
        host, port = address or (self.proxy.listen_host, self.proxy.bootstrap_port)
        return TlsRawConnection(host, port, self.client_ssl() if self.tls else None)

    def stop(self) -> None:
        self.proxy.stop()
        self.cluster.stop()


class TlsRawConnection(wire.RawKafkaConnection):
    """The harness's raw connection, over TLS when given a context."""

    def __init__(self, host: str, port: int, ctx: ssl.SSLContext | None,
                 timeout: float = 10.0) -> None:
        super().__init__(host, port, timeout)
        if ctx is not None:
            self.sock = ctx.wrap_socket(self.sock, server_hostname=host)

    def closed_by_peer(self) -> bool:
        """True when the peer has closed the connection (no bytes left to read)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, ssl.SSLError):
            return True


def sasl_login(conn: wire.RawKafkaConnection, user: str, password: str,
               mechanism: str = CLIENT_MECHANISM) -> list[Any]:
    """A client's own SASL exchange on ``conn`` (SaslHandshake v1, SaslAuthenticate v2),
    stopping at the first refusal; the decoded SaslAuthenticate responses."""
    handshake = SaslHandshakeRequest(version=1, mechanism=mechanism)
    _, answer = conn.request(handshake, SaslHandshakeResponse, 1)
    assert answer.error_code == 0, answer
    answers = []
    if mechanism == "PLAIN":
        tokens = [b"\0" + user.encode() + b"\0" + password.encode()]
        _, resp = conn.request(SaslAuthenticateRequest(version=2, auth_bytes=tokens[0]),
                               SaslAuthenticateResponse, 2)
        return [resp]
    scram = scramp.ScramClient([mechanism], user, password)
    _, first = conn.request(SaslAuthenticateRequest(
        version=2, auth_bytes=scram.get_client_first().encode()), SaslAuthenticateResponse, 2)
    answers.append(first)
    if first.error_code:
        return answers
    scram.set_server_first(bytes(first.auth_bytes).decode())
    _, final = conn.request(SaslAuthenticateRequest(
        version=2, auth_bytes=scram.get_client_final().encode()), SaslAuthenticateResponse, 2)
    answers.append(final)
    return answers


def start_secured(protocol: str, directory: Path, *topics: TopicSpec,
                  client_ca: Path | None = None, extra: tuple[str, ...] = ()) -> Secured:
    proxy_pki = make_pki(directory, "proxy")
    broker_pki = make_pki(directory, "brokers")
    tls = protocol in ("SSL", "SASL_SSL")
    sasl = protocol.startswith("SASL_")
    base = free_port_block(range(len(NODE_IDS)))
    config = SimulatorConfig(
        brokers=racked_brokers(len(NODE_IDS), list(RACKS), port_base=base),
        topics=list(topics),
        default_min_insync_replicas=2,
        tls_cert=broker_pki.cert if tls else None,
        tls_key=broker_pki.key if tls else None,
        sasl=SaslUsers(USERS, produce_denied=frozenset({"reader"})) if sasl else None,
    )
    cluster = ThreadedCluster(config).start()
    flags = ["--security-protocol", protocol]
    if tls:
        flags += ["--tls-cert", str(proxy_pki.cert), "--tls-key", str(proxy_pki.key),
                  "--ssl-cafile", str(broker_pki.ca_file)]
    if client_ca is not None:
        flags += ["--tls-client-ca", str(client_ca)]
    if sasl:
        secret = directory / "proxy-password"
        secret.write_text(USERS["rackguard"] + "\n")
        flags += ["--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "rackguard",
                  "--sasl-password-file", str(secret)]
    proxy = KipProxy(cluster, directory, extra=tuple(flags) + extra)
    try:
        proxy.start()
    except BaseException:
        cluster.stop()
        raise
    return Secured(protocol, cluster, proxy, proxy_pki, broker_pki, directory)
