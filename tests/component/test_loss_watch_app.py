"""The loss watch in the assembled proxy, on sockets, against two scripted fake brokers:
Produce answers through the relay, the poller's view, the reads of the new leader over the
poller's own connection (ApiVersions, ListOffsets, OffsetForLeaderEpoch), the counter.
What Kafka does on an election is proven on real Kafka (tests/system); here the fake
brokers say what a new leader's log holds, and the proxy's own wiring is what is checked.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import MetadataResponse

from benchmarks.produce_frames import kp_request, kp_response, make_batch
from proxy.app import Rackguard
from proxy.settings import load_settings
from tests.component.conftest import RawClient, free_port_block
from tests.component.fake_broker import (
    FakeBroker,
    Received,
    api_versions_response,
    metadata_response,
)

TOPIC = "orders"
_T = MetadataResponse.MetadataResponseTopic
_P = _T.MetadataResponsePartition


@dataclass
class Partition:
    leader: int = 1
    epoch: int = 3
    isr: list[int] = field(default_factory=lambda: [1])
    epoch_start: int = 0  # where the leader's current epoch starts in its log
    next_offset: int = 0


class TwoBrokers:
    def __init__(self) -> None:
        self.part = Partition()
        self.brokers = {n: FakeBroker(self._handler(n), node_id=n) for n in (1, 2)}
        self.reads: list[tuple[int, int]] = []  # (node, api key) of the proxy's own reads

    async def start(self) -> None:
        for b in self.brokers.values():
            await b.start()

    async def stop(self) -> None:
        for b in self.brokers.values():
            await b.stop()

    def _handler(self, node: int):  # type: ignore[no-untyped-def]
        def handle(req: Received) -> object:
            corr, version = req.correlation_id, req.api_version
            if req.api_key == 18:
                return [api_versions_response(corr, 0, [(18, 0, 3), (3, 0, 12), (0, 3, 9),
                                                        (2, 1, 7), (23, 2, 4)])]
            if req.api_key == 3:
                p = self.part
                topics = [_T(error_code=0, name=TOPIC, topic_id=uuid.UUID(int=7),
                             is_internal=False, partitions=[_P(
                                 error_code=0, partition_index=0, leader_id=p.leader,
                                 leader_epoch=p.epoch, replica_nodes=[1, 2],
                                 isr_nodes=p.isr, offline_replicas=[])])]
                return [metadata_response(corr, version, [
                    (n, "127.0.0.1", b.port, f"rack-{n}") for n, b in self.brokers.items()],
                    topics)]
            if req.api_key == 0:
                base, self.part.next_offset = self.part.next_offset, self.part.next_offset + 10
                return [kp_response(version, [(TOPIC, [{"index": 0, "error_code": 0,
                                                        "base_offset": base}])],
                                    correlation_id=corr)]
            self.reads.append((node, req.api_key))
            return [self._offsets(node, req)]

        return handle

    def _offsets(self, node: int, req: Received) -> bytes:
        p, version = self.part, req.api_version
        error = 0 if node == p.leader else 6
        if req.api_key == 2:
            asked = ListOffsetsRequest.decode(req.frame, version=version, header=True,
                                              framed=True)
            assert asked.topics[0].partitions[0].current_leader_epoch == p.epoch
            rt = ListOffsetsResponse.ListOffsetsTopicResponse
            answer = ListOffsetsResponse(version=version, throttle_time_ms=0, topics=[rt(
                name=TOPIC, partitions=[rt.ListOffsetsPartitionResponse(
                    partition_index=0, error_code=error, timestamp=-1,
                    offset=p.epoch_start, leader_epoch=p.epoch)])])
        else:
            asked = OffsetForLeaderEpochRequest.decode(req.frame, version=version,
                                                       header=True, framed=True)
            assert asked.topics[0].partitions[0].leader_epoch == p.epoch - 1
            rt = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
            answer = OffsetForLeaderEpochResponse(version=version, throttle_time_ms=0, topics=[
                rt(topic=TOPIC, partitions=[rt.EpochEndOffset(
                    partition=0, error_code=error, leader_epoch=p.epoch - 1,
                    end_offset=p.epoch_start)])])
        answer.with_header(correlation_id=req.correlation_id)
        return bytes(answer.encode(header=True, framed=True))


@pytest.fixture
async def brokers() -> AsyncIterator[TwoBrokers]:
    two = TwoBrokers()
    await two.start()
    yield two
    await two.stop()


async def lost(app: Rackguard, within_s: float) -> float:
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        value = app.metrics.registry.get_sample_value(
            "rackguard_acknowledged_records_lost_total", {"topic": TOPIC, "acks": "all"}) or 0
        if value or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.05)


async def test_an_unclean_election_is_reported_with_what_the_new_leader_lacks(
        brokers: TwoBrokers) -> None:
    base = free_port_block(10)
    app = Rackguard(load_settings({
        "upstream": f"127.0.0.1:{brokers.brokers[1].port}", "bootstrap_port": base,
        "broker_port_base": base, "metadata_refresh_interval_ms": 200,
        "loss_watch_confirm_delay_ms": 100, "config_topic": ""}))
    await app.start()
    client = None
    try:
        client = await RawClient.connect(base + 1)  # broker 1's listener
        for corr in range(4):  # offsets 0..39 acknowledged by broker 1
            client.send(kp_request(9, [(TOPIC, [(0, make_batch(10))])], correlation_id=corr,
                                   client_id="billing"))
            await client.recv()
        # broker 1 and its disk are gone; broker 2, never in the ISR, is elected
        brokers.part.leader, brokers.part.epoch, brokers.part.isr = 2, 4, [2]
        brokers.part.epoch_start = 25
        assert await lost(app, 10.0) == 15  # offsets 25..39
        assert (2, 2) in brokers.reads and (2, 23) in brokers.reads  # asked the new leader
        assert all(node == 2 for node, _ in brokers.reads)
        assert app.metrics.registry.get_sample_value(
            "rackguard_partitions_with_confirmed_loss") == 1
    finally:
        if client is not None:
            client.close()
        await app.stop()


async def test_a_new_leader_with_every_acknowledged_record_is_no_loss(
        brokers: TwoBrokers) -> None:
    base = free_port_block(10)
    app = Rackguard(load_settings({
        "upstream": f"127.0.0.1:{brokers.brokers[1].port}", "bootstrap_port": base,
        "broker_port_base": base, "metadata_refresh_interval_ms": 200,
        "loss_watch_confirm_delay_ms": 100, "config_topic": "", "loss_watch": "on"}))
    await app.start()
    client = None
    try:
        client = await RawClient.connect(base + 1)
        client.send(kp_request(9, [(TOPIC, [(0, make_batch(10))])], acks=1))
        await client.recv()
        brokers.part.leader, brokers.part.epoch, brokers.part.isr = 2, 4, [2]
        brokers.part.epoch_start = 10
        deadline = asyncio.get_running_loop().time() + 10
        while not app.metrics.registry.get_sample_value(
                "rackguard_loss_watch_checks_total", {"outcome": "no_loss"}):
            assert asyncio.get_running_loop().time() < deadline, "never checked"
            await asyncio.sleep(0.05)
        assert not app.metrics.registry.get_sample_value(
            "rackguard_acknowledged_records_lost_total", {"topic": TOPIC, "acks": "1"})
    finally:
        if client is not None:
            client.close()
        await app.stop()
