"""proxy.cluster.poller against a scripted fake broker: the DescribeConfigs step.

Invariant under test: after a poll every topic carries the min.insync.replicas
the broker reports; a broker that drops the connection on a DescribeConfigs
request naming keys (as Tansu does) gets one asking for all configs, on a new
connection, from then on; a large cluster's answer (over 256 KiB, more than
1,000 topics: read a buffer at a time and applied on the feeder's worker,
paced) gives the same view; values that do not change install no new view.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.metadata import MetadataResponse

from protocol.describe_configs import MIN_INSYNC_REPLICAS
from proxy.cluster.poller import MetadataPoller
from proxy.cluster.view import ClusterView, ClusterViewStore
from proxy.settings import load_settings
from tests.component.fake_broker import (
    CLOSE,
    FakeBroker,
    Received,
    api_versions_response,
    metadata_response,
)

_T = MetadataResponse.MetadataResponseTopic
_P = _T.MetadataResponsePartition
_R = DescribeConfigsResponse
_Entry = _R.DescribeConfigsResult.DescribeConfigsResourceResult


class Cluster:
    """Topics ``t-0``...; ``values[name]`` is a topic's min.insync.replicas."""

    def __init__(self, topics: int, tansu: bool) -> None:
        self.values = {f"t-{i}": 2 + i % 3 for i in range(topics)}
        self.tansu = tansu
        self.describes: list[tuple[list[str], list[str] | None]] = []
        self.broker = FakeBroker(self.handle)

    def handle(self, req: Received) -> object:
        if req.api_key == 18:
            return [api_versions_response(req.correlation_id, 0,
                                          [(18, 0, 3), (3, 0, 12), (32, 0, 4)])]
        if req.api_key == 3:
            topics = [_T(error_code=0, name=name, topic_id=uuid.UUID(int=i + 1),
                         is_internal=False,
                         partitions=[_P(error_code=0, partition_index=0, leader_id=1,
                                        leader_epoch=0, replica_nodes=[1], isr_nodes=[1],
                                        offline_replicas=[])])
                      for i, name in enumerate(self.values)]
            return [metadata_response(req.correlation_id, req.api_version,
                                      [(1, "127.0.0.1", self.broker.port, "rack-a")], topics)]
        assert req.api_key == 32
        request = DescribeConfigsRequest.decode(req.frame, version=req.api_version,
                                                header=True, framed=True)
        keys = request.resources[0].configuration_keys
        self.describes.append(([r.resource_name for r in request.resources], keys))
        if keys is not None and self.tansu:
            return CLOSE
        return [self.answer(req, [r.resource_name for r in request.resources], keys)]

    def answer(self, req: Received, names: list[str], keys: list[str] | None) -> bytes:
        results = []
        for name in names:
            configs = [(MIN_INSYNC_REPLICAS, str(self.values[name]))]
            if keys is None:
                configs += [(f"other.config.{i}", "x" * 30) for i in range(10)]
            results.append(_R.DescribeConfigsResult(
                error_code=0, error_message=None, resource_type=2, resource_name=name,
                configs=[_Entry(name=k, value=v, read_only=False, config_source=1,
                                is_default=False, is_sensitive=False, synonyms=[],
                                config_type=3, documentation=None) for k, v in configs]))
        resp = _R(version=req.api_version, throttle_time_ms=0, results=results)
        resp.with_header(correlation_id=req.correlation_id)
        return bytes(resp.encode(header=True, framed=True))


@pytest.fixture
def clock() -> Iterator[float]:
    return iter(range(0, 10**9, 1000))  # every poll is due for a DescribeConfigs read


async def poller_for(cluster: Cluster, clock: Iterator[float]
                     ) -> tuple[MetadataPoller, ClusterViewStore]:
    await cluster.broker.start()
    store = ClusterViewStore(lambda: 0.0)
    settings = load_settings({"upstream": f"127.0.0.1:{cluster.broker.port}"}, env={})
    return MetadataPoller(settings, store, lambda brokers: None, lambda: None,
                          lambda: float(next(clock))), store


def assert_values(view: ClusterView, values: dict[str, int]) -> None:
    assert {n: t.min_insync_replicas for n, t in view.topics.items()} == values


@pytest.mark.parametrize(("topics", "tansu"), [(3, False), (3, True), (1200, True)])
async def test_poll_applies_every_topics_min_insync_replicas(
    topics: int, tansu: bool, clock: Iterator[float]
) -> None:
    cluster = Cluster(topics, tansu)
    poller, store = await poller_for(cluster, clock)
    try:
        await poller.poll_once()
        assert_values(store.view, cluster.values)
        asked, keys = cluster.describes[-1]
        assert sorted(asked) == sorted(cluster.values)
        assert keys == (None if tansu else [MIN_INSYNC_REPLICAS])
        assert len(cluster.describes) == (2 if tansu else 1)  # Tansu: keyed, then all
        if topics > 1000:
            frame = cluster.answer(Received(32, 4, 1, b""), asked, keys)
            assert len(frame) > 256 * 1024  # read a buffer at a time

        installed: list[ClusterView] = []
        store.subscribe(lambda old, new: installed.append(new))
        await poller.poll_once()  # same values: only the Metadata refresh installs
        assert len(installed) == 1 and installed[0] is store.view
        assert cluster.describes[-1][1] == (None if tansu else [MIN_INSYNC_REPLICAS])
        assert len(cluster.describes) == (3 if tansu else 2)  # no keyed retry any more

        cluster.values["t-1"] = 7
        await poller.poll_once()
        assert_values(store.view, cluster.values)
        assert poller.last_error is None
    finally:
        await poller.stop()
        await cluster.broker.stop()


async def test_a_value_that_is_not_a_number_is_logged_and_left_out(
    clock: Iterator[float], caplog: pytest.LogCaptureFixture
) -> None:
    cluster = Cluster(2, tansu=False)
    cluster.values["t-0"] = "many"  # type: ignore[assignment]
    poller, store = await poller_for(cluster, clock)
    try:
        with caplog.at_level(logging.WARNING, logger="rackguard.poller"):
            await poller.poll_once()
        assert store.view.topics["t-0"].min_insync_replicas is None
        assert store.view.topics["t-1"].min_insync_replicas == 3
        assert "topic t-0: min.insync.replicas='many' is not a number" in caplog.text
    finally:
        await poller.stop()
        await cluster.broker.stop()
