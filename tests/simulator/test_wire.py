"""Wire-level tests against a running simulator with a raw kafka-python-codec client."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from simulator import ThreadedCluster, errors
from tests.simulator.helpers import RawClient, batch

pytestmark = pytest.mark.integration


def connect(c: ThreadedCluster, node_id: int) -> RawClient:
    return RawClient("127.0.0.1", c.cluster.port_of(node_id))


def produce_req(topic: str, partition: int, records: bytes, acks: int) -> ProduceRequest:
    pd = ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)
    td = ProduceRequest.TopicProduceData(name=topic, partition_data=[pd])
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[td])


def produce(client: RawClient, records: bytes, acks: int = -1, topic: str = "t",
            partition: int = 0, version: int = 9) -> tuple[int, int]:
    resp = client.call(produce_req(topic, partition, records, acks), version)
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions(threaded: ThreadedCluster, version: int) -> None:
    with connect(threaded, 1) as c:
        req = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        resp = c.call(req, version)
    assert resp.error_code == 0
    versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert versions[0] == (3, 12) and versions[1][0] == 4 and versions[18] == (0, 4)


def test_api_versions_too_new_gets_v0_fallback(threaded: ThreadedCluster) -> None:
    with connect(threaded, 1) as c:
        c.send_frame(struct.pack(">hhih", 18, 99, 7, 1) + b"x" + b"\x00\x00")
        data = c.recv_frame()
    resp = ApiVersionsResponse.decode(data, version=0, header=True)
    assert resp.header.correlation_id == 7
    assert resp.error_code == errors.UNSUPPORTED_VERSION
    assert any(k.api_key == 18 and k.max_version == 4 for k in resp.api_keys)


@pytest.mark.parametrize(
    "payload",
    [b"\x01", struct.pack(">hhih", 57, 0, 1, -1), struct.pack(">hhih", 3, 12, 1, -1) + b"\xff"],
    ids=["short", "unknown-api", "bad-body"],
)
def test_bad_frames_close_only_that_connection(threaded: ThreadedCluster, payload: bytes) -> None:
    with connect(threaded, 1) as bad, connect(threaded, 1) as good:
        bad.send_frame(payload)
        with pytest.raises(ConnectionError):
            bad.recv_frame()
        assert good.call(MetadataRequest(topics=None), 12).brokers


def test_metadata_shows_racks_topic_ids_and_offline_replicas(threaded: ThreadedCluster) -> None:
    threaded.kill_rack("rack-c")
    with connect(threaded, 1) as c:
        md = c.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    assert sorted((b.node_id, b.rack) for b in md.brokers) == [
        (1, "rack-a"), (2, "rack-b"), (4, "rack-a"), (5, "rack-b")
    ]
    [topic] = md.topics
    assert topic.name == "t" and topic.topic_id.int != 0
    for p in topic.partitions:
        assert set(p.offline_replicas) <= {3, 6}
        assert not set(p.isr_nodes) & {3, 6}
        assert p.leader_id in p.isr_nodes


def test_acks_all_below_min_isr_is_rejected_but_acks_1_succeeds(
    threaded: ThreadedCluster,
) -> None:
    leader = threaded.partition_info("t", 0)["leader"]
    threaded.set_isr("t", 0, [leader])
    with connect(threaded, leader) as c:
        assert produce(c, batch([b"x"]), acks=-1) == (errors.NOT_ENOUGH_REPLICAS, -1)
        assert produce(c, batch([b"y"]), acks=1) == (errors.NONE, 0)
        # acks=0: no response; the next response on the connection is Metadata's.
        c.send(produce_req("t", 0, batch([b"z"]), 0), 9)
        corr = c.send(MetadataRequest(topics=[]), 1)
        assert struct.unpack(">i", c.recv_frame()[:4])[0] == corr
    assert [r.value for r in threaded.records("t", 0)] == [b"y", b"z"]


def test_produce_errors_for_followers_and_unknown_partitions(threaded: ThreadedCluster) -> None:
    info = threaded.partition_info("t", 0)
    follower = next(r for r in info["replicas"] if r != info["leader"])
    with connect(threaded, follower) as c:
        assert produce(c, batch([b"x"]))[0] == errors.NOT_LEADER_OR_FOLLOWER
        assert produce(c, batch([b"x"]), partition=99)[0] == errors.UNKNOWN_TOPIC_OR_PARTITION
    with connect(threaded, info["leader"]) as c:
        assert produce(c, b"garbage")[0] == errors.CORRUPT_MESSAGE


def test_idempotent_retry_is_not_appended_twice(threaded: ThreadedCluster) -> None:
    leader = threaded.partition_info("t", 0)["leader"]
    with connect(threaded, leader) as c:
        init = c.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 4)
        pid, epoch = init.producer_id, init.producer_epoch
        first = batch([b"a", b"b"], pid, epoch, 0)
        assert produce(c, first) == (0, 0)
        assert produce(c, first) == (0, 0)  # retried batch: same offset
        assert produce(c, batch([b"c"], pid, epoch, 5))[0] == errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, batch([b"c"], pid, epoch, 2)) == (0, 2)
    assert [r.value for r in threaded.records("t", 0)] == [b"a", b"b", b"c"]


def test_transactions_are_refused_not_simulated(threaded: ThreadedCluster) -> None:
    leader = threaded.partition_info("t", 0)["leader"]
    with connect(threaded, leader) as c:
        init = c.call(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000),
                      4)
        assert init.error_code == errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        pid = c.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1),
                     4).producer_id
        refused = produce(c, batch([b"t"], pid, 0, 0, transactional=True))
        assert refused[0] == errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert threaded.records("t", 0) == []


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16])
def test_fetch_by_name_and_topic_id(threaded: ThreadedCluster, version: int) -> None:
    leader = threaded.partition_info("t", 1)["leader"]
    with connect(threaded, leader) as c:
        produce(c, batch([b"one", b"two"]), partition=1)
        topic_id = c.call(MetadataRequest(topics=None), 12).topics[0].topic_id
        fp = FetchRequest.FetchTopic.FetchPartition(
            partition=1, current_leader_epoch=-1, fetch_offset=1, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20,
        )
        ft = FetchRequest.FetchTopic(topic="t", topic_id=topic_id, partitions=[fp])
        req = FetchRequest(
            replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, topics=[ft], forgotten_topics_data=[], rack_id="",
        )
        resp = c.call(req, version)
    [part] = resp.responses[0].partitions
    assert part.error_code == 0 and part.high_watermark == 2
    assert len(part.records) > 0


def test_describe_configs_reports_min_insync_replicas(threaded: ThreadedCluster) -> None:
    threaded.set_topic_config("t", "min.insync.replicas", "3")
    res = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name="t", configuration_keys=["min.insync.replicas"]
    )
    with connect(threaded, 2) as c:
        resp = c.call(DescribeConfigsRequest(resources=[res], include_synonyms=False), 4)
    [cfg] = resp.results[0].configs
    assert (cfg.name, cfg.value) == ("min.insync.replicas", "3")


def test_not_leader_answer_names_the_leader(threaded: ThreadedCluster) -> None:
    info = threaded.partition_info("t", 0)
    follower = next(r for r in info["replicas"] if r != info["leader"])
    with connect(threaded, follower) as c:
        resp = c.call(produce_req("t", 0, batch([b"x"]), -1), 12)
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == errors.NOT_LEADER_OR_FOLLOWER
    assert part.current_leader.leader_id == info["leader"]
    assert [e.node_id for e in resp.node_endpoints] == [info["leader"]]
