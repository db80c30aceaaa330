"""The simulator's RackAwareReplicaSelector and follower fetching (KIP-392).

Invariants under test: with replica_selector="rack_aware" a leader answers a consumer
naming another rack with an in-sync, live replica of that rack and no records (at once,
not after max_wait_ms), and with records when the leader is in the client's rack, the
client names no rack, no same-rack replica is in sync, or the version predates v11; a
follower serves a consumer's v11+ fetch and refuses older ones; the leader selector
(Kafka's default) never redirects; the simulator counts the bytes each broker served
per client id.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest

from simulator import ThreadedCluster, TopicSpec, errors
from tests.simulator.helpers import RawClient, batch, six_broker_config
from tests.simulator.test_wire import produce

pytestmark = pytest.mark.integration


@pytest.fixture
def rack_aware() -> Iterator[ThreadedCluster]:
    config = six_broker_config(TopicSpec("t", 3, 3), replica_selector="rack_aware",
                               default_min_insync_replicas=1)
    with ThreadedCluster(config) as c:
        yield c


def fetch(c: ThreadedCluster, node: int, version: int, rack: str, wait_ms: int = 2000
          ) -> Any:
    fp = FetchRequest.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20)
    req = FetchRequest(replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1,
                       topics=[FetchRequest.FetchTopic(topic="t", partitions=[fp])],
                       forgotten_topics_data=[], rack_id=rack)
    with RawClient("127.0.0.1", c.cluster.port_of(node)) as client:
        [part] = client.call(req, version).responses[0].partitions
    return part


def racks(c: ThreadedCluster) -> dict[int, str]:
    return {b["node_id"]: b["rack"] for b in c.snapshot()["brokers"]}


def test_rack_aware_leader_redirects_and_followers_serve(rack_aware: ThreadedCluster) -> None:
    c = rack_aware
    info = c.partition_info("t", 0)
    leader, by_rack = info["leader"], racks(c)
    with RawClient("127.0.0.1", c.cluster.port_of(leader)) as client:
        produce(client, batch([b"a", b"b"]))
    follower = next(r for r in info["replicas"] if by_rack[r] != by_rack[leader])
    other = by_rack[follower]
    started = time.monotonic()
    part = fetch(c, leader, 12, other)
    assert time.monotonic() - started < 1.5  # answered at once
    assert part.error_code == 0 and part.preferred_read_replica == follower
    assert not part.records and part.high_watermark == 2
    served = fetch(c, follower, 12, other)
    assert served.error_code == 0 and served.records and served.preferred_read_replica == -1
    for rack, version in ((by_rack[leader], 12), ("", 12), ("nowhere", 12), (other, 10)):
        part = fetch(c, leader, version, rack)
        assert part.records and part.preferred_read_replica in (-1, None)
    assert fetch(c, follower, 10, other, 10).error_code == errors.NOT_LEADER_OR_FOLLOWER
    c.set_isr("t", 0, [r for r in info["replicas"] if r != follower])
    part = fetch(c, leader, 12, other)
    assert part.records and part.preferred_read_replica == -1  # not in sync: no redirect
    counted = c.call(lambda cl: dict(cl.core.fetched_bytes))
    assert counted[("raw-test", follower)] == len(served.records)
    assert counted[("raw-test", leader)] > 0


def test_leader_selector_never_redirects(threaded: ThreadedCluster) -> None:
    info = threaded.partition_info("t", 0)
    with RawClient("127.0.0.1", threaded.cluster.port_of(info["leader"])) as client:
        produce(client, batch([b"a"]))
    by_rack = racks(threaded)
    for node in info["replicas"]:
        part = fetch(threaded, node, 12, by_rack[node])
        assert part.error_code == 0 and part.records and part.preferred_read_replica == -1
