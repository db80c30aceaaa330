"""min.insync.racks through the config APIs: the assembled proxy (in-process), the
simulator behind it (a broker that, like Kafka without KIP-1290, refuses the config
name) and the config topic in the simulator.

Requests are raw frames made with kafka-python's protocol classes on sockets to the
proxy, so what is checked is the proxy's answer itself. Invariants under test: the
KIP's outage item (a lowered value lets the same producer through without
reconnecting, the restored value refuses it again); every resource of a mixed
request gets its own correct answer in order; validate_only, bad values and a
client the broker refuses change nothing; a second proxy follows a change, a
restarted one has it; DescribeConfigs shows the value and its source; CreateTopics
applies the config; bad config frames close the one connection.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from proxy.app import Rackguard
from proxy.settings import load_settings
from tests.component.conftest import RawClient
from tests.component.test_enforcement_app import Rig, answers, one_rack_isr, produce, sample
from tests.component.test_enforcement_app import rig as rig  # noqa: F401 - the fixture

R = "min.insync.racks"
TOPIC, BROKER = 2, 4
CONFIG_TOPIC = "__rackguard_configs"
ON = {"config_topic": CONFIG_TOPIC}


def incremental(resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
                validate: bool = False, corr: int = 1, client_id: str = "adm",
                version: int = 1) -> bytes:
    res = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(version=version, validate_only=validate, resources=[
        res(resource_type=t, resource_name=n, configs=[
            res.AlterableConfig(name=c, config_operation=op, value=v) for c, op, v in cfgs])
        for t, n, cfgs in resources])
    request.with_header(correlation_id=corr, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


def legacy(resources: list[tuple[int, str, list[tuple[str, str]]]], corr: int = 1,
           client_id: str = "adm") -> bytes:
    res = AlterConfigsRequest.AlterConfigsResource
    request = AlterConfigsRequest(version=1, validate_only=False, resources=[
        res(resource_type=t, resource_name=n, configs=[
            res.AlterableConfig(name=c, value=v) for c, v in cfgs]) for t, n, cfgs in resources])
    request.with_header(correlation_id=corr, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


def alter_answers(frame: bytes, version: int = 1, api: Any = IncrementalAlterConfigsResponse
                  ) -> list[tuple[int, str, int]]:
    resp = api.decode(frame, version=version, header=True, framed=True)
    return [(r.resource_type, r.resource_name, r.error_code) for r in resp.responses]


async def call(client: RawClient, frame: bytes) -> bytes:
    client.send(frame)
    return await client.recv()


async def admin(rig: Rig) -> RawClient:
    client = await RawClient.connect(rig.base + 20)
    rig.clients.append(client)
    return client


def describe(names: list[str], corr: int = 1, version: int = 4) -> bytes:
    res = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(version=version, resources=[
        res(resource_type=TOPIC, resource_name=n, configuration_keys=None) for n in names],
        include_synonyms=True, include_documentation=True)
    request.with_header(correlation_id=corr, client_id="adm")
    return bytes(request.encode(header=True, framed=True))


def entry_of(frame: bytes, topic: str, version: int = 4) -> Any:
    resp = DescribeConfigsResponse.decode(frame, version=version, header=True, framed=True)
    result = next(r for r in resp.results if r.resource_name == topic)
    return next((c for c in result.configs if c.name == R), None)


def checked(app: Rackguard) -> float:
    """rackguard_rack_checked_partitions as /metrics would show it now."""
    for line in app.coverage.exposition().decode().splitlines():
        if line.startswith("rackguard_rack_checked_partitions "):
            return float(line.split()[1])
    raise AssertionError("no rackguard_rack_checked_partitions")


async def started(rig: Rig, **overrides: Any) -> Rackguard:
    app = rig.app(**{**ON, **overrides})
    await app.start()
    assert app.admin.store is not None and app.admin.store.caught_up
    return app


async def test_kip_outage_item_end_to_end(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    app = await started(rig)
    await one_rack_isr(cluster, "orders", 0)
    await app.poller.refresh_now()
    producer = await rig.client_for("orders", 0)
    code, message = answers(await call(producer, produce("orders", [0], 1)))[0]
    assert code == 19 and (message or "").startswith("NOT_ENOUGH_RACKS")

    # orders (3 partitions) and the config topic, which the proxy's own reader follows:
    # the watched topics, not the simulator's others
    assert checked(app) == 4.0
    operator = await admin(rig)
    lowered = time.monotonic()
    got = await call(operator, incremental([(TOPIC, "orders", [(R, 0, "1")])]))
    assert alter_answers(got) == [(TOPIC, "orders", 0)]
    assert answers(await call(producer, produce("orders", [0], 2)))[0] == (0, None)
    assert time.monotonic() - lowered < 2.0
    assert len(cluster.records("orders", 0)) == 1
    assert checked(app) == 1.0  # the rack-coverage metrics follow at the next scrape

    got = await call(operator, incremental([(TOPIC, "orders", [(R, 0, "2")])], corr=2))
    assert alter_answers(got) == [(TOPIC, "orders", 0)]
    code, _ = answers(await call(producer, produce("orders", [0], 3)))[0]
    assert code == 19 and len(cluster.records("orders", 0)) == 1
    assert sample(app, "rackguard_config_changes_total", {"resource_type": "topic"}) == 2
    assert R not in cluster.core.state.topics["orders"].configs  # never reached the broker
    stored = cluster.records(CONFIG_TOPIC, 0)
    assert len(stored) == 2


async def test_describe_shows_the_value_and_its_source(rig: Rig) -> None:
    await rig.start_cluster()
    await started(rig)
    operator = await admin(rig)
    before = entry_of(await call(operator, describe(["orders"])), "orders")
    assert (before.value, before.config_source, before.config_type) == ("2", 4, 3)  # file/flags
    assert [(s.value, s.source) for s in before.synonyms] == [("2", 4), ("1", 5)]
    assert before.documentation and not before.read_only
    await call(operator, incremental([(TOPIC, "orders", [(R, 0, "1")])], corr=2))
    after = entry_of(await call(operator, describe(["orders"], corr=3)), "orders")
    assert (after.value, after.config_source) == ("1", 1)  # DYNAMIC_TOPIC_CONFIG
    assert [(s.value, s.source) for s in after.synonyms] == [("1", 1), ("2", 4), ("1", 5)]
    old = entry_of(await call(operator, describe(["orders"], corr=4, version=1)), "orders", 1)
    assert (old.value, old.config_source) == ("1", 1)
    other = await call(operator, describe(["orders"], corr=5).replace(b"orders", b"orderz"))
    resp = DescribeConfigsResponse.decode(other, version=4, header=True, framed=True)
    assert resp.results[0].error_code == 3 and resp.results[0].configs == []  # no entry added


async def test_mixed_requests_validate_only_bad_values_and_refused_clients(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    app = await started(rig)
    operator = await admin(rig)
    got = await call(operator, incremental([
        (TOPIC, "orders", [("retention.ms", 0, "1000"), (R, 0, "1")]),
        (TOPIC, "nope", [(R, 0, "1")]),  # the probe: the broker does not know the topic
        (BROKER, "", [(R, 0, "many")]),
        (TOPIC, "orders2", [(R, 2, "1")]),  # APPEND
    ]))
    assert alter_answers(got) == [(TOPIC, "orders", 0), (TOPIC, "nope", 3), (BROKER, "", 40),
                                  (TOPIC, "orders2", 40)]
    assert cluster.core.state.topics["orders"].configs.get("retention.ms") == "1000"
    rule = app.enforcer.settings.rule
    assert rule.required_racks("orders") == 1 and rule.required_racks("nope") == 2

    got = await call(operator, incremental([(TOPIC, "orders", [(R, 0, "3")])], validate=True,
                                           corr=2))
    assert alter_answers(got) == [(TOPIC, "orders", 0)]
    assert app.enforcer.settings.rule.required_racks("orders") == 1  # validate_only

    cluster.config.deny_alter_configs.add("mallory")
    for corr, frame, api in (
            (3, incremental([(TOPIC, "orders", [(R, 0, "3")])], corr=3, client_id="mallory"),
             IncrementalAlterConfigsResponse),
            (4, incremental([(BROKER, "", [(R, 0, "3")])], corr=4, client_id="mallory"),
             IncrementalAlterConfigsResponse),
            (5, legacy([(TOPIC, "orders", [(R, "3")])], corr=5, client_id="mallory"),
             AlterConfigsResponse)):
        codes = [c for _, _, c in alter_answers(await call(operator, frame), api=api)]
        assert codes in ([29], [31]), (corr, codes)
    assert app.enforcer.settings.rule.required_racks("orders") == 1  # nothing applied

    # AlterConfigs replaces the whole set: without the entry, the dynamic value goes
    got = await call(operator, legacy([(TOPIC, "orders", [("retention.ms", "5")])], corr=6))
    assert alter_answers(got, api=AlterConfigsResponse) == [(TOPIC, "orders", 0)]
    assert app.enforcer.settings.rule.required_racks("orders") == 2
    # the cluster default, then only the proxy answers
    got = await call(operator, incremental([(BROKER, "", [(R, 0, "1")])], corr=7))
    assert alter_answers(got) == [(BROKER, "", 0)]
    assert app.enforcer.settings.rule.required_racks("anything") == 1
    assert sample(app, "rackguard_config_changes_total", {"resource_type": "cluster_default"}) == 1


async def test_a_second_proxy_follows_and_a_restarted_one_has_the_value(rig: Rig) -> None:
    await rig.start_cluster()
    first = await started(rig)
    rig.base += 100
    second = await started(rig)
    operator = await admin(rig)  # through the second proxy
    delays = []
    for i in range(10):
        value = str(1 + i % 2)
        await call(operator, incremental([(TOPIC, "orders", [(R, 0, value)])], corr=i + 1))
        start = time.monotonic()
        while first.enforcer.settings.rule.required_racks("orders") != int(value):
            assert time.monotonic() - start < 1.0, "the other proxy did not follow within 1 s"
            await asyncio.sleep(0.005)
        delays.append(time.monotonic() - start)
    await second.stop()
    rig.base += 100
    third = await started(rig)
    assert third.enforcer.settings.rule.required_racks("orders") == 2
    assert max(delays) < 1.0


async def test_create_topics_applies_the_config(rig: Rig) -> None:
    cluster = await rig.start_cluster()
    app = await started(rig)
    operator = await admin(rig)
    topic = CreateTopicsRequest.CreatableTopic
    cfg = topic.CreatableTopicConfig
    request = CreateTopicsRequest(version=5, timeout_ms=5000, validate_only=False, topics=[
        topic(name="racked", num_partitions=1, replication_factor=3, assignments=[],
              configs=[cfg(name=R, value="3"), cfg(name="cleanup.policy", value="delete")]),
        topic(name="bad", num_partitions=1, replication_factor=3, assignments=[],
              configs=[cfg(name=R, value="0")])])
    request.with_header(correlation_id=9, client_id="adm")
    got = CreateTopicsResponse.decode(await call(operator, bytes(request.encode(
        header=True, framed=True))), version=5, header=True, framed=True)
    assert [(t.name, t.error_code) for t in got.topics] == [("racked", 0), ("bad", 40)]
    shown = {c.name: (c.value, c.config_source) for c in got.topics[0].configs}
    assert shown[R] == ("3", 1)
    assert "racked" in cluster.core.state.topics and "bad" not in cluster.core.state.topics
    assert app.enforcer.settings.rule.required_racks("racked") == 3


async def test_bad_config_frames_close_the_one_connection(rig: Rig) -> None:
    await rig.start_cluster()
    app = await started(rig)
    good = await admin(rig)
    frame = incremental([(TOPIC, "orders", [(R, 0, "1")])])
    for cut in (len(frame) - 1, 20, 30):
        bad = await admin(rig)
        body = frame[4:cut]
        bad.send(len(body).to_bytes(4, "big") + body)
        assert await bad.closed()
    got = await call(good, incremental([(TOPIC, "orders", [(R, 0, "1")])]))
    assert alter_answers(got) == [(TOPIC, "orders", 0)]
    assert sample(app, "rackguard_bad_frames_total",
                  {"side": "client", "reason": "bad_request"}) == 3


async def test_read_only_refuses_changes_and_still_shows_the_value(rig: Rig) -> None:
    await rig.start_cluster()
    writer = await started(rig)
    operator = await admin(rig)
    await call(operator, incremental([(TOPIC, "orders", [(R, 0, "1")])]))
    rig.base += 100
    reader = await started(rig, config_topic_read_only=True)
    assert reader.enforcer.settings.rule.required_racks("orders") == 1  # still read
    other = await admin(rig)
    got = IncrementalAlterConfigsResponse.decode(await call(other, incremental(
        [(TOPIC, "orders", [(R, 0, "3")])], corr=2)), version=1, header=True, framed=True)
    assert got.responses[0].error_code == 40
    assert "read-only" in (got.responses[0].error_message or "")
    shown = entry_of(await call(other, describe(["orders"], corr=3)), "orders")
    assert (shown.value, shown.read_only) == ("1", True)
    assert writer.enforcer.settings.rule.required_racks("orders") == 1


async def test_a_reload_keeps_the_dynamic_values(rig: Rig) -> None:
    await rig.start_cluster()
    app = await started(rig)
    operator = await admin(rig)
    await call(operator, incremental([(TOPIC, "orders", [(R, 0, "1")])]))
    assert app.reload(load_settings({**app.settings.model_dump(), "min_insync_racks": 3}))
    rule = app.enforcer.settings.rule
    assert rule.required_racks("orders") == 1 and rule.required_racks("other") == 3
    shown = entry_of(await call(operator, describe(["orders"], corr=2)), "orders")
    assert [(s.value, s.source) for s in shown.synonyms] == [("1", 1), ("3", 4), ("1", 5)]


async def test_a_dimension_minimum_through_the_config_apis(rig: Rig) -> None:
    """min.insync.racks.region (racks of one dimension here: the rack is the region)
    set, described and enforced like min.insync.racks; an unknown dimension refused."""
    cluster = await rig.start_cluster()
    app = await started(rig, min_insync_racks=1, rack_dimensions="region")
    await one_rack_isr(cluster, "orders", 0)
    await app.poller.refresh_now()
    producer = await rig.client_for("orders", 0)
    assert answers(await call(producer, produce("orders", [0], 1)))[0] == (0, None)

    operator = await admin(rig)
    region = f"{R}.region"
    got = await call(operator, incremental([(TOPIC, "orders", [(region, 0, "2")]),
                                            (TOPIC, "other", [(f"{R}.zone", 0, "2")])]))
    assert alter_answers(got) == [(TOPIC, "orders", 0), (TOPIC, "other", 40)]
    code, message = answers(await call(producer, produce("orders", [0], 2)))[0]
    assert code == 19 and (message or "").endswith(f"{region}=2"), message

    resp = DescribeConfigsResponse.decode(await call(operator, describe(["orders"], corr=2)),
                                          version=4, header=True, framed=True)
    shown = {c.name: (c.value, c.config_source) for c in resp.results[0].configs}
    assert shown[region] == ("2", 1) and shown[R] == ("1", 4)  # DYNAMIC_TOPIC, STATIC_BROKER
    assert sample(app, "rackguard_config_changes_total", {"resource_type": "topic"}) == 1

    got = await call(operator, incremental([(TOPIC, "orders", [(region, 1, None)])], corr=3))
    assert alter_answers(got) == [(TOPIC, "orders", 0)]
    assert answers(await call(producer, produce("orders", [0], 3)))[0] == (0, None)
