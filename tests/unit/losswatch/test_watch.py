"""The loss watch end to end without sockets: Produce answers in, view changes, a fake
leader's answers, a fake clock; what is reported lost, and what never is."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry

from benchmarks.produce_frames import kp_request, kp_response, make_batch
from proxy.cluster.view import ClusterViewStore
from proxy.losswatch.report import LossReporter
from proxy.losswatch.watch import LossWatch, LossWatchSettings
from proxy.relay.actions import ClientInfo
from tests.unit._views import BROKERS, Clock, broker, part, snap, topic

from .fake_leader import FakeLeaders, LeaderLog

T = "orders"
SIX = (*BROKERS, broker(4, "rack-a"), broker(5, "rack-b"), broker(6, "rack-c"))


class Rig:
    def __init__(self, check_interval_s: float = 0.0, delay_s: float = 2.0) -> None:
        self.clock = Clock()
        self.registry = CollectorRegistry()
        self.store = ClusterViewStore(self.clock)
        self.leaders = FakeLeaders()
        self.watch = LossWatch(LossWatchSettings(3600.0, check_interval_s, delay_s),
                               lambda: self.store.view, self.leaders,
                               LossReporter(self.registry), self.clock)
        self.store.subscribe(self.watch.view_changed)

    def view(self, leader: int, isr: tuple[int, ...], epoch: int, index: int = 0) -> None:
        self.store.apply_metadata(snap([topic(T, [part(index, isr, (1, 4, 2, 5, 3), leader,
                                                       epoch=epoch)])], SIX), full=True)

    def ack(self, node: int, base: int, count: int, acks: int = -1, index: int = 0,
            client_id: str = "billing", error: int = 0, version: int = 9) -> None:
        frame = kp_request(version, [(T, [(index, make_batch(count))])], acks=acks,
                           client_id=client_id)
        reader = self.watch.expect(ClientInfo("10.0.0.9:5000", f"node-{node}"),
                                   memoryview(frame), acks)
        assert reader is not None
        answer = kp_response(version, [(T, [{"index": index, "error_code": error,
                                            "base_offset": base}])])
        reader(memoryview(answer), version)

    def rounds(self, n: int = 2) -> None:
        for _ in range(n):
            asyncio.run(self.watch.check_round())
            self.clock.t += self.watch.settings.confirm_delay_s

    def lost(self, acks: str = "all") -> float:
        return self.registry.get_sample_value("rackguard_acknowledged_records_lost_total",
                                              {"topic": T, "acks": acks}) or 0.0

    def partitions_with_loss(self) -> float:
        return self.registry.get_sample_value("rackguard_partitions_with_confirmed_loss") or 0.0


def test_unclean_election_reports_exactly_the_offsets_the_new_leader_lacks(
        caplog: pytest.LogCaptureFixture) -> None:
    rig = Rig()
    rig.view(leader=1, isr=(1, 4, 2, 5, 3), epoch=3)
    rig.ack(1, 0, 100, client_id="java-app")  # 0..99, replicated everywhere
    rig.view(leader=1, isr=(1, 4), epoch=3)  # racks b and c gone
    rig.ack(1, 100, 250, client_id="rdkafka-app")  # 100..349 acknowledged by rack a alone
    rig.view(leader=-1, isr=(4,), epoch=3)  # rack a destroyed
    rig.rounds(1)
    assert rig.leaders.asked == []  # no leader: nothing to ask yet
    rig.view(leader=2, isr=(2,), epoch=4)  # unclean: 2 was not in the last ISR seen
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=100, high_watermark=100)
    with caplog.at_level(logging.WARNING, "rackguard.losswatch"):
        rig.rounds(1)
        assert rig.lost() == 0  # one reading is not enough
        rig.rounds(1)
    assert rig.lost() == 250 and rig.partitions_with_loss() == 1
    [line] = [r for r in caplog.records if r.name == "rackguard.losswatch"]
    assert line.levelno == logging.ERROR
    text = line.getMessage()
    assert "topic orders partition 0: offsets 100..349 (250 record(s), acks=all)" in text
    assert "unclean election: leader 2 (epoch 4) was not in the last ISR seen [4]" in text
    assert "java-app, rdkafka-app" in text
    # reported once: later checks find nothing more
    rig.view(leader=5, isr=(2, 5), epoch=5)
    rig.leaders.logs[(T, 0)] = LeaderLog(5, 5, epoch_start=100, high_watermark=100)
    rig.rounds(2)
    assert rig.lost() == 250


def test_a_new_leader_without_a_watermark_yet_is_judged_by_its_epoch_start() -> None:
    """After an unclean election Kafka answers ListOffsets with OFFSET_NOT_AVAILABLE until
    the followers catch up (tens of seconds on the real cluster); the verdict does not
    wait for it."""
    rig = Rig()
    rig.view(leader=1, isr=(1, 4), epoch=3)
    rig.ack(1, 0, 100)
    rig.view(leader=2, isr=(2,), epoch=4)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=60, high_watermark=-1)
    rig.leaders.watermark_error = 78
    rig.rounds(2)
    assert rig.lost() == 40


def test_a_clean_election_loses_no_acks_all_write() -> None:
    rig = Rig()
    rig.view(leader=1, isr=(1, 2, 3), epoch=3)
    rig.ack(1, 0, 500)
    rig.view(leader=2, isr=(2, 3), epoch=4)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=500, high_watermark=480)
    rig.rounds(3)
    assert rig.lost() == 0 and not rig.watch.pending


def test_a_new_leader_whose_watermark_lags_is_not_a_loss() -> None:
    """The high watermark below the acknowledged offsets (followers still fetching) says
    nothing: the epoch start decides."""
    rig = Rig()
    rig.view(leader=1, isr=(1, 2), epoch=3)
    rig.ack(1, 0, 300)
    rig.view(leader=2, isr=(2,), epoch=4)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=300, high_watermark=10)
    rig.rounds(3)
    assert rig.lost() == 0


def test_acks_one_writes_a_clean_election_lost_are_reported_as_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    rig = Rig()
    rig.view(leader=1, isr=(1, 2), epoch=3)
    rig.ack(1, 0, 40, acks=1)
    rig.view(leader=2, isr=(2,), epoch=4)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=35, high_watermark=35)
    with caplog.at_level(logging.WARNING, "rackguard.losswatch"):
        rig.rounds(2)
    assert rig.lost("1") == 5 and rig.lost("all") == 0
    [line] = [r for r in caplog.records if r.name == "rackguard.losswatch"]
    assert line.levelno == logging.WARNING
    assert "offsets 35..39 (5 record(s), acks=1)" in line.getMessage()
    assert "leader change 1 -> 2" in line.getMessage()


def test_leadership_moving_again_between_the_readings_reports_nothing_yet() -> None:
    rig = Rig()
    rig.view(leader=1, isr=(1, 4), epoch=3)
    rig.ack(1, 0, 100)
    rig.view(leader=2, isr=(2,), epoch=4)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=50, high_watermark=50)
    rig.rounds(1)
    # the old leader is back (re-elected with its log) before the second reading
    rig.view(leader=1, isr=(1, 2), epoch=5)
    rig.leaders.logs[(T, 0)] = LeaderLog(1, 5, epoch_start=100, high_watermark=100)
    rig.rounds(3)
    assert rig.lost() == 0 and not rig.watch.pending


def test_a_stale_view_epoch_gets_an_error_and_no_verdict() -> None:
    rig = Rig()
    rig.view(leader=1, isr=(1, 4), epoch=3)
    rig.ack(1, 0, 100)
    rig.view(leader=2, isr=(2,), epoch=4)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 6, epoch_start=50, high_watermark=50)  # view behind
    rig.rounds(4)
    assert rig.lost() == 0 and rig.watch.pending  # still waiting for a stable reading
    rig.view(leader=2, isr=(2,), epoch=6)
    rig.rounds(2)
    assert rig.lost() == 50


def test_the_new_leaders_own_acknowledgements_are_never_judged() -> None:
    """Answers of the new leader can arrive before the view shows it leads: they are in
    its log, whatever offsets they have."""
    rig = Rig()
    rig.view(leader=1, isr=(1, 4), epoch=3)
    rig.ack(1, 0, 100)
    rig.ack(2, 60, 40)  # the new leader's first writes (offsets 60..99 reused)
    rig.view(leader=2, isr=(2,), epoch=4)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=60, high_watermark=100)
    rig.rounds(2)
    assert rig.lost() == 40  # 60..99 of leader 1's writes, not leader 2's


def test_a_broker_without_offset_for_leader_epoch_never_reports() -> None:
    rig = Rig()
    rig.view(leader=1, isr=(1, 4), epoch=3)
    rig.ack(1, 0, 100)
    rig.view(leader=2, isr=(2,), epoch=4)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=50, high_watermark=50)
    rig.leaders.no_epoch_api = True
    rig.rounds(4)
    assert rig.lost() == 0


def test_failed_answers_and_produce_errors_are_not_acknowledgements() -> None:
    rig = Rig()
    rig.view(leader=1, isr=(1, 4), epoch=3)
    rig.ack(1, 0, 100)
    rig.ack(1, 100, 50, error=19)  # NOT_ENOUGH_REPLICAS: not acknowledged
    rig.view(leader=2, isr=(2,), epoch=4)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=100, high_watermark=100)
    rig.rounds(2)
    assert rig.lost() == 0
    reader = rig.watch.expect(ClientInfo("p", "node-1"),
                              memoryview(kp_request(9, [(T, [(0, make_batch(1))])])), -1)
    assert reader is not None
    reader(memoryview(b"\x00\x00\x00\x02\x00\x00"), 9)  # malformed: swallowed, counted
    assert rig.watch.failures == 1


def test_periodic_check_finds_a_loss_the_view_changes_did_not_show() -> None:
    rig = Rig(check_interval_s=60.0)
    rig.view(leader=2, isr=(2,), epoch=4)
    rig.ack(1, 0, 100)  # a late answer of the old leader, after the view showed the change
    rig.watch.tick()
    assert not rig.watch.pending  # not due yet
    rig.clock.t += 61
    rig.watch.tick()
    assert rig.watch.pending
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=90, high_watermark=210)
    rig.rounds(2)
    assert rig.lost() == 10


def test_periodic_check_off() -> None:
    rig = Rig(check_interval_s=0.0)
    rig.view(leader=2, isr=(2,), epoch=4)
    rig.ack(1, 0, 100)
    rig.clock.t += 3600
    rig.watch.tick()
    assert not rig.watch.pending


def test_idle_partitions_expire_but_not_while_checked() -> None:
    rig = Rig(check_interval_s=0.0)
    rig.watch.state.idle_s = 100.0
    rig.view(leader=1, isr=(1, 4), epoch=3)
    rig.ack(1, 0, 100)
    rig.view(leader=-1, isr=(4,), epoch=3)
    assert rig.watch.pending
    rig.clock.t += 500
    rig.watch.tick()
    assert len(rig.watch.state) == 1  # leaderless and pending: kept
    rig.watch.pending.clear()
    rig.clock.t += 20
    rig.watch.tick()
    assert len(rig.watch.state) == 1  # looked for at most every 60 s
    rig.clock.t += 60
    rig.watch.tick()
    assert len(rig.watch.state) == 0
    assert rig.registry.get_sample_value("rackguard_loss_watch_tracked_partitions") == 0


def test_writers_by_topic_name_and_by_topic_id_share_one_entry() -> None:
    """The Java client names topics by id (Produce v13), librdkafka by name: their
    acknowledgements of one partition are one entry, so a loss is reported once."""
    rig = Rig()
    tid = bytes(range(16))
    rig.store.apply_metadata(snap([topic(T, [part(0, (1, 4), (1, 4, 2), 1, epoch=3)],
                                         topic_id=tid)], SIX), full=True)
    for n, (version, key) in enumerate(((13, tid), (9, T), (13, tid))):
        reader = rig.watch.expect(ClientInfo("p", "node-1"), memoryview(
            kp_request(version, [(key, [(0, make_batch(10))])], client_id=f"c{n}")), -1)
        assert reader is not None
        reader(memoryview(kp_response(version, [(key, [{"index": 0, "error_code": 0,
                                                        "base_offset": 10 * n}])])), version)
    assert len(rig.watch.state) == 1
    rig.store.apply_metadata(snap([topic(T, [part(0, (2,), (1, 4, 2), 2, epoch=4)],
                                         topic_id=tid)], SIX), full=True)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=5, high_watermark=5)
    rig.rounds(2)
    assert rig.lost() == 25 and rig.partitions_with_loss() == 1


def test_topic_ids_are_resolved_for_the_report() -> None:
    rig = Rig()
    tid = bytes(range(16))
    rig.store.apply_metadata(snap([topic(T, [part(0, (1, 4), (1, 4, 2), 1, epoch=3)],
                                         topic_id=tid)], SIX), full=True)
    frame = kp_request(13, [(tid, [(0, make_batch(20))])])
    reader = rig.watch.expect(ClientInfo("p", "node-1"), memoryview(frame), -1)
    assert reader is not None
    reader(memoryview(kp_response(13, [(tid, [{"index": 0, "error_code": 0,
                                              "base_offset": 0}])])), 13)
    rig.store.apply_metadata(snap([topic(T, [part(0, (2,), (1, 4, 2), 2, epoch=4)],
                                         topic_id=tid)], SIX), full=True)
    rig.leaders.logs[(T, 0)] = LeaderLog(2, 4, epoch_start=5, high_watermark=5)
    rig.rounds(2)
    assert rig.lost() == 15


def test_an_idle_watch_sleeps_until_a_produce_and_its_clock_is_fresh_then() -> None:
    """Nothing tracked: the loop neither ticks nor reads the clock (an idle sidecar wakes
    for nothing); the first produce after the quiet spell moves the coarse clock at once,
    so its entry is not taken for an idle one, and the loop ticks while it is tracked."""
    rig = Rig()
    rig.view(leader=1, isr=(1, 4, 2, 5, 3), epoch=3)

    async def scenario() -> None:
        ticks: list[float] = []
        tick = rig.watch.tick
        rig.watch.tick = lambda: (ticks.append(rig.clock.t), tick())[1]  # type: ignore
        runner = asyncio.ensure_future(rig.watch.run())
        await asyncio.sleep(1.5)  # more than a tick (1 s) of real time, nothing tracked
        assert ticks == [] and rig.watch._dormant
        rig.clock.t += 7200.0  # two hours pass; the idle bound is one
        rig.ack(1, 0, 10)
        assert rig.watch.now == rig.clock.t  # moved by the produce, not by a tick
        await asyncio.sleep(0)
        assert len(ticks) >= 1 and len(rig.watch.state) == 1  # not expired as idle
        assert not rig.watch._dormant  # an entry is tracked: it ticks again
        runner.cancel()

    asyncio.run(scenario())


def test_a_partition_whose_records_cannot_be_read_is_not_watched_the_others_are() -> None:
    """The counts come from one read of the request's batch headers (partition_rows): a
    record set that cannot be read counts -1 and is left to the broker, which refuses
    it; the request's other partitions are watched."""
    rig = Rig()
    rig.store.apply_metadata(snap([topic(T, [part(i, (1, 4), (1, 4, 2), 1, epoch=3)
                                             for i in range(3)])], SIX), full=True)
    frame = kp_request(9, [(T, [(0, make_batch(10)), (1, b"\xff" * 70),
                                (2, make_batch(5))])])
    reader = rig.watch.expect(ClientInfo("p", "node-1"), memoryview(frame), -1)
    assert reader is not None
    reader(memoryview(kp_response(9, [(T, [
        {"index": 0, "error_code": 0, "base_offset": 0},
        {"index": 1, "error_code": 2, "base_offset": -1},
        {"index": 2, "error_code": 0, "base_offset": 40}])])), 9)
    assert len(rig.watch.state) == 2
