"""proxy.admin.topic_follower and topic_fetch without sockets: brokers are scripts of
Fetch answers.

Invariants under test: records reach the store once each, in offset order, across
answers, connections and leaders; caught-up is reported once, when the offset reaches
an answer's high watermark; a leader error or a leader that does not answer within the
attempt bound closes the connection, refreshes the view and asks the leader it names at
once (no back-off when the leadership moved); silence beyond the bound is reported once
and cleared by the next answer; an offset out of range restarts at the log start; a
batch the log cleaner emptied and a control batch move the offset without a record.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.consumer.fetch import FetchResponse
from kafka.record import MemoryRecordsBuilder

from proxy.admin.topic_fetch import FETCH, Record, fetch_request, read_fetch
from proxy.admin.topic_follower import FollowSettings, PartitionFollower

T = "__rackguard_configs"
HANG = "hang"


def records(offset: int, *keys: bytes) -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, offset=offset)
    for key in keys:
        b.append(timestamp=None, key=key, value=b"v" + key, headers=[("client", b"c")])
    b.close()
    return bytes(b.buffer())


def answer(hw: int, raw: bytes = b"", error: int = 0, log_start: int = 0) -> bytes:
    topic = FetchResponse.FetchableTopicResponse
    r = FetchResponse(version=12, throttle_time_ms=0, error_code=0, session_id=0, responses=[
        topic(topic=T, partitions=[topic.PartitionData(
            partition_index=0, error_code=error, high_watermark=hw, last_stable_offset=hw,
            log_start_offset=log_start, aborted_transactions=[], preferred_read_replica=-1,
            records=raw)])])
    r.with_header(correlation_id=1)
    return bytes(r.encode(header=True, framed=True))


class Broker:
    """One broker's connection: its answers in order (bytes, an exception, or HANG)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.offsets: list[int] = []  # the offset each Fetch asked for
        self.waits: list[int] = []  # the wait each Fetch asked for (ms)
        self.connections = 0
        self.closed = 0
        self.versions = {FETCH: (4, 12)}
        self.expires_at = float("inf")

    async def call(self, request: Any, timeout: float) -> bytes:
        self.offsets.append(request.topics[0].partitions[0].fetch_offset)
        self.waits.append(request.max_wait_ms)
        if not self.answers:
            await asyncio.Event().wait()  # nothing more: a long poll that never ends
        got = self.answers.pop(0)
        if got == HANG:
            await asyncio.Event().wait()
        if isinstance(got, BaseException):
            raise got
        assert isinstance(got, bytes)
        return got

    def close(self) -> None:
        self.closed += 1


class Rig:
    def __init__(self, brokers: dict[int, Broker], leader: int, attempt_s: float = 0.05,
                 silence_s: float = 60.0, max_backoff_s: float = 0.02) -> None:
        self.brokers = brokers
        self.leader: int | None = leader
        self.after_refresh: int | None = None  # the leader a refresh shows
        self.refreshes = 0
        self.got: list[Record] = []
        self.caught_up = 0
        self.silences: list[str | None] = []
        self.now = 0.0
        self.follower = PartitionFollower(
            FollowSettings(T, 0, wait_s=0.5, attempt_s=attempt_s, backoff_s=0.01,
                           max_backoff_s=max_backoff_s, silence_s=silence_s),
            lambda: self.leader, self.connect, self.refresh, lambda: self.now,
            self.got.append, self.count_caught_up, self.silences.append)

    async def connect(self, node: int) -> Any:
        broker = self.brokers[node]
        broker.connections += 1
        return broker

    async def refresh(self) -> bool:
        self.refreshes += 1
        if self.after_refresh is not None:
            self.leader = self.after_refresh
        return True

    def count_caught_up(self) -> None:
        self.caught_up += 1

    async def run_until(self, done: Any, limit_s: float = 2.0) -> None:
        task = asyncio.ensure_future(self.follower.run())
        try:
            async with asyncio.timeout(limit_s):
                while not done():
                    await asyncio.sleep(0.001)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def test_read_fetch_skips_what_lies_below_the_offset_and_moves_past_the_batch() -> None:
    frame = answer(7, records(5, b"a", b"b"))
    got = read_fetch(frame, 12, T, 0, 6)
    assert [r.offset for r in got.records] == [6] and got.next_offset == 7
    assert got.records[0] == Record(6, b"b", b"vb", (("client", b"c"),))
    nothing = read_fetch(answer(7), 12, T, 0, 7)
    assert nothing.records == () and nothing.next_offset == 7 and nothing.high_watermark == 7


def test_fetch_request_names_the_partition_and_the_wait() -> None:
    request = fetch_request(T, 0, 42, 500, 12)
    assert request.max_wait_ms == 500 and request.topics[0].topic == T
    assert request.topics[0].partitions[0].fetch_offset == 42


async def test_records_in_order_across_answers_and_caught_up_once() -> None:
    leader = Broker(answer(3, records(0, b"a", b"b")), answer(3, records(2, b"c")),
                    answer(4, records(3, b"d")))
    rig = Rig({1: leader}, 1)
    await rig.run_until(lambda: len(rig.got) == 4)
    assert [r.offset for r in rig.got] == [0, 1, 2, 3]
    assert leader.offsets[:4] == [0, 2, 3, 4]
    assert rig.caught_up == 1 and leader.connections == 1 and rig.refreshes == 0
    assert leader.waits[:3] == [1, 500, 500]  # the first is barely held


async def test_an_empty_partition_is_read_to_its_end_by_the_first_answer() -> None:
    leader = Broker(answer(0))
    rig = Rig({1: leader}, 1)
    await rig.run_until(lambda: rig.caught_up == 1)
    assert leader.waits[0] == 1 and rig.got == []


async def test_a_leader_error_moves_to_the_leader_a_fresh_view_names_at_once() -> None:
    old = Broker(answer(1, records(0, b"a")), answer(-1, error=6))  # NOT_LEADER_OR_FOLLOWER
    new = Broker(answer(2, records(1, b"b")))
    rig = Rig({1: old, 2: new}, 1)
    rig.after_refresh = 2
    await rig.run_until(lambda: len(rig.got) == 2)
    assert [r.offset for r in rig.got] == [0, 1] and new.offsets[0] == 1
    assert old.closed == 1 and rig.refreshes == 1


async def test_a_hung_leader_is_left_after_the_attempt_bound() -> None:
    old = Broker(answer(1, records(0, b"a")), HANG)
    new = Broker(answer(2, records(1, b"b")))
    rig = Rig({1: old, 2: new}, 1, attempt_s=0.05)
    rig.after_refresh = 2
    began = asyncio.get_running_loop().time()
    await rig.run_until(lambda: len(rig.got) == 2)
    assert asyncio.get_running_loop().time() - began < 1.0
    assert [r.offset for r in rig.got] == [0, 1] and old.closed == 1


async def test_the_same_leader_after_a_failure_is_asked_again_after_a_back_off() -> None:
    leader = Broker(ConnectionResetError("reset"), answer(1, records(0, b"a")))
    rig = Rig({1: leader}, 1)
    await rig.run_until(lambda: len(rig.got) == 1)
    assert leader.connections == 2 and rig.refreshes == 1 and leader.offsets[:2] == [0, 0]


async def test_silence_is_reported_once_and_cleared_by_an_answer() -> None:
    leader = Broker(OSError("down"), OSError("down"), OSError("down"),
                    answer(1, records(0, b"a")))
    rig = Rig({1: leader}, 1, silence_s=5.0)
    rig.now = 10.0  # the leader last answered at 0
    await rig.run_until(lambda: len(rig.got) == 1)
    assert len(rig.silences) == 2 and rig.silences[1] is None
    assert rig.silences[0] is not None and "down" in rig.silences[0]


async def test_an_offset_out_of_range_restarts_at_the_log_start() -> None:
    leader = Broker(answer(12, error=1, log_start=10), answer(12, records(10, b"a", b"b")))
    rig = Rig({1: leader}, 1)
    await rig.run_until(lambda: len(rig.got) == 2)
    assert leader.offsets[:2] == [0, 10] and [r.offset for r in rig.got] == [10, 11]


async def test_a_back_off_ends_when_the_view_names_another_leader() -> None:
    """A killed leader: its connection fails at once and the view names it until the
    cluster elects another, long enough for the back-off to grow; the new leader, once
    the poller brings it into the view, is asked within the leader check, not after the
    grown back-off."""
    dead = Broker(*[OSError("refused")] * 50)
    new = Broker(answer(1, records(0, b"a")))
    rig = Rig({1: dead, 2: new}, 1, max_backoff_s=30.0)
    loop = asyncio.get_running_loop()

    async def elect() -> float:
        while dead.connections < 8:  # back-offs of 0.01 .. 1.28 s: the next is 2.56 s
            await asyncio.sleep(0.001)
        rig.leader = 2  # the poller's next view
        return loop.time()

    elected = asyncio.ensure_future(elect())
    await rig.run_until(lambda: len(rig.got) == 1, limit_s=10.0)
    assert loop.time() - await elected < 0.5
