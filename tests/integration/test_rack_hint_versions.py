"""Every Fetch and JoinGroup version the proxy passes, through a proxy with client_rack,
to the simulator (RackAwareReplicaSelector); and bad ones close only their connection.

Invariants under test: Fetch v4-v15 keep working (v11+ are given the rack, so the leader
redirects to the same-rack follower; older ones get records from the leader); JoinGroup
v0-v9 keep working, and the coordinator sees the member's subscription with the rack
(a kafka-python-style v0 "range" subscription raised to v3); a truncated or corrupted
Fetch or JoinGroup closes that connection alone, counted in rackguard_bad_frames_total.
"""

from __future__ import annotations

import random
import socket
import struct
import uuid
from collections.abc import Iterator

import pytest
from kafka.protocol.consumer import FetchRequest, JoinGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Sub

from simulator.config import SimulatorConfig, TopicSpec, racked_brokers
from simulator.threaded import ThreadedCluster
from tests.prometheus_text import metrics_url, read_samples, total
from tests.simulator.helpers import RawClient, batch
from tests.simulator.test_wire import produce

from . import kip_support as ks
from .harness import wire
from .harness.ports import free_port, free_port_block
from .harness.procs import RackguardProxy

pytestmark = pytest.mark.integration

RACK_OF = {1: "rack-a", 4: "rack-a", 2: "rack-b", 5: "rack-b", 3: "rack-c", 6: "rack-c"}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[tuple[ThreadedCluster, RackguardProxy, int, int, str]]:
    """The cluster, a proxy whose client_rack is a follower's rack of partition 0, its
    metrics port, the leader of partition 0 and the follower's rack."""
    base = free_port_block(range(len(ks.NODE_IDS)))
    config = SimulatorConfig(
        brokers=racked_brokers(len(ks.NODE_IDS), list(ks.RACKS), port_base=base),
        topics=[TopicSpec("t", 1, 3)], default_min_insync_replicas=1,
        replica_selector="rack_aware")
    with ThreadedCluster(config) as cluster:
        info = cluster.partition_info("t", 0)
        leader = info["leader"]
        rack = next(RACK_OF[r] for r in info["replicas"] if RACK_OF[r] != RACK_OF[leader])
        with RawClient("127.0.0.1", cluster.cluster.port_of(leader)) as c:
            produce(c, batch([b"one", b"two"]))
        metrics_port = free_port()
        proxy = RackguardProxy(
            ",".join(f"127.0.0.1:{p}" for p in ks.broker_ports(cluster)),
            tmp_path_factory.mktemp("proxy"), ks.NODE_IDS,
            ("--client-rack", rack, "--metrics-port", str(metrics_port)))
        proxy.start()
        try:
            for n in ks.NODE_IDS:
                wire.wait_for_port(*proxy.broker_address(n), 15, proc=proxy.proc)
            yield cluster, proxy, metrics_port, leader, rack
        finally:
            proxy.stop()


def fetch_request(topic_id: uuid.UUID | None = None) -> FetchRequest:
    fp = FetchRequest.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20)
    return FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1,
                        topics=[FetchRequest.FetchTopic(topic="t", topic_id=topic_id,
                                                        partitions=[fp])],
                        forgotten_topics_data=[], rack_id="")


@pytest.mark.parametrize("version", range(4, 16))
def test_every_fetch_version(rig: tuple[ThreadedCluster, RackguardProxy, int, int, str],
                             version: int) -> None:
    cluster, proxy, _, leader, rack = rig
    topic_id = uuid.UUID(cluster.snapshot()["topics"]["t"]["topic_id"])
    with RawClient(*proxy.broker_address(leader)) as c:
        [part] = c.call(fetch_request(topic_id), version).responses[0].partitions
    assert part.error_code == 0
    if version >= 11:  # given the rack: sent to the follower there
        assert RACK_OF[part.preferred_read_replica] == rack and not part.records
        with RawClient(*proxy.broker_address(part.preferred_read_replica)) as c:
            [served] = c.call(fetch_request(topic_id), version).responses[0].partitions
        assert served.error_code == 0 and served.records
    else:
        assert part.records


def subscription_v0() -> bytes:
    return bytes(Sub(version=0, topics=["t"], user_data=None).encode())


@pytest.mark.parametrize("version", range(10))
def test_every_join_group_version(rig: tuple[ThreadedCluster, RackguardProxy, int, int, str],
                                  version: int) -> None:
    cluster, proxy, _, _, rack = rig
    coordinator = cluster.call(lambda c: c.core.state.coordinator())
    req = JoinGroupRequest(group_id=f"g{version}", session_timeout_ms=6000,
                           rebalance_timeout_ms=6000, member_id="", group_instance_id=None,
                           protocol_type="consumer", reason=None, protocols=[
                               JoinGroupRequest.JoinGroupRequestProtocol(
                                   name="range", metadata=subscription_v0())])
    with RawClient(*proxy.broker_address(coordinator)) as c:
        resp = c.call(req, version)
    assert resp.error_code == 0
    [member] = resp.members
    assert Sub.decode(member.metadata).rack_id == rack


def bad_requests(version: int) -> list[bytes]:
    req = fetch_request()
    req.with_header(correlation_id=1, client_id="bad")
    fetch = bytes(req.encode(version=12, header=True, framed=True))
    join = JoinGroupRequest(group_id="g", session_timeout_ms=1, rebalance_timeout_ms=1,
                            member_id="", group_instance_id=None, protocol_type="consumer",
                            reason=None, protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                                name="range", metadata=subscription_v0())])
    join.with_header(correlation_id=1, client_id="bad")
    joined = bytes(join.encode(version=version, header=True, framed=True))
    rng = random.Random(version)
    out = []
    for data in (fetch, joined):
        cut = rng.randrange(20, len(data) - 1)
        out.append(struct.pack(">i", cut - 4) + data[4:cut])  # truncated, prefix fixed up
    return out


def bad_frames(metrics_port: int) -> float:
    return total(read_samples(metrics_url(metrics_port)), "rackguard_bad_frames_total",
                 side="client")


@pytest.mark.parametrize("version", [6, 9])
def test_bad_fetch_and_join_group_close_one_connection(
        rig: tuple[ThreadedCluster, RackguardProxy, int, int, str], version: int) -> None:
    cluster, proxy, metrics_port, leader, _ = rig
    before = bad_frames(metrics_port)
    with RawClient(*proxy.broker_address(leader)) as good:
        for frame in bad_requests(version):
            with socket.create_connection(proxy.broker_address(leader), 5) as s:
                s.sendall(frame)
                assert s.recv(1) == b""  # closed, no answer
            [part] = good.call(fetch_request(), 12).responses[0].partitions
            assert part.error_code == 0  # the other connection is untouched
    assert bad_frames(metrics_port) == before + 2
