"""The proxy's own connections (the metadata poller) log in with the proxy's credentials,
over TLS with the broker's host name checked, against the simulator in this process."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from proxy.cluster.poller import MetadataPoller, PollError
from proxy.cluster.view import ClusterViewStore
from simulator.cluster import SimulatedCluster
from simulator.config import SimulatorConfig, TopicSpec, racked_brokers
from simulator.sasl import SaslUsers, unsecured_jwt
from tests.tls_certs import Pki, make_pki

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path, "brokers")


@pytest.fixture
async def cluster(pki: Pki) -> AsyncIterator[SimulatedCluster]:
    config = SimulatorConfig(
        brokers=racked_brokers(3, ["a", "b", "c"]),
        topics=[TopicSpec("t", 1, 3)],
        tls_cert=pki.cert, tls_key=pki.key,
        sasl=SaslUsers({"rackguard": "proxy-secret"}, session_lifetime_ms=60_000))
    sim = SimulatedCluster(config)
    await sim.start()
    yield sim
    await sim.stop()


def _poller(sim: SimulatedCluster, pki: Pki, tmp_path: Path, mechanism: str,
            password: str, **extra: object) -> tuple[MetadataPoller, ClusterViewStore]:
    from proxy.settings import load_settings

    secret = tmp_path / "pw"
    secret.write_text(password + "\n")
    settings = load_settings({
        "upstream": sim.bootstrap_servers, "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism, "sasl_username": "rackguard",
        "sasl_password_file": str(secret), "ssl_cafile": str(pki.ca_file), **extra}, env={})
    store = ClusterViewStore(time.monotonic)
    return MetadataPoller(settings, store, lambda brokers: None, lambda: None,
                          time.monotonic), store


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_the_poller_logs_in_and_reads_the_cluster(
        cluster: SimulatedCluster, pki: Pki, tmp_path: Path, mechanism: str) -> None:
    poller, store = _poller(cluster, pki, tmp_path, mechanism, "proxy-secret")
    try:
        await poller.poll_once()
        assert sorted(store.view.brokers) == [1, 2, 3]
        assert "t" in store.view.topics
        conn = next(iter(poller._conns.values()))
        assert conn.expires_at < time.monotonic() + 60  # KIP-368: replaced before it ends
    finally:
        await poller.stop()


async def test_a_refused_login_fails_the_poll_without_the_password(
        cluster: SimulatedCluster, pki: Pki, tmp_path: Path) -> None:
    poller, store = _poller(cluster, pki, tmp_path, "SCRAM-SHA-512", "wrong-secret")
    try:
        with pytest.raises(PollError) as info:
            await poller.poll_once()
        assert "authentication failed" in str(info.value)
        assert "wrong-secret" not in str(info.value)
        assert not store.view.brokers
    finally:
        await poller.stop()


async def test_a_broker_certificate_for_another_host_is_refused(
        cluster: SimulatedCluster, pki: Pki, tmp_path: Path) -> None:
    other = make_pki(tmp_path, "elsewhere")
    cert, key = other.issue(tmp_path, "wrong-host", "kafka.example.com")
    for server in cluster.servers.values():  # the brokers now present a certificate
        await server.stop()                   # for a host they are not
    cluster.config.tls_cert, cluster.config.tls_key = cert, key
    for server in cluster.servers.values():
        await server.start()
    poller, _ = _poller(cluster, pki, tmp_path, "PLAIN", "proxy-secret",
                        ssl_cafile=str(other.ca_file))
    try:
        with pytest.raises(PollError, match="certificate|hostname|match"):
            await poller.poll_once()
    finally:
        await poller.stop()
    poller, store = _poller(cluster, pki, tmp_path, "PLAIN", "proxy-secret",
                            ssl_cafile=str(other.ca_file), ssl_skip_hostname_check=True)
    try:
        await poller.poll_once()  # the explicit opt-out: the chain is still verified
        assert sorted(store.view.brokers) == [1, 2, 3]
    finally:
        await poller.stop()


async def test_oauthbearer_reads_the_token_file_at_each_login(
        cluster: SimulatedCluster, pki: Pki, tmp_path: Path) -> None:
    from proxy.settings import load_settings

    token = tmp_path / "token"
    token.write_text(unsecured_jwt("nobody"))
    settings = load_settings({
        "upstream": cluster.bootstrap_servers, "security_protocol": "SASL_SSL",
        "sasl_mechanism": "OAUTHBEARER", "sasl_oauthbearer_token_file": str(token),
        "ssl_cafile": str(pki.ca_file)}, env={})
    store = ClusterViewStore(time.monotonic)
    poller = MetadataPoller(settings, store, lambda brokers: None, lambda: None,
                            time.monotonic)
    try:
        with pytest.raises(PollError, match="authentication failed"):
            await poller.poll_once()  # the error challenge, answered, then refused
        token.write_text(unsecured_jwt("rackguard"))  # a new token: no restart
        await poller.poll_once()
        assert sorted(store.view.brokers) == [1, 2, 3]
    finally:
        await poller.stop()
