"""proxy.enforce.recheck.AckRecheck through the Produce hook: a fake clock, scripted
broker answers and scripted metadata lookups, no sockets.

Invariant under test: in enforcing mode a forwarded acks=all answer that arrives within
the bound goes through unchanged (synchronously) and costs no lookup; a slower one marks
its partitions suspect at once (the answers released with it in the same read are held
too) and waits for a view fetched after that moment (looked at again, twice at most,
while it shows the very ISR the request was decided on); each success the rule then
refuses becomes NOT_ENOUGH_REPLICAS_AFTER_APPEND (20), counted, while the other
partitions keep the broker's answer; a failed lookup withdraws (unless fail_open);
a produce to a suspect partition, or sent to a broker the view does not show as the
partition's leader, waits for a lookup and is decided on the fresh view (refused as on
stale metadata if none comes); errors are never changed; observe mode never holds; the
loss watch's reader sees the answer the client gets.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from benchmarks.produce_frames import kp_response
from proxy.enforce.recheck import AckRecheck
from proxy.relay.actions import ClientInfo, Forward, Reply
from tests.unit._views import part, snap, topic
from tests.unit.enforce.test_enforcement_hook import (
    BATCHES,
    CLUSTER,
    CORR,
    IDS,
    TOPICS,
    Playbook,
    key_of,
    produce,
    request_partitions,
    response_partitions,
)

AFTER_S = 0.5
# orders-0 and payments-0 pass (two and three racks); after the shrink orders-0's ISR
# is broker 1 alone (rack-a), payments-0 keeps its three racks
SHRUNK = [
    topic("orders", [part(0, (1,)), part(1, (1, 4)), part(2, (2, 3)), part(3, (3,))],
          IDS["orders"]),
    topic("audit", [part(0, (4, 1)), part(1, (2,))], IDS["audit"]),
    topic("payments", [part(0, (1, 2, 3))], IDS["payments"]),
]
# orders-0's leader moved to broker 4 (rack-a) with an ISR of rack a alone
MOVED = [
    topic("orders", [part(0, (4, 1)), part(1, (1, 4)), part(2, (2, 3)), part(3, (3,))],
          IDS["orders"]),
    *SHRUNK[1:],
]


class Lookups:
    """The recheck's metadata lookups, scripted: each applies the next snapshot (if any)
    and answers ``ok``; with ``gate`` set, each waits for it first."""

    def __init__(self, play: Playbook) -> None:
        self.play = play
        self.count = 0
        self.ok = True
        self.views: list[Any] = []
        self.gate: asyncio.Event | None = None

    async def __call__(self) -> bool:
        self.count += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.views:
            self.play.store.apply_metadata(self.views.pop(0), full=True)
        return self.ok


def playbook(**kwargs: Any) -> tuple[Playbook, AckRecheck, Lookups]:
    play = Playbook(**kwargs)
    lookups = Lookups(play)

    async def sleep(delay: float) -> None:  # the fake clock moves; nothing waits
        play.clock.t += delay
        await asyncio.sleep(0)

    recheck = AckRecheck(AFTER_S, play.store, lookups, play.clock, 0.05, play.registry,
                         sleep=sleep)
    play.enforcer.recheck_answers(recheck)
    return play, recheck, lookups


def answer(version: int, parts: list[tuple[str, int, int]]) -> bytes:
    """The broker's answer: (topic, partition, error code), offsets 100 + index."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for name, index, code in parts:
        by_topic.setdefault(name, []).append(
            {"index": index, "error_code": code, "base_offset": 100 + index if code == 0
             else -1})
    return kp_response(version, [(key_of(name, version), ps) for name, ps in by_topic.items()],
                       correlation_id=CORR)


def arrive(action: Forward, frame: bytes, version: int) -> Any:
    """The relay's part as an answer arrives: the reader, then the transform (its result
    or the awaitable the relay would wait on); the read buffer is reused afterwards."""
    view = memoryview(bytearray(frame))
    if action.read is not None:
        action.read(view, version)
    assert action.transform is not None
    result = action.transform(view, version)
    if inspect.isawaitable(result):
        view[:] = b"\0" * len(view)  # the buffer is overwritten while the answer is held
        return result
    return bytes(result)  # type: ignore[arg-type]


async def settled(result: Any) -> bytes:
    return bytes(await result) if inspect.isawaitable(result) else bytes(result)


async def deliver(action: Forward, frame: bytes, version: int) -> bytes:
    return await settled(arrive(action, frame, version))


async def decided(action: Any) -> Any:
    """The Produce hook's action, awaited when the request had to wait for a lookup."""
    return await action if inspect.isawaitable(action) else action


def codes(frame: bytes, version: int) -> dict[tuple[str, int], int]:
    return {(name, p.index): p.error_code for name, p in response_partitions(frame, version)}


def withdrawn(play: Playbook, name: str) -> float:
    return play.registry.get_sample_value(
        "rackguard_acknowledgements_withdrawn_total", {"topic": name}) or 0.0


@pytest.mark.parametrize("version", [3, 8, 13])
async def test_a_fast_answer_passes_unchanged_without_a_refresh(version: int) -> None:
    play, recheck, lookups = playbook()
    action = play(produce(version, [("orders", [0]), ("payments", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += AFTER_S  # at the bound: not slow
    upstream = answer(version, [("orders", 0, 0), ("payments", 0, 0)])
    assert arrive(action, upstream, version) == upstream  # synchronous: nothing held
    assert lookups.count == 0 and recheck.held == 0


@pytest.mark.parametrize("version", [3, 8, 13])
async def test_a_slow_success_on_a_shrunk_isr_becomes_code_20(version: int) -> None:
    play, recheck, lookups = playbook()
    action = play(produce(version, [("orders", [0]), ("payments", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 4.0  # waited for the ISR shrink
    lookups.views.append(snap(SHRUNK, brokers=CLUSTER))
    got = await deliver(action, answer(version, [("orders", 0, 0), ("payments", 0, 0)]),
                        version)
    assert codes(got, version) == {("orders", 0): 20, ("payments", 0): 0}
    parts = dict(((name, p.index), p) for name, p in response_partitions(got, version))
    assert parts[("payments", 0)].base_offset == 100  # the broker's answer, kept
    if version >= 8:
        assert "NOT_ENOUGH_RACKS" in parts[("orders", 0)].error_message
    # payments-0 shows the ISR it was decided on: it might be a lagging cache, looked
    # at twice more
    assert lookups.count == 3
    assert withdrawn(play, "orders") == 1 and withdrawn(play, "payments") == 0
    assert recheck.held == 1  # orders-0 (payments-0 found whole: let go)


async def test_a_held_partition_has_its_fast_answers_checked_until_whole_again() -> None:
    version = 9
    play, recheck, lookups = playbook()
    slow = play(produce(version, [("orders", [0])]), version)
    play.clock.t += 4.0
    fast = play(produce(version, [("orders", [0])]), version)  # answered at once
    assert isinstance(slow, Forward) and isinstance(fast, Forward)
    lookups.views.append(snap(SHRUNK, brokers=CLUSTER))
    upstream = answer(version, [("orders", 0, 0)])
    assert codes(await deliver(slow, upstream, version), version) == {("orders", 0): 20}
    assert codes(await deliver(fast, upstream, version), version) == {("orders", 0): 20}
    # one lookup: the fast answer is decided on the view fetched after the suspicion
    assert lookups.count == 1 and withdrawn(play, "orders") == 2 and recheck.held == 1
    # while the view shows it short, a produce to it is refused before the append
    refused = await decided(play(produce(version, [("orders", [0])]), version))
    assert isinstance(refused, Reply)
    # the racks are back: the next answer is still checked, found whole, and let go
    play.store.apply_metadata(snap(TOPICS, brokers=CLUSTER), full=True)
    back = await decided(play(produce(version, [("orders", [0])]), version))
    assert isinstance(back, Forward)
    assert await deliver(back, upstream, version) == upstream
    assert lookups.count == 1 and recheck.held == 0
    after = play(produce(version, [("orders", [0])]), version)
    assert isinstance(after, Forward)
    assert arrive(after, upstream, version) == upstream  # not held any more: synchronous


async def test_errors_are_never_changed_and_cost_no_refresh() -> None:
    version = 9
    play, recheck, lookups = playbook()
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 4.0
    lookups.views.append(snap(SHRUNK, brokers=CLUSTER))
    upstream = answer(version, [("orders", 0, 7)])  # REQUEST_TIMED_OUT
    assert codes(await deliver(action, upstream, version), version) == {("orders", 0): 7}
    assert lookups.count == 0 and recheck.held == 0


async def test_a_slow_success_on_a_whole_isr_is_kept_after_looking_again() -> None:
    version = 9
    play, recheck, lookups = playbook()
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 2.0  # slow, but the ISR did not shrink
    upstream = answer(version, [("orders", 0, 0)])
    assert await deliver(action, upstream, version) == upstream
    # the fresh view showed the very ISR the request was decided on: looked at twice more
    assert lookups.count == 3 and recheck.held == 0


async def test_a_metadata_cache_that_lags_the_shrink_is_looked_at_again() -> None:
    """The broker answering the lookup has not replayed the shrink yet: its view shows the
    ISR the request was decided on. Without a second look the answer would pass."""
    version = 9
    play, recheck, lookups = playbook()
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 4.0
    lookups.views += [snap(TOPICS, brokers=CLUSTER), snap(SHRUNK, brokers=CLUSTER)]
    got = await deliver(action, answer(version, [("orders", 0, 0)]), version)
    assert codes(got, version) == {("orders", 0): 20}
    assert lookups.count == 2 and recheck.held == 1


async def test_the_answers_released_with_a_slow_one_in_the_same_read_are_held() -> None:
    """The shrink releases every waiting answer at once: the relay hands the slow one and
    the fast ones that follow it to their transforms back to back, before any awaiting.
    The slow one marks the partition at once, so the fast ones are held too."""
    version = 9
    play, recheck, lookups = playbook()
    slow = play(produce(version, [("orders", [0])]), version)
    play.clock.t += 4.0
    fast = [play(produce(version, [("orders", [0])]), version) for _ in range(3)]
    assert isinstance(slow, Forward) and all(isinstance(f, Forward) for f in fast)
    upstream = answer(version, [("orders", 0, 0)])
    lookups.views.append(snap(SHRUNK, brokers=CLUSTER))
    arrived = [arrive(a, upstream, version) for a in (slow, *fast)]  # one read
    assert all(inspect.isawaitable(r) for r in arrived)
    got = [codes(await settled(r), version) for r in arrived]
    assert got == [{("orders", 0): 20}] * 4
    assert lookups.count == 1 and withdrawn(play, "orders") == 4


async def test_a_produce_to_a_suspect_partition_is_decided_on_the_fresh_view() -> None:
    """A slow answer's lookup is in flight: a produce to the same partition waits for it
    and is refused before the append, instead of being forwarded on the view from before
    the shrink."""
    version = 9
    play, recheck, lookups = playbook()
    slow = play(produce(version, [("orders", [0])]), version)
    assert isinstance(slow, Forward)
    play.clock.t += 4.0
    lookups.gate = asyncio.Event()
    lookups.views.append(snap(SHRUNK, brokers=CLUSTER))
    held = arrive(slow, answer(version, [("orders", 0, 0)]), version)
    pending = play(produce(version, [("orders", [0]), ("payments", [0])]), version)
    assert inspect.isawaitable(pending)  # the view is known stale for orders-0
    other = play(produce(version, [("payments", [0])]), version)
    assert isinstance(other, Forward)  # another partition: not waiting
    lookups.gate.set()
    action = await decided(pending)
    assert isinstance(action, Forward)  # payments-0 forwarded, orders-0 refused
    assert request_partitions(action.frame, version) == [
        ("payments", 0, BATCHES[("payments", 0)])]
    assert codes(await settled(held), version) == {("orders", 0): 20}
    assert lookups.count == 1
    assert play.registry.get_sample_value(
        "rackguard_stale_view_lookups_total", {"reason": "suspect"}) == 1


async def test_a_failed_lookup_withdraws_the_suspect_success() -> None:
    """No view from after the suspicion: the rule cannot be verified, and the answer is
    not passed on the view from before it (however young that view is)."""
    version = 9
    play, _, lookups = playbook()
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 2.0  # slow; the view is 2 s old, well within max_metadata_age
    lookups.ok = False
    got = await deliver(action, answer(version, [("orders", 0, 0)]), version)
    assert codes(got, version) == {("orders", 0): 20}
    refused = await decided(play(produce(version, [("orders", [0])]), version))
    assert isinstance(refused, Reply)  # still no fresh view: METADATA_STALE
    [(_, p)] = response_partitions(refused.frame, version)
    assert p.error_code == 19 and p.error_message.startswith("METADATA_STALE")


async def test_a_failed_lookup_with_fail_open_keeps_the_success() -> None:
    version = 9
    play, _, lookups = playbook(fail_open=True)
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 2.0
    lookups.ok = False
    upstream = answer(version, [("orders", 0, 0)])
    assert await deliver(action, upstream, version) == upstream


def on(listener: str, play: Playbook, frame: bytes, version: int) -> Any:
    return play.enforcer(ClientInfo("1.2.3.4:5", listener), memoryview(frame), 0, version,
                         CORR)


async def test_a_produce_sent_to_a_leader_the_view_does_not_know_waits_for_a_lookup() -> None:
    """The client learnt that broker 4 leads orders-0 (the view still says broker 1, with
    an ISR over two racks): the view is stale for it, looked up at once, and the request
    is decided on the fresh view (ISR 4, 1: rack a alone): refused."""
    version = 9
    play, _, lookups = playbook()
    lookups.views.append(snap(MOVED, brokers=CLUSTER))
    pending = on("node-4", play, produce(version, [("orders", [0])]), version)
    assert inspect.isawaitable(pending)
    action = await pending
    assert isinstance(action, Reply)
    [(_, p)] = response_partitions(action.frame, version)
    assert p.error_code == 19 and p.error_message.startswith("NOT_ENOUGH_RACKS")
    assert lookups.count == 1
    assert play.registry.get_sample_value(
        "rackguard_stale_view_lookups_total", {"reason": "leader_moved"}) == 1


async def test_a_failed_leader_lookup_refuses_as_on_stale_metadata() -> None:
    version = 9
    play, _, lookups = playbook()
    lookups.ok = False
    action = await decided(on("node-4", play, produce(version, [("orders", [0])]), version))
    assert isinstance(action, Reply)
    [(_, p)] = response_partitions(action.frame, version)
    assert p.error_code == 19 and p.error_message.startswith("METADATA_STALE")
    open_play, _, open_lookups = playbook(fail_open=True)
    open_lookups.ok = False
    forwarded = await decided(on("node-4", open_play, produce(version, [("orders", [0])]),
                                 version))
    assert isinstance(forwarded, Forward)


async def test_the_leaders_broker_and_a_stale_client_cost_no_repeated_lookups() -> None:
    version = 9
    play, _, lookups = playbook()
    frame = produce(version, [("orders", [0])])
    assert isinstance(on("node-1", play, frame, version), Forward)  # the leader: no lookup
    assert isinstance(on("bootstrap", play, frame, version), Forward)
    assert lookups.count == 0
    # a client that still sends to broker 2: one lookup (looked at again twice: the view
    # did not change), then forwarded (the broker answers NOT_LEADER_OR_FOLLOWER)
    assert isinstance(await decided(on("node-2", play, frame, version)), Forward)
    assert lookups.count == 3
    play.clock.t += 0.5
    assert isinstance(on("node-2", play, frame, version), Forward)  # within the memo
    assert lookups.count == 3
    play.clock.t += 1.0
    again = on("node-2", play, frame, version)  # looked up again
    assert inspect.isawaitable(again)
    assert isinstance(await decided(again), Forward)


async def test_observe_mode_never_holds() -> None:
    version = 9
    play, _, lookups = playbook(observe=True)
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 4.0
    lookups.views.append(snap(SHRUNK, brokers=CLUSTER))
    upstream = answer(version, [("orders", 0, 0)])
    assert arrive(action, upstream, version) == upstream
    assert isinstance(on("node-4", play, produce(version, [("orders", [0])]), version),
                      Forward)
    assert lookups.count == 0


async def test_the_answer_reader_sees_the_withdrawn_answer() -> None:
    version = 9
    play, _, lookups = playbook()
    seen: list[dict[tuple[str, int], int]] = []
    play.enforcer.watch_answers(
        lambda client, frame, acks, header, request, partitions:
            lambda answer_frame, v: seen.append(codes(bytes(answer_frame), v)))
    fast = play(produce(version, [("orders", [0])]), version)
    slow = play(produce(version, [("orders", [0])]), version)
    assert isinstance(fast, Forward) and isinstance(slow, Forward)
    await deliver(fast, answer(version, [("orders", 0, 0)]), version)
    play.clock.t += 4.0
    lookups.views.append(snap(SHRUNK, brokers=CLUSTER))
    await deliver(slow, answer(version, [("orders", 0, 0)]), version)
    assert seen == [{("orders", 0): 0}, {("orders", 0): 20}]


@pytest.mark.parametrize("version", [8, 13])
async def test_mixed_request_withdraws_before_the_merge(version: int) -> None:
    play, _, lookups = playbook()
    action = play(produce(version, [("orders", [0, 1]), ("payments", [0])]), version)
    assert isinstance(action, Forward)  # orders-1 refused, the others forwarded
    play.clock.t += 4.0
    lookups.views.append(snap(SHRUNK, brokers=CLUSTER))
    got = await deliver(action, answer(version, [("orders", 0, 0), ("payments", 0, 0)]),
                        version)
    assert codes(got, version) == {("orders", 0): 20, ("orders", 1): 19, ("payments", 0): 0}
