"""proxy.cluster.poller scoped to a watched set, against a scripted fake broker.

Invariants under test: with a watched set the poller asks Metadata and DescribeConfigs
for those topics only, in one request each; a topic that joins is in the next poll's
request and, once it leaves (idle), out of the view; an answer equal to the last one is
confirmed without being decoded (no new topic object, the view's age reset); a client's
answer for every topic adds only watched topics to the view; ``refresh_now`` resolves
once the Metadata is in, before DescribeConfigs answers.
"""

from __future__ import annotations

import asyncio
import uuid

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from protocol.describe_configs import MIN_INSYNC_REPLICAS
from protocol.headers import parse_request_header
from protocol.metadata_request import read_metadata_request_topics
from proxy.cluster.poller import MetadataPoller
from proxy.cluster.view import ClusterViewStore
from proxy.cluster.watch import WatchedTopics
from proxy.settings import load_settings
from tests.component.fake_broker import (
    FakeBroker,
    Received,
    api_versions_response,
    metadata_response,
)

_T = MetadataResponse.MetadataResponseTopic
_P = _T.MetadataResponsePartition
_R = DescribeConfigsResponse
_Entry = _R.DescribeConfigsResult.DescribeConfigsResourceResult


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Cluster:
    """100 topics ``t-0``...; answers Metadata for the topics asked (all if none named)."""

    def __init__(self) -> None:
        self.names = [f"t-{i}" for i in range(100)]
        self.isr = {name: [1] for name in self.names}
        self.asked: list[tuple[str | bytes, ...] | None] = []
        self.described: list[list[str]] = []
        self.hold_describe: asyncio.Event | None = None
        self.broker = FakeBroker(self.handle)

    def topic(self, name: str) -> object:
        i = self.names.index(name) if name in self.names else -1
        if i < 0:
            return _T(error_code=3, name=name, topic_id=uuid.UUID(int=0), is_internal=False,
                      partitions=[])
        return _T(error_code=0, name=name, topic_id=uuid.UUID(int=i + 1), is_internal=False,
                  partitions=[_P(error_code=0, partition_index=p, leader_id=1, leader_epoch=0,
                                 replica_nodes=[1], isr_nodes=self.isr[name],
                                 offline_replicas=[]) for p in range(3)])

    async def handle(self, req: Received) -> object:
        if req.api_key == 18:
            return [api_versions_response(req.correlation_id, 0,
                                          [(18, 0, 3), (3, 0, 12), (32, 0, 4)])]
        if req.api_key == 3:
            names = read_metadata_request_topics(req.frame, parse_request_header(req.frame))
            self.asked.append(names)
            listed = self.names if names is None else [str(n) for n in names]
            return [metadata_response(req.correlation_id, req.api_version,
                                      [(1, "127.0.0.1", self.broker.port, "rack-a")],
                                      [self.topic(n) for n in listed])]
        assert req.api_key == 32
        request = DescribeConfigsRequest.decode(req.frame, version=req.api_version,
                                                header=True, framed=True)
        names = [r.resource_name for r in request.resources]
        self.described.append(sorted(names))
        if self.hold_describe is not None:
            await self.hold_describe.wait()
        results = [_R.DescribeConfigsResult(
            error_code=0, error_message=None, resource_type=2, resource_name=name,
            configs=[_Entry(name=MIN_INSYNC_REPLICAS, value="2", read_only=False,
                            config_source=1, is_default=False, is_sensitive=False,
                            synonyms=[], config_type=3, documentation=None)])
            for name in names]
        resp = _R(version=req.api_version, throttle_time_ms=0, results=results)
        resp.with_header(correlation_id=req.correlation_id)
        return [bytes(resp.encode(header=True, framed=True))]


async def scoped(cluster: Cluster, clock: Clock, **extra: object
                 ) -> tuple[MetadataPoller, ClusterViewStore, WatchedTopics]:
    await cluster.broker.start()
    store = ClusterViewStore(clock)
    watched = WatchedTopics(clock, 60, lambda i: store.view.topic_ids.get(i))
    settings = load_settings({"upstream": f"127.0.0.1:{cluster.broker.port}", **extra},
                             env={})
    poller = MetadataPoller(settings, store, lambda brokers: None, lambda: None, clock,
                            watched=watched)
    return poller, store, watched


async def test_polls_ask_for_the_watched_topics_only_and_unchanged_answers_are_not_read(
) -> None:
    cluster, clock = Cluster(), Clock()
    poller, store, watched = await scoped(cluster, clock)
    try:
        await poller.poll_once()
        assert cluster.asked == [()]  # nothing watched: brokers only
        assert dict(store.view.topics) == {} and store.view.brokers

        watched.use(["t-3", "t-7"])
        await poller.poll_once()
        assert cluster.asked[-1] == ("t-3", "t-7")
        assert set(store.view.topics) == {"t-3", "t-7"}
        assert cluster.described == [["t-3", "t-7"]]  # new topics: asked at once
        assert store.view.topics["t-3"].min_insync_replicas == 2

        before = store.view
        clock.now += 2
        await poller.poll_once()  # the same answer: confirmed, not decoded
        after = store.view
        assert poller.unchanged_polls == 1
        assert after is not before and after.refreshed_at == clock.now
        assert after.topics is before.topics  # not one topic object built
        assert len(cluster.described) == 1  # no topic new, none due

        cluster.isr["t-7"] = [1, 2]  # a change: decoded; the unchanged topic is kept
        clock.now += 2
        await poller.poll_once()
        assert store.view.topics["t-7"].partitions[0].isr == (1, 2)
        assert store.view.topics["t-3"] is after.topics["t-3"]

        watched.use(["t-9"])
        clock.now += 2
        await poller.poll_once()
        assert cluster.asked[-1] == ("t-3", "t-7", "t-9")
        assert cluster.described[-1] == ["t-9"]  # only the new one

        clock.now += 61  # nobody named them for 61 s: they leave the view
        watched.use(["t-9"])
        await poller.poll_once()
        assert cluster.asked[-1] == ("t-9",)
        assert set(store.view.topics) == {"t-9"}
        assert len(poller._conns) == 1  # one control connection
    finally:
        await poller.stop()
        await cluster.broker.stop()


async def test_a_clients_answer_for_every_topic_adds_only_watched_topics() -> None:
    cluster, clock = Cluster(), Clock()
    poller, store, watched = await scoped(cluster, clock)
    try:
        watched.use(["t-1"])
        frame = metadata_response(1, 12, [(1, "127.0.0.1", 1, "rack-a")],
                                  [cluster.topic(n) for n in cluster.names])
        await poller.feeder.absorb(memoryview(frame), 12, full=False)
        assert set(store.view.topics) == {"t-1"}
    finally:
        await poller.stop()
        await cluster.broker.stop()


async def test_refresh_now_resolves_once_the_metadata_is_in() -> None:
    cluster, clock = Cluster(), Clock()
    poller, store, watched = await scoped(cluster, clock, metadata_refresh_interval_ms=60_000)
    try:
        poller.start()
        await poller.refresh_now()
        cluster.hold_describe = asyncio.Event()  # DescribeConfigs does not answer
        watched.use(["t-5"])  # a produce names a topic the view lacks
        assert await asyncio.wait_for(poller.refresh_now(), 2) is True
        assert store.view.topics["t-5"].min_insync_replicas is None  # not answered yet
        cluster.hold_describe.set()
    finally:
        await poller.stop()
        await cluster.broker.stop()


async def test_cluster_scope_asks_for_every_topic() -> None:
    cluster, clock = Cluster(), Clock()
    await cluster.broker.start()
    store = ClusterViewStore(clock)
    settings = load_settings({"upstream": f"127.0.0.1:{cluster.broker.port}"}, env={})
    poller = MetadataPoller(settings, store, lambda brokers: None, lambda: None, clock)
    try:
        await poller.poll_once()
        assert cluster.asked == [None] and len(store.view.topics) == 100
    finally:
        await poller.stop()
        await cluster.broker.stop()


def test_metadata_request_names_what_the_poller_sends() -> None:
    request = MetadataRequest(version=12, topics=[
        MetadataRequest.MetadataRequestTopic(topic_id=None, name="x")])
    request.with_header(correlation_id=1, client_id="c")
    raw = bytes(request.encode(header=True, framed=True))
    assert read_metadata_request_topics(raw, parse_request_header(raw)) == ("x",)
