"""proxy.enforce.enforcement.RackEnforcer, the Produce hook, played without sockets.

Invariant under test: acks 0/1 (and a rule that needs no more than one rack)
are forwarded untouched without walking; otherwise all-pass forwards the
original bytes, all-fail answers from the proxy (code 19 or the dedicated
code, message "NOT_ENOUGH_RACKS: ..." from v8), mixed forwards only the
passing partitions (record bytes unchanged) and merges the broker's answer
with the synthetic errors in request order; observe mode forwards everything
and counts what it would have rejected; a partition the view does not know
waits for one refresh. Checked for Produce v3, v8, v9, v12 and v13.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import proxy.enforce.enforcement as enforcement_module
from benchmarks.produce_frames import (
    kp_decode_request,
    kp_decode_response,
    kp_request,
    kp_response,
    make_batch,
)
from protocol.produce import TopicKey
from proxy.cluster.view import ClusterViewStore
from proxy.enforce.enforcement import EnforcementSettings, RackEnforcer
from proxy.enforce.metrics import EnforcementMetrics
from proxy.enforce.policy import RackRule
from proxy.relay.actions import ClientInfo, Forward, Reply
from tests.unit._views import Clock, broker, part, snap, tid, topic

VERSIONS = [3, 8, 9, 12, 13]
CLIENT = ClientInfo("1.2.3.4:5", "bootstrap")
CORR = 4242
DEDICATED = 1290

# three racks: 1, 4 -> rack-a; 2 -> rack-b; 3 -> rack-c
CLUSTER = (broker(1, "rack-a"), broker(2, "rack-b"), broker(3, "rack-c"), broker(4, "rack-a"))
IDS = {"orders": tid(11), "audit": tid(12), "payments": tid(13)}
PASSING = {("orders", 0), ("orders", 2), ("payments", 0)}
FAILING = {("orders", 1), ("orders", 3), ("audit", 0), ("audit", 1)}
TOPICS = [
    topic("orders", [
        part(0, (1, 2)),   # rack-a, rack-b: pass
        part(1, (1, 4)),   # rack-a only: fail
        part(2, (2, 3)),   # rack-b, rack-c: pass
        part(3, (3,)),     # rack-c only: fail
    ], IDS["orders"]),
    topic("audit", [part(0, (4, 1)), part(1, (2,))], IDS["audit"]),  # both fail
    topic("payments", [part(0, (1, 2, 3))], IDS["payments"]),  # pass
]

# distinct record bytes per partition, so a misplaced record set would show
BATCHES = {
    (name, idx): make_batch(1 + idx, value=f"{name}-{idx}-".encode())
    for name in IDS
    for idx in range(4)
}


def key_of(name: str, version: int) -> TopicKey:
    return IDS[name] if version >= 13 else name


def produce(
    version: int, layout: Sequence[tuple[str, Sequence[int]]], acks: int = -1
) -> bytes:
    return kp_request(
        version,
        [(key_of(name, version), [(i, BATCHES[(name, i)]) for i in idxs])
         for name, idxs in layout],
        acks=acks,
        correlation_id=CORR,
    )


NAMES_BY_ID = {uuid.UUID(bytes=v): k for k, v in {**IDS, "fresh": tid(21)}.items()}


def decoded_topic_name(t: Any, version: int) -> str:
    return NAMES_BY_ID[t.topic_id] if version >= 13 else str(t.name)


def response_partitions(frame: bytes | memoryview, version: int) -> list[tuple[str, Any]]:
    data = bytes(frame)
    assert int.from_bytes(data[4:8], "big", signed=True) == CORR
    decoded = kp_decode_response(data, version)
    return [
        (decoded_topic_name(t, version), p)
        for t in decoded.responses
        for p in t.partition_responses
    ]


def request_partitions(frame: bytes | memoryview, version: int) -> list[tuple[str, int, bytes]]:
    decoded = kp_decode_request(bytes(frame), version)
    assert decoded.acks == -1
    return [
        (decoded_topic_name(t, version), p.index, bytes(p.records))
        for t in decoded.topic_data
        for p in t.partition_data
    ]


class Playbook:
    """A RackEnforcer with a fake clock, a counted refresh and its own metrics registry."""

    def __init__(
        self,
        *,
        default_min_racks: int = 2,
        dedicated_code: int | None = None,
        observe: bool = False,
        fail_open: bool = False,
        unknown_wait_s: float = 0.05,
        topics: Sequence[Any] = TOPICS,
    ) -> None:
        self.clock = Clock(500.0)
        self.store = ClusterViewStore(self.clock)
        self.store.apply_metadata(snap(topics, brokers=CLUSTER), full=True)
        self.registry = CollectorRegistry()
        self.refreshes = 0
        self.refresh_succeeds = True
        self.on_refresh: list[Any] = []  # snapshots applied by the next refreshes
        self.transform_calls: list[tuple[bytes, int]] = []
        self.settings = EnforcementSettings(
            rule=RackRule(default_min_racks=default_min_racks, max_metadata_age_s=10.0,
                          fail_open=fail_open),
            dedicated_code=dedicated_code,
            observe=observe,
            unknown_wait_s=unknown_wait_s,
        )
        self.enforcer = RackEnforcer(
            self.settings,
            self.store,
            self.refresh,
            self.transform,
            EnforcementMetrics(self.registry, self.clock),
            self.clock,
        )

    async def refresh(self) -> bool:
        self.refreshes += 1
        if self.on_refresh:
            self.store.apply_metadata(self.on_refresh.pop(0), full=True)
        return self.refresh_succeeds

    def transform(self, frame: memoryview, version: int) -> object:
        self.transform_calls.append((bytes(frame), version))
        return frame

    def __call__(self, frame: bytes | memoryview, version: int) -> Any:
        view = frame if isinstance(frame, memoryview) else memoryview(frame)
        return self.enforcer(CLIENT, view, 0, version, CORR)

    def count(self, topic_name: str, decision: str, reason: str) -> float:
        value = self.registry.get_sample_value(
            "rackguard_produce_partitions_total",
            {"topic": topic_name, "decision": decision, "reason": reason},
        )
        return value or 0.0

    def unknown_refreshes(self) -> float:
        return self.registry.get_sample_value("rackguard_unknown_partition_refreshes_total") or 0


# all pass


@pytest.mark.parametrize("version", VERSIONS)
def test_all_pass_forwards_the_original_bytes(version: int) -> None:
    play = Playbook()
    frame = memoryview(produce(version, [("orders", [0, 2]), ("payments", [0])]))
    action = play(frame, version)
    assert isinstance(action, Forward)
    assert action.frame is frame
    assert action.expect_response is True
    assert action.transform == play.transform
    assert play.count("orders", "forwarded", "") == 2
    assert play.count("payments", "forwarded", "") == 1
    assert play.refreshes == 0


# all fail


@pytest.mark.parametrize("dedicated", [None, DEDICATED])
@pytest.mark.parametrize("version", VERSIONS)
def test_all_fail_is_answered_by_the_proxy(version: int, dedicated: int | None) -> None:
    play = Playbook(dedicated_code=dedicated)
    layout = [("audit", [1, 0]), ("orders", [3, 1])]
    action = play(produce(version, layout), version)
    assert isinstance(action, Reply)
    got = response_partitions(action.frame, version)
    assert [(name, p.index) for name, p in got] == [
        ("audit", 1), ("audit", 0), ("orders", 3), ("orders", 1)]
    for name, p in got:
        assert p.error_code == (19 if dedicated is None else DEDICATED)
        assert p.base_offset == -1
        if version >= 8:
            assert p.error_message.startswith("NOT_ENOUGH_RACKS:")
            assert f"{name}-{p.index}" in p.error_message
            assert "min.insync.racks=2" in p.error_message
    assert play.count("audit", "rejected", "NOT_ENOUGH_RACKS") == 2
    assert play.count("orders", "rejected", "NOT_ENOUGH_RACKS") == 2
    assert play.transform_calls == []


@pytest.mark.parametrize("version", [8, 13])
def test_rejection_message_names_racks_seen_and_required(version: int) -> None:
    play = Playbook(default_min_racks=3)
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Reply)
    [(_, p)] = response_partitions(action.frame, version)
    assert p.error_code == 19
    assert p.error_message.startswith("NOT_ENOUGH_RACKS: orders-0:")
    assert "rack-a" in p.error_message and "rack-b" in p.error_message
    assert "min.insync.racks=3" in p.error_message


# mixed


@pytest.mark.parametrize("dedicated", [None, DEDICATED])
@pytest.mark.parametrize("version", VERSIONS)
def test_mixed_forwards_only_passing_partitions_and_merges(
    version: int, dedicated: int | None
) -> None:
    play = Playbook(dedicated_code=dedicated)
    layout = [("orders", [0, 1, 2, 3]), ("audit", [0]), ("payments", [0])]
    original = produce(version, layout)
    action = play(original, version)
    assert isinstance(action, Forward)
    assert action.expect_response is True
    assert bytes(action.frame) != original

    # the broker gets only the passing partitions, record bytes unchanged
    forwarded = request_partitions(action.frame, version)
    assert forwarded == [
        ("orders", 0, BATCHES[("orders", 0)]),
        ("orders", 2, BATCHES[("orders", 2)]),
        ("payments", 0, BATCHES[("payments", 0)]),
    ]
    assert int.from_bytes(bytes(action.frame)[8:12], "big") == CORR

    # the broker answers (in its own order); the client gets one merged response
    upstream = kp_response(
        version,
        [
            (key_of("payments", version), [{"index": 0, "error_code": 0, "base_offset": 900}]),
            (key_of("orders", version), [
                {"index": 2, "error_code": 0, "base_offset": 200},
                {"index": 0, "error_code": 0, "base_offset": 100},
            ]),
        ],
        correlation_id=CORR,
    )
    assert action.transform is not None
    merged = action.transform(memoryview(upstream), version)
    assert isinstance(merged, (bytes, bytearray, memoryview))
    # the proxy's ordinary response transform ran on the merged frame
    assert play.transform_calls == [(bytes(merged), version)]

    got = response_partitions(merged, version)
    assert [(name, p.index) for name, p in got] == [
        ("orders", 0), ("orders", 1), ("orders", 2), ("orders", 3), ("audit", 0),
        ("payments", 0)]
    offsets = {("orders", 0): 100, ("orders", 2): 200, ("payments", 0): 900}
    reject_code = 19 if dedicated is None else DEDICATED
    for name, p in got:
        if (name, p.index) in PASSING:
            assert (p.error_code, p.base_offset) == (0, offsets[(name, p.index)])
            if version >= 8:
                assert p.error_message is None
        else:
            assert (p.error_code, p.base_offset) == (reject_code, -1)
            if version >= 8:
                assert p.error_message.startswith("NOT_ENOUGH_RACKS:")
                assert f"{name}-{p.index}" in p.error_message


@pytest.mark.parametrize("version", [3, 13])
def test_mixed_passes_broker_errors_through(version: int) -> None:
    play = Playbook()
    action = play(produce(version, [("orders", [1, 0])]), version)
    assert isinstance(action, Forward) and action.transform is not None
    upstream = kp_response(
        version,
        [(key_of("orders", version), [{"index": 0, "error_code": 6, "base_offset": -1}])],
        correlation_id=CORR,
    )
    got = response_partitions(action.transform(memoryview(upstream), version), version)
    assert [(n, p.index, p.error_code) for n, p in got] == [("orders", 1, 19), ("orders", 0, 6)]


# observe mode


@pytest.mark.parametrize("version", VERSIONS)
def test_observe_forwards_the_original_and_counts(version: int) -> None:
    play = Playbook(observe=True)
    frame = memoryview(produce(version, [("orders", [0, 1, 3]), ("audit", [0])]))
    action = play(frame, version)
    assert isinstance(action, Forward)
    assert action.frame is frame
    assert action.transform == play.transform
    assert play.count("orders", "observed_reject", "NOT_ENOUGH_RACKS") == 2
    assert play.count("audit", "observed_reject", "NOT_ENOUGH_RACKS") == 1
    assert play.count("orders", "forwarded", "") == 1
    assert play.count("orders", "rejected", "NOT_ENOUGH_RACKS") == 0


# acks 0 / 1 and a rule that needs one rack: no walk at all


@pytest.fixture
def no_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the request must not be walked or decided")

    monkeypatch.setattr(enforcement_module, "walk_produce_request", boom)
    monkeypatch.setattr(enforcement_module, "decide", boom)


@pytest.mark.usefixtures("no_walk")
@pytest.mark.parametrize("acks", [0, 1])
@pytest.mark.parametrize("version", VERSIONS)
def test_acks_0_and_1_forward_the_original(version: int, acks: int) -> None:
    play = Playbook()
    frame = memoryview(produce(version, [("audit", [0, 1]), ("orders", [1])], acks=acks))
    action = play(frame, version)
    assert isinstance(action, Forward)
    assert action.frame is frame
    assert action.expect_response is (acks == 1)
    assert action.transform == play.transform
    assert play.registry.get_sample_value("rackguard_produce_partitions_total",
                                          {"topic": "audit", "decision": "rejected",
                                           "reason": "NOT_ENOUGH_RACKS"}) is None


@pytest.mark.usefixtures("no_walk")
@pytest.mark.parametrize("version", [3, 13])
def test_rule_needing_one_rack_forwards_without_walking(version: int) -> None:
    play = Playbook(default_min_racks=1)
    frame = memoryview(produce(version, [("audit", [0, 1])]))
    action = play(frame, version)
    assert isinstance(action, Forward) and action.frame is frame


# metadata too old


@pytest.mark.parametrize("version", [3, 9, 13])
def test_stale_view_rejects_with_19_even_in_dedicated_mode(version: int) -> None:
    play = Playbook(dedicated_code=DEDICATED)
    play.clock.t += 11.0  # max age 10 s
    action = play(produce(version, [("orders", [0, 2])]), version)
    assert isinstance(action, Reply)
    got = response_partitions(action.frame, version)
    assert [p.error_code for _, p in got] == [19, 19]
    if version >= 8:
        assert all(p.error_message.startswith("METADATA_STALE:") for _, p in got)
    assert play.count("orders", "rejected", "METADATA_STALE") == 2


@pytest.mark.parametrize("version", [3, 13])
def test_stale_view_fail_open_forwards_the_original(version: int) -> None:
    play = Playbook(fail_open=True)
    play.clock.t += 11.0
    frame = memoryview(produce(version, [("orders", [1, 3])]))
    action = play(frame, version)
    assert isinstance(action, Forward) and action.frame is frame
    assert play.count("orders", "forwarded", "stale_fail_open") == 2


# a partition the view does not know: one refresh, then decide


NEW_TOPIC_ONE_RACK = topic("fresh", [part(0, (1, 4))], tid(21))
NEW_TOPIC_TWO_RACKS = topic("fresh", [part(0, (1, 2))], tid(21))


def fresh_key(version: int) -> TopicKey:
    return tid(21) if version >= 13 else "fresh"


def produce_fresh(version: int, extra: Sequence[int] = ()) -> bytes:
    topics: list[tuple[TopicKey, list[tuple[int, bytes]]]] = [
        (fresh_key(version), [(0, BATCHES[("orders", 0)])])]
    if extra:
        topics.append((key_of("orders", version), [(i, BATCHES[("orders", i)]) for i in extra]))
    return kp_request(version, topics, correlation_id=CORR)


@pytest.mark.parametrize("version", VERSIONS)
async def test_unknown_partition_refreshes_once_then_rejects(version: int) -> None:
    play = Playbook()
    play.on_refresh.append(snap([*TOPICS, NEW_TOPIC_ONE_RACK], brokers=CLUSTER))
    pending = play(produce_fresh(version), version)
    assert inspect.isawaitable(pending)
    assert not isinstance(pending, (Forward, Reply))
    action = await pending
    assert play.refreshes == 1
    assert play.unknown_refreshes() == 1
    assert isinstance(action, Reply)
    [(name, p)] = response_partitions(action.frame, version)
    assert (name, p.error_code) == ("fresh", 19)


@pytest.mark.parametrize("version", [3, 13])
async def test_unknown_partition_refresh_then_pass(version: int) -> None:
    play = Playbook()
    play.on_refresh.append(snap([*TOPICS, NEW_TOPIC_TWO_RACKS], brokers=CLUSTER))
    frame = memoryview(produce_fresh(version, extra=[0]))
    pending = play(frame, version)
    assert inspect.isawaitable(pending)
    action = await pending
    assert play.refreshes == 1
    assert isinstance(action, Forward) and action.frame is frame


@pytest.mark.parametrize("version", [3, 13])
async def test_unknown_partition_refresh_then_mixed(version: int) -> None:
    play = Playbook()
    play.on_refresh.append(snap([*TOPICS, NEW_TOPIC_TWO_RACKS], brokers=CLUSTER))
    pending = play(produce_fresh(version, extra=[0, 1]), version)
    action = await pending  # type: ignore[misc]
    assert play.refreshes == 1
    assert isinstance(action, Forward)
    assert request_partitions(action.frame, version) == [
        ("fresh", 0, BATCHES[("orders", 0)]),
        ("orders", 0, BATCHES[("orders", 0)]),
    ]


@pytest.mark.parametrize("version", [3, 13])
async def test_still_unknown_after_refresh_is_forwarded(version: int) -> None:
    play = Playbook()  # the refresh learns nothing new
    frame = memoryview(produce_fresh(version))
    pending = play(frame, version)
    action = await pending  # type: ignore[misc]
    assert play.refreshes == 1
    assert isinstance(action, Forward) and action.frame is frame
    assert play.count("fresh" if version < 13 else "?", "forwarded", "unknown") == 1


async def test_refresh_slower_than_the_wait_fails_closed() -> None:
    release = asyncio.Event()
    play = Playbook(unknown_wait_s=0.0)
    calls = 0

    async def slow_refresh() -> bool:
        nonlocal calls
        calls += 1
        await release.wait()
        return True

    play.enforcer._refresh = slow_refresh
    frame = memoryview(produce_fresh(3))
    action = await play(frame, 3)
    assert calls == 1
    assert isinstance(action, Reply)
    assert play.count("fresh", "rejected", "METADATA_STALE") == 1
    release.set()  # let the shielded refresh finish before the loop closes
    for _ in range(3):
        await asyncio.sleep(0)


@pytest.mark.parametrize("fail_open", [False, True])
async def test_failed_refresh_makes_unknown_partitions_unverifiable(fail_open: bool) -> None:
    play = Playbook(fail_open=fail_open)
    play.refresh_succeeds = False
    frame = memoryview(produce_fresh(9))
    action = await play(frame, 9)  # type: ignore[misc]
    assert play.refreshes == 1
    if fail_open:
        assert isinstance(action, Forward) and action.frame is frame
        assert play.count("fresh", "forwarded", "stale_fail_open") == 1
    else:
        assert isinstance(action, Reply)
        assert play.count("fresh", "rejected", "METADATA_STALE") == 1


async def test_unknown_partition_with_observe_forwards() -> None:
    play = Playbook(observe=True)
    play.on_refresh.append(snap([*TOPICS, NEW_TOPIC_ONE_RACK], brokers=CLUSTER))
    frame = memoryview(produce_fresh(9))
    action = await play(frame, 9)
    assert isinstance(action, Forward) and action.frame is frame
    assert play.count("fresh", "observed_reject", "NOT_ENOUGH_RACKS") == 1


def test_settings_can_be_replaced() -> None:
    play = Playbook()
    frame = memoryview(produce(9, [("audit", [0])]))
    assert isinstance(play(frame, 9), Reply)
    play.enforcer.replace_settings(EnforcementSettings(
        rule=RackRule(default_min_racks=1), dedicated_code=None, observe=False,
        unknown_wait_s=0.05))
    action = play(frame, 9)
    assert isinstance(action, Forward) and action.frame is frame


# a rack rejection while min.insync.replicas is unknown (a topic new to the view)


def with_config_refresh(play: Playbook, values: dict[str, int]) -> list[int]:
    """Give the enforcer a min.insync.replicas refresh that applies ``values``."""
    calls: list[int] = []

    async def refresh_configs() -> bool:
        calls.append(1)
        play.store.apply_min_insync_replicas(values)
        return True

    play.enforcer._refresh_configs = refresh_configs
    return calls


async def test_a_rack_rejection_waits_for_min_insync_replicas_and_the_broker_decides() -> None:
    play = Playbook()
    calls = with_config_refresh(play, {"audit": 3})  # 2 and 1 in-sync members: below 3
    pending = play(produce(9, [("audit", [0, 1])]), 9)
    assert inspect.isawaitable(pending)
    action = await pending
    assert calls == [1]
    assert isinstance(action, Forward)  # the broker answers NOT_ENOUGH_REPLICAS itself
    assert play.count("audit", "forwarded", "below_min_isr") == 2


async def test_a_rack_rejection_with_a_known_min_insync_replicas_is_not_held() -> None:
    play = Playbook()
    play.store.apply_min_insync_replicas({"audit": 1})
    calls = with_config_refresh(play, {})
    action = play(produce(9, [("audit", [0, 1])]), 9)
    assert isinstance(action, Reply) and calls == []


async def test_a_topic_a_refresh_brought_no_min_insync_replicas_for_is_held_once() -> None:
    """A broker that has no min.insync.replicas (or may not describe it): the first rack
    rejection waits for one refresh; the next ones are decided at once, not each held
    for a poll."""
    play = Playbook()
    calls = with_config_refresh(play, {})
    pending = play(produce(9, [("audit", [0, 1])]), 9)
    assert inspect.isawaitable(pending)
    assert isinstance(await pending, Reply) and calls == [1]
    for _ in range(3):
        action = play(produce(9, [("audit", [0])]), 9)
        assert isinstance(action, Reply)  # refused at once
    assert calls == [1]
