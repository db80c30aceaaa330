"""proxy.ledger.recorder: a record per request, the view and rule by sequence number.

Invariants under test: every partition of a rack-checked acks=all produce comes back
(joined to the view it was decided on) with its decision, record count and bytes, and
for forwarded partitions the broker's code, base offset and the latency, read from the
broker's response before the proxy's own transform runs on it, which still gets the
same frame; the view is written when it changes, topic by topic, never per request; a
full queue drops and counts rows instead of blocking; nothing the ledger does (a
failing clock, a failing file) touches the client's request: rows are dropped and
counted in rackguard_ledger_dropped_rows_total{reason}.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from prometheus_client import CollectorRegistry

from benchmarks.produce_frames import kp_response
from pipeline.answers import fill_answers
from protocol.headers import parse_request_header
from proxy.enforce.enforcement import RackEnforcer
from proxy.enforce.metrics import EnforcementMetrics
from proxy.enforce.policy import RackRule
from proxy.ledger.files import read_stream
from proxy.ledger.recorder import DecisionLedger, LedgerConfig
from proxy.ledger.schema import OBSERVED, REJECTED
from proxy.ledger.versions import Versions
from proxy.losswatch.report import ConfirmedLoss, LossReporter, ledger_sink
from proxy.losswatch.rule import LostRange
from proxy.losswatch.state import ACKS_ALL
from proxy.relay.actions import Forward, Reply
from tests.unit._views import part, snap, topic
from tests.unit.enforce.test_enforcement_hook import (
    BATCHES,
    CLIENT,
    CLUSTER,
    CORR,
    DEDICATED,
    IDS,
    TOPICS,
    Playbook,
    key_of,
    produce,
)
from tests.unit.ledger._ledger_lines import partition_rows, table


class WallClock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def ledger_for(play: Playbook, tmp_path: Path, wall: Any = None, clock: Any = None,
               **config: Any) -> tuple[DecisionLedger, CollectorRegistry]:
    """Give the playbook's enforcer a ledger; returns it and its registry."""
    registry = CollectorRegistry()
    ledger = DecisionLedger(
        LedgerConfig(tmp_path, "proxy-a", **config), registry, clock or play.clock,
        wall or WallClock(), lambda: play.store.view, lambda: play.settings.rule,
        observe=play.settings.observe)
    play.enforcer = RackEnforcer(play.settings, play.store, play.refresh, play.transform,
                                 EnforcementMetrics(CollectorRegistry(), play.clock),
                                 play.clock, ledger)
    return ledger, registry


def written(ledger: DecisionLedger) -> dict[tuple[str, int], dict[str, Any]]:
    """Everything queued, written and closed into Parquet, read back joined."""
    ledger.flush()
    ledger.stop()
    return {(r["topic"], r["partition"]): r for r in partition_rows(ledger.config.directory)}


def dropped(registry: CollectorRegistry, reason: str) -> float:
    return registry.get_sample_value("rackguard_ledger_dropped_rows_total",
                                     {"reason": reason}) or 0.0


def answer(version: int, parts: dict[str, list[tuple[int, int, int]]]) -> bytes:
    return kp_response(version, [
        (key_of(name, version), [{"index": i, "error_code": e, "base_offset": o}
                                 for i, e, o in ps]) for name, ps in parts.items()],
        correlation_id=CORR)


@pytest.mark.parametrize("version", [3, 9, 13])
def test_forwarded_rows_carry_the_brokers_answer(tmp_path: Path, version: int) -> None:
    play = Playbook()
    ledger, _ = ledger_for(play, tmp_path)
    frame = produce(version, [("orders", [0, 2]), ("payments", [0])])
    action = play(frame, version)
    assert isinstance(action, Forward) and action.transform is not None
    assert ledger.flush() == 0  # nothing until the broker answers
    play.clock.t += 0.25
    upstream = answer(version, {"orders": [(0, 0, 100), (2, 0, 200)],
                                "payments": [(0, 6, -1)]})
    out = action.transform(memoryview(upstream), version)
    # the proxy's own transform still ran, on the broker's frame
    assert play.transform_calls == [(upstream, version)]
    assert bytes(out) == upstream  # type: ignore[arg-type]
    rows = written(ledger)
    assert set(rows) == {("orders", 0), ("orders", 2), ("payments", 0)}
    o0 = rows[("orders", 0)]
    client_id = parse_request_header(memoryview(frame)).client_id
    assert o0["client_id"] == client_id and o0["client_addr"] == CLIENT.peer
    assert o0["instance"] == "proxy-a" and o0["ts"] == 1_700_000_000.0
    # from the snapshot the row's view sequence number points at
    assert (o0["leader"], o0["isr"], o0["isr_racks"]) == (1, [1, 2], ["rack-a", "rack-b"])
    assert (o0["decision"], o0["reason"]) == ("forwarded", "")
    assert (o0["wire_error"], o0["broker_error"], o0["base_offset"]) == (0, 0, 100)
    assert o0["records"] == 1 and o0["bytes"] == len(BATCHES[("orders", 0)])
    assert o0["latency_ms"] == pytest.approx(250.0)
    assert o0["rule"]["default_min_racks"] == 2
    assert rows[("orders", 2)]["records"] == 3  # make_batch(1 + index)
    assert rows[("orders", 2)]["base_offset"] == 200
    assert (rows[("payments", 0)]["broker_error"], rows[("payments", 0)]["base_offset"]) == (
        6, -1)
    assert len({r["req"] for r in rows.values()}) == 1


@pytest.mark.parametrize("dedicated", [None, DEDICATED])
def test_a_mixed_request_is_one_record(tmp_path: Path, dedicated: int | None) -> None:
    play = Playbook(dedicated_code=dedicated)
    ledger, _ = ledger_for(play, tmp_path)
    action = play(produce(9, [("orders", [0, 1]), ("audit", [1])]), 9)
    assert isinstance(action, Forward) and action.transform is not None
    action.transform(memoryview(answer(9, {"orders": [(0, 0, 5)]})), 9)
    ledger.flush()
    assert len(table(ledger.decision_files)) == 1  # one record for the whole request
    rows = written(ledger)
    code = dedicated if dedicated is not None else 19
    assert rows[("orders", 0)]["decision"] == "forwarded"
    assert rows[("orders", 0)]["base_offset"] == 5
    for key in (("orders", 1), ("audit", 1)):
        r = rows[key]
        assert (r["decision"], r["reason"], r["wire_error"]) == (REJECTED, "NOT_ENOUGH_RACKS",
                                                                 code)
        assert (r["broker_error"], r["base_offset"]) == (None, None)
    assert rows[("orders", 1)]["isr_racks"] == ["rack-a"]


def test_all_rejected_is_written_at_once_and_replied(tmp_path: Path) -> None:
    play = Playbook()
    ledger, _ = ledger_for(play, tmp_path)
    assert isinstance(play(produce(9, [("audit", [0, 1])]), 9), Reply)
    rows = written(ledger)
    assert {r["decision"] for r in rows.values()} == {REJECTED}
    assert {r["latency_ms"] for r in rows.values()} == {None}


def test_observe_mode_records_would_reject_with_the_brokers_answer(tmp_path: Path) -> None:
    play = Playbook(observe=True)
    ledger, _ = ledger_for(play, tmp_path)
    action = play(produce(9, [("orders", [0, 1])]), 9)
    assert isinstance(action, Forward) and action.transform is not None
    action.transform(memoryview(answer(9, {"orders": [(0, 0, 1), (1, 0, 2)]})), 9)
    rows = written(ledger)
    assert rows[("orders", 1)]["decision"] == OBSERVED
    assert rows[("orders", 1)]["reason"] == "NOT_ENOUGH_RACKS"
    assert rows[("orders", 1)]["wire_error"] == 0 and rows[("orders", 1)]["base_offset"] == 2
    assert rows[("orders", 0)]["decision"] == "forwarded"
    assert rows[("orders", 0)]["rule"]["observe"] is True


def test_acks_1_and_disabled_rule_write_nothing(tmp_path: Path) -> None:
    play = Playbook()
    ledger, _ = ledger_for(play, tmp_path)
    play(produce(9, [("orders", [0])], acks=1), 9)
    assert written(ledger) == {}
    off = Playbook(default_min_racks=1)
    ledger2, _ = ledger_for(off, tmp_path / "off")
    off(produce(9, [("orders", [0])]), 9)
    assert written(ledger2) == {}


def test_unparsable_broker_answer_is_counted_and_still_handed_on(tmp_path: Path) -> None:
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path)
    action = play(produce(9, [("orders", [0])]), 9)
    assert isinstance(action, Forward) and action.transform is not None
    garbage = b"\x00\x00\x00\x06\x00\x00\x10\x92\xff\xff"
    assert action.transform(memoryview(garbage), 9) == memoryview(garbage)
    row = written(ledger)[("orders", 0)]  # kept as bytes, read by the pipeline
    assert (row["broker_error"], row["base_offset"]) == (None, None)
    assert dropped(registry, "record_error") == dropped(registry, "write_error") == 0
    (path,) = ledger.decision_files
    raw = pq.read_table(path) if path.suffix == ".parquet" else read_stream(path)
    assert raw is not None and fill_answers(raw)[1] == 1  # the unreadable answer is counted


def test_full_queue_drops_and_counts_never_blocks(tmp_path: Path) -> None:
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path, queue_size=5)
    frame = produce(12, [("audit", [0, 1])])  # both partitions rejected: queued at once
    for _ in range(4):
        assert isinstance(play(frame, 12), Reply)  # the reply never waits for the ledger
    # 2 + 2 rows fit in 5; the next two requests' rows do not
    assert dropped(registry, "queue_full") == 4
    assert registry.get_sample_value("rackguard_ledger_queue_depth") == 4
    assert ledger.flush() == 4
    assert registry.get_sample_value("rackguard_ledger_rows_written_total") == 4
    assert registry.get_sample_value("rackguard_ledger_queue_depth") == 0
    play(frame, 12)  # room again
    assert ledger.flush() == 2


class Failing:
    """A clock or a file that raises."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __call__(self, *args: Any) -> Any:
        raise self.exc


def test_a_failing_clock_never_touches_the_clients_request(tmp_path: Path) -> None:
    """A wall clock that fails when a request is recorded, and a monotonic clock that fails
    when the answer arrives: the client gets the same actions and frames as without a
    ledger; the rows are dropped and counted."""
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path, wall=Failing(OSError("clock")))
    action = play(produce(9, [("orders", [0])]), 9)
    assert isinstance(action, Forward) and action.transform == play.transform
    assert isinstance(play(produce(9, [("audit", [0, 1])]), 9), Reply)
    assert dropped(registry, "record_error") == 3

    answer_clock_fails = Playbook()
    ledger2, registry2 = ledger_for(answer_clock_fails, tmp_path / "b")
    action = answer_clock_fails(produce(9, [("orders", [0, 2])]), 9)
    assert isinstance(action, Forward) and action.transform is not None
    ledger2.clock = Failing(RuntimeError("clock"))
    upstream = answer(9, {"orders": [(0, 0, 1), (2, 0, 2)]})
    assert bytes(action.transform(memoryview(upstream), 9)) == upstream  # type: ignore[arg-type]
    assert answer_clock_fails.transform_calls == [(upstream, 9)]
    assert dropped(registry2, "record_error") == 2


def test_a_failing_sink_drops_and_counts_and_the_next_write_works(tmp_path: Path,
                                                                 monkeypatch: Any) -> None:
    from proxy.ledger.files import StreamFiles

    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path)
    frame = produce(9, [("audit", [0, 1])])
    real = StreamFiles.write
    monkeypatch.setattr(StreamFiles, "write", Failing(OSError(28, "No space left on device")))
    assert isinstance(play(frame, 9), Reply)
    assert ledger.flush() == 0
    assert dropped(registry, "write_error") == 2
    monkeypatch.setattr(StreamFiles, "write", real)
    assert isinstance(play(frame, 9), Reply)
    assert ledger.flush() == 2
    assert len(written(ledger)) == 2


def test_the_view_is_written_when_it_changes_topic_by_topic(tmp_path: Path) -> None:
    play = Playbook()
    wall = WallClock()
    ledger, registry = ledger_for(play, tmp_path, wall=wall, snapshot_interval_s=30.0)
    for _ in range(50):  # one view: written once, whatever the traffic
        play(produce(9, [("audit", [0])]), 9)
    ledger.flush()
    snaps = table(ledger.snapshot_files)
    kinds = [r["kind"] for r in snaps]
    assert kinds.count("topic") == 3 and kinds.count("brokers") == 1
    assert kinds.count("rule") == 1 and kinds.count("tick") == 1
    # one topic's ISR changes: one topic row more, with the next sequence number
    topics = [*TOPICS]
    topics[1] = topic("audit", [part(0, (4, 1)), part(1, (2, 3))], IDS["audit"])
    play.store.apply_metadata(snap(topics, brokers=CLUSTER), full=True)
    action = play(produce(9, [("audit", [1])]), 9)  # now passes: forwarded
    assert isinstance(action, Forward) and action.transform is not None
    action.transform(memoryview(answer(9, {"audit": [(1, 0, 9)]})), 9)
    play.clock.t += 31  # a tick is due
    ledger.flush()
    snaps = table(ledger.snapshot_files)
    new = [r for r in snaps if r["seq"] == 2 and r["kind"] != "tick"]
    assert [(r["kind"], r["topic"]) for r in new] == [("topic", "audit")]
    assert [r["kind"] for r in snaps].count("tick") == 2
    rows = written(ledger)
    assert rows[("audit", 1)]["view_seq"] == 2 and rows[("audit", 1)]["isr"] == [2, 3]
    assert registry.get_sample_value("rackguard_ledger_snapshot_rows_written_total") == 9


def test_a_refresh_that_changed_nothing_keeps_the_views_number(tmp_path: Path) -> None:
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path, snapshot_interval_s=3600)
    play(produce(9, [("audit", [0])]), 9)
    ledger.flush()
    before = play.store.view
    play.clock.t += 1
    play.store.confirm()  # a poll's answer equal to the last one: the same maps
    assert play.store.view is not before and play.store.view.topics is before.topics
    play(produce(9, [("audit", [0])]), 9)
    ledger.flush()
    assert {r["view_seq"] for r in table(ledger.decision_files)} == {1}
    assert [r["seq"] for r in table(ledger.snapshot_files) if r["kind"] == "topic"] == [1] * 3
    # a refresh that changed a topic is a new view, numbered and written
    topics = [*TOPICS]
    topics[1] = topic("audit", [part(0, (4, 1)), part(1, (2, 3))], IDS["audit"])
    play.store.apply_metadata(snap(topics, brokers=CLUSTER), full=True)
    play(produce(9, [("audit", [0])]), 9)
    ledger.flush()
    assert [r["view_seq"] for r in table(ledger.decision_files)] == [1, 1, 2]


def test_writer_thread_writes_and_closes_files_into_parquet(tmp_path: Path) -> None:
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path, flush_interval_s=0.01,
                                  snapshot_interval_s=3600)
    ledger.start()
    play(produce(9, [("audit", [0])]), 9)
    deadline = time.monotonic() + 10
    while not registry.get_sample_value("rackguard_ledger_rows_written_total"):
        assert time.monotonic() < deadline, "nothing written"
        time.sleep(0.01)
    assert any(p.suffix == ".arrows" for p in ledger.decision_files)  # open, readable
    assert [r["decision"] for r in partition_rows(tmp_path)] == [REJECTED]
    ledger.stop()
    assert {p.suffix for p in ledger.decision_files + ledger.snapshot_files} == {".parquet"}
    rows = partition_rows(tmp_path)
    assert [(r["topic"], r["decision"], r["isr_racks"]) for r in rows] == [
        ("audit", REJECTED, ["rack-a"])]
    assert registry.get_sample_value("rackguard_ledger_bytes") > 0


def test_writer_flushes_early_when_half_the_queue_bound_is_used(tmp_path: Path) -> None:
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path, flush_interval_s=3600, queue_size=8,
                                  snapshot_interval_s=3600)
    ledger.start()
    try:
        deadline = time.monotonic() + 10
        while registry.get_sample_value("rackguard_ledger_snapshot_rows_written_total") is None \
                or not ledger.decision_files and not ledger.snapshot_files:
            assert time.monotonic() < deadline, "the writer did not start"
            time.sleep(0.01)
        for _ in range(3):  # 3 rows: under half the bound, nothing is written
            play(produce(9, [("audit", [0])]), 9)
        time.sleep(0.2)
        assert not registry.get_sample_value("rackguard_ledger_rows_written_total")
        for _ in range(2):  # 5 of 8: the writer is woken, an hour before its interval
            play(produce(9, [("audit", [0])]), 9)
        while registry.get_sample_value("rackguard_ledger_rows_written_total") != 5:
            assert time.monotonic() < deadline, "no early flush"
            time.sleep(0.01)
        assert dropped(registry, "queue_full") == 0
    finally:
        ledger.stop()


def test_the_serving_path_does_not_import_pyarrow() -> None:
    import subprocess
    import sys

    code = ("import sys, proxy.app, proxy.ledger.recorder; "
            "print('pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_required_one_topic_still_records_its_isr(tmp_path: Path) -> None:
    play = Playbook()
    play.settings = type(play.settings)(
        rule=RackRule(default_min_racks=1, topic_min_racks={"audit": 2}),
        dedicated_code=None, observe=False, unknown_wait_s=0.05)
    ledger, _ = ledger_for(play, tmp_path)
    action = play(produce(9, [("orders", [1])]), 9)
    assert isinstance(action, Forward) and action.transform is not None
    action.transform(memoryview(answer(9, {"orders": [(1, 0, 1)]})), 9)
    row = written(ledger)[("orders", 1)]
    assert row["isr_racks"] == ["rack-a"]
    assert row["rule"]["rule_topics"] == ["audit"] and row["rule"]["rule_topic_racks"] == [2]


def test_a_confirmed_loss_is_a_loss_row_of_the_snapshots(tmp_path: Path) -> None:
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path, snapshot_interval_s=3600)
    reporter = LossReporter(CollectorRegistry(), [ledger_sink(ledger.record_loss)])
    loss = ConfirmedLoss("audit", 1, (LostRange(ACKS_ALL, 578, 2377), LostRange(1, 2378, 2380)),
                         leader=4, epoch=7, epoch_start=578,
                         cause="unclean election: leader 4 was not in the last ISR [1, 2]",
                         clients=("java-producer", "rdkafka"))
    reporter.confirmed(("audit", 1), loss)
    ledger.flush()
    [row] = [r for r in table(ledger.snapshot_files) if r["kind"] == "loss"]
    assert (row["topic"], row["partitions"], row["leaders"], row["epoch"]) == ("audit", [1],
                                                                               [4], 7)
    assert list(zip(row["lost_first"], row["lost_last"], row["lost_acks"],
                    strict=True)) == [(578, 2377, "all"), (2378, 2380, "1")]
    assert row["cause"] == loss.cause and row["clients"] == ["java-producer", "rdkafka"]
    assert row["instance"] == "proxy-a" and row["run"] == ledger.run
    ledger.stop()


class _View:
    """What :class:`Versions` reads of a view: its maps (each view its own)."""

    def __init__(self) -> None:
        self.topics: dict[str, Any] = {}
        self.brokers: dict[int, Any] = {}
        self.racks: dict[int, str] = {}


def test_the_loops_numbers_follow_each_new_view_rule_and_mode() -> None:
    versions = Versions()
    old: Any = _View()
    new: Any = _View()
    two, three = RackRule(default_min_racks=2), RackRule(default_min_racks=3)
    assert versions.seqs(old, two, False, None, 0.0) == (1, 1)
    assert versions.seqs(old, two, False, None, 0.0) == (1, 1)
    assert versions.view_seq(new, 1.0) == 2  # the writer's poll numbers a newer view
    assert versions.seqs(old, two, False, None, 0.0) == (1, 1)  # decided on the old one
    assert versions.seqs(new, two, False, None, 0.0) == (2, 1)
    assert versions.seqs(new, three, False, None, 0.0) == (2, 2)
    assert versions.seqs(new, three, True, None, 0.0) == (2, 3)  # the mode is the rule's
    assert versions.seqs(new, three, True, 42, 0.0) == (2, 4)  # and the dedicated code
    assert [(kind, seq) for kind, seq, _, _ in versions.take()] == [
        ("view", 1), ("rule", 1), ("view", 2), ("rule", 2), ("rule", 3), ("rule", 4)]
