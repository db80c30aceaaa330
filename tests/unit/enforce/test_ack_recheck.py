"""proxy.enforce.recheck.AckRecheck through the Produce hook: a fake clock, scripted
broker answers and scripted metadata refreshes.

Invariant under test: in enforcing mode a forwarded acks=all answer that arrives within
the bound goes through unchanged and costs no refresh; a slower one is held for one
refresh, and each success the rule then refuses (the ISR shrank to one rack) becomes
NOT_ENOUGH_REPLICAS_AFTER_APPEND (20), counted, while the other partitions keep the
broker's answer; a partition so found stays held, so its fast answers are checked too,
until an answer finds it whole; errors are never changed; observe mode never holds;
the loss watch's reader sees the answer the client gets.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from benchmarks.produce_frames import kp_response
from proxy.enforce.recheck import AckRecheck
from proxy.relay.actions import Forward
from tests.unit._views import part, snap, topic
from tests.unit.enforce.test_enforcement_hook import (
    CLUSTER,
    CORR,
    IDS,
    TOPICS,
    Playbook,
    key_of,
    produce,
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


def playbook(**kwargs: Any) -> tuple[Playbook, AckRecheck]:
    play = Playbook(**kwargs)
    recheck = AckRecheck(AFTER_S, play.store, play.refresh, play.clock, 0.05, play.registry)
    play.enforcer.recheck_answers(recheck)
    return play, recheck


def answer(version: int, parts: list[tuple[str, int, int]]) -> bytes:
    """The broker's answer: (topic, partition, error code), offsets 100 + index."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for name, index, code in parts:
        by_topic.setdefault(name, []).append(
            {"index": index, "error_code": code, "base_offset": 100 + index if code == 0
             else -1})
    return kp_response(version, [(key_of(name, version), ps) for name, ps in by_topic.items()],
                       correlation_id=CORR)


def deliver(action: Forward, frame: bytes, version: int) -> bytes:
    """The relay's part: the reader, then the transform, awaited when it must be."""
    view = memoryview(bytearray(frame))  # the relay's read buffer, reused after the call
    if action.read is not None:
        action.read(view, version)
    assert action.transform is not None
    result = action.transform(view, version)
    if inspect.isawaitable(result):
        pending = result

        async def run() -> Any:
            return await pending

        view[:] = b"\0" * len(view)  # the buffer is overwritten while the answer is held
        result = asyncio.run(run())
    return bytes(result)  # type: ignore[arg-type]


def codes(frame: bytes, version: int) -> dict[tuple[str, int], int]:
    return {(name, p.index): p.error_code for name, p in response_partitions(frame, version)}


def withdrawn(play: Playbook, name: str) -> float:
    return play.registry.get_sample_value(
        "rackguard_acknowledgements_withdrawn_total", {"topic": name}) or 0.0


@pytest.mark.parametrize("version", [3, 8, 13])
def test_a_fast_answer_passes_unchanged_without_a_refresh(version: int) -> None:
    play, recheck = playbook()
    action = play(produce(version, [("orders", [0]), ("payments", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += AFTER_S  # at the bound: not slow
    upstream = answer(version, [("orders", 0, 0), ("payments", 0, 0)])
    assert deliver(action, upstream, version) == upstream
    assert play.refreshes == 0 and recheck.held == 0


@pytest.mark.parametrize("version", [3, 8, 13])
def test_a_slow_success_on_a_shrunk_isr_becomes_code_20(version: int) -> None:
    play, recheck = playbook()
    action = play(produce(version, [("orders", [0]), ("payments", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 4.0  # waited for the ISR shrink
    play.on_refresh.append(snap(SHRUNK, brokers=CLUSTER))
    got = deliver(action, answer(version, [("orders", 0, 0), ("payments", 0, 0)]), version)
    assert codes(got, version) == {("orders", 0): 20, ("payments", 0): 0}
    parts = dict(((name, p.index), p) for name, p in response_partitions(got, version))
    assert parts[("payments", 0)].base_offset == 100  # the broker's answer, kept
    if version >= 8:
        assert "NOT_ENOUGH_RACKS" in parts[("orders", 0)].error_message
    assert play.refreshes == 1
    assert withdrawn(play, "orders") == 1 and withdrawn(play, "payments") == 0
    assert recheck.held == 1


def test_a_held_partition_has_its_fast_answers_checked_until_whole_again() -> None:
    version = 9
    play, recheck = playbook()
    slow = play(produce(version, [("orders", [0])]), version)
    play.clock.t += 4.0
    fast = play(produce(version, [("orders", [0])]), version)  # answered at once
    assert isinstance(slow, Forward) and isinstance(fast, Forward)
    play.on_refresh.append(snap(SHRUNK, brokers=CLUSTER))
    upstream = answer(version, [("orders", 0, 0)])
    assert codes(deliver(slow, upstream, version), version) == {("orders", 0): 20}
    assert codes(deliver(fast, upstream, version), version) == {("orders", 0): 20}
    assert play.refreshes == 2 and withdrawn(play, "orders") == 2 and recheck.held == 1
    # the racks are back: the next answer is still checked, found whole, and let go
    play.store.apply_metadata(snap(TOPICS, brokers=CLUSTER), full=True)
    back = play(produce(version, [("orders", [0])]), version)
    assert isinstance(back, Forward)
    assert deliver(back, upstream, version) == upstream
    assert play.refreshes == 3 and recheck.held == 0
    after = play(produce(version, [("orders", [0])]), version)
    assert isinstance(after, Forward)
    assert deliver(after, upstream, version) == upstream
    assert play.refreshes == 3  # not held any more: no refresh


def test_errors_are_never_changed_and_cost_no_refresh() -> None:
    version = 9
    play, recheck = playbook()
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 4.0
    play.on_refresh.append(snap(SHRUNK, brokers=CLUSTER))
    upstream = answer(version, [("orders", 0, 7)])  # REQUEST_TIMED_OUT
    assert codes(deliver(action, upstream, version), version) == {("orders", 0): 7}
    assert play.refreshes == 0 and recheck.held == 0


def test_a_slow_success_on_a_whole_isr_is_kept() -> None:
    version = 9
    play, recheck = playbook()
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 2.0  # slow, but the ISR did not shrink
    upstream = answer(version, [("orders", 0, 0)])
    assert deliver(action, upstream, version) == upstream
    assert play.refreshes == 1 and recheck.held == 0


def test_a_failed_refresh_decides_on_the_view_as_it_is() -> None:
    version = 9
    play, _ = playbook()
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 11.0  # slow, and the view is now older than max_metadata_age
    play.refresh_succeeds = False
    got = deliver(action, answer(version, [("orders", 0, 0)]), version)
    assert codes(got, version) == {("orders", 0): 20}  # METADATA_STALE: fail closed


def test_observe_mode_never_holds() -> None:
    version = 9
    play, recheck = playbook(observe=True)
    action = play(produce(version, [("orders", [0])]), version)
    assert isinstance(action, Forward)
    play.clock.t += 4.0
    play.on_refresh.append(snap(SHRUNK, brokers=CLUSTER))
    upstream = answer(version, [("orders", 0, 0)])
    assert deliver(action, upstream, version) == upstream
    assert play.refreshes == 0


def test_the_answer_reader_sees_the_withdrawn_answer() -> None:
    version = 9
    play, _ = playbook()
    seen: list[dict[tuple[str, int], int]] = []
    play.enforcer.watch_answers(
        lambda client, frame, acks, header, request: lambda answer_frame, v: seen.append(
            codes(bytes(answer_frame), v)))
    fast = play(produce(version, [("orders", [0])]), version)
    slow = play(produce(version, [("orders", [0])]), version)
    assert isinstance(fast, Forward) and isinstance(slow, Forward)
    deliver(fast, answer(version, [("orders", 0, 0)]), version)
    play.clock.t += 4.0
    play.on_refresh.append(snap(SHRUNK, brokers=CLUSTER))
    deliver(slow, answer(version, [("orders", 0, 0)]), version)
    assert seen == [{("orders", 0): 0}, {("orders", 0): 20}]


@pytest.mark.parametrize("version", [8, 13])
def test_mixed_request_withdraws_before_the_merge(version: int) -> None:
    play, _ = playbook()
    action = play(produce(version, [("orders", [0, 1]), ("payments", [0])]), version)
    assert isinstance(action, Forward)  # orders-1 refused, the others forwarded
    play.clock.t += 4.0
    play.on_refresh.append(snap(SHRUNK, brokers=CLUSTER))
    got = deliver(action, answer(version, [("orders", 0, 0), ("payments", 0, 0)]), version)
    assert codes(got, version) == {("orders", 0): 20, ("orders", 1): 19, ("payments", 0): 0}
