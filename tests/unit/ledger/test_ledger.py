"""proxy.ledger.recorder: rows from real decisions, the bounded queue, rotation,
snapshots.

Invariants under test: one row per partition of every rack-checked acks=all
produce, with the decision, the view it was made on, the record count and
bytes of that partition's record set, and (for forwarded partitions) the
broker's code, base offset and the latency, read from the broker's response
before the proxy's own transform runs on it, which still gets the same frame;
a full queue drops and counts rows instead of blocking; files rotate by size
and by age; the writer thread writes snapshots of the view; the proxy's
modules never import pipeline/ or pyspark.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from benchmarks.produce_frames import kp_response
from protocol.headers import parse_request_header
from proxy.enforce.enforcement import RackEnforcer
from proxy.enforce.metrics import EnforcementMetrics
from proxy.enforce.policy import RackRule
from proxy.ledger.files import RotatingJsonl
from proxy.ledger.recorder import OBSERVED, REJECTED, DecisionLedger, LedgerConfig
from proxy.relay.actions import Forward, Reply
from tests.unit.enforce.test_enforcement_hook import (
    BATCHES,
    CLIENT,
    CORR,
    DEDICATED,
    Playbook,
    key_of,
    produce,
)
from tests.unit.ledger._ledger_lines import partition_rows


class WallClock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def ledger_for(play: Playbook, tmp_path: Path, **config: Any) -> tuple[DecisionLedger, Any]:
    """Give the playbook's enforcer a ledger; returns it and its registry."""
    registry = CollectorRegistry()
    ledger = DecisionLedger(
        LedgerConfig(tmp_path, "proxy-a", **config), registry, play.clock, WallClock(),
        lambda: play.store.view, lambda: play.settings.rule)
    play.enforcer = RackEnforcer(play.settings, play.store, play.refresh, play.transform,
                                 EnforcementMetrics(CollectorRegistry(), play.clock),
                                 play.clock, ledger)
    return ledger, registry


def rows_in(paths: list[Path]) -> list[dict[str, Any]]:
    return [row for p in paths for row in partition_rows(p.read_text())]


def written(ledger: DecisionLedger) -> dict[tuple[str, int], dict[str, Any]]:
    ledger.flush()
    return {(r["topic"], r["partition"]): r for r in rows_in(ledger.decision_files)}


@pytest.mark.parametrize("version", [3, 9, 13])
def test_forwarded_rows_carry_the_brokers_answer(tmp_path: Path, version: int) -> None:
    play = Playbook()
    ledger, _ = ledger_for(play, tmp_path)
    frame = produce(version, [("orders", [0, 2]), ("payments", [0])])
    action = play(frame, version)
    assert isinstance(action, Forward) and action.transform is not None
    assert written(ledger) == {}  # nothing until the broker answers
    play.clock.t += 0.25
    upstream = kp_response(version, [
        (key_of("orders", version), [{"index": 0, "error_code": 0, "base_offset": 100},
                                     {"index": 2, "error_code": 0, "base_offset": 200}]),
        (key_of("payments", version), [{"index": 0, "error_code": 6, "base_offset": -1}]),
    ], correlation_id=CORR)
    out = action.transform(memoryview(upstream), version)
    # the proxy's own transform still ran, on the broker's frame
    assert play.transform_calls == [(upstream, version)]
    assert bytes(out) == upstream  # type: ignore[arg-type]
    rows = written(ledger)
    assert set(rows) == {("orders", 0), ("orders", 2), ("payments", 0)}
    o0 = rows[("orders", 0)]
    client_id = parse_request_header(memoryview(frame)).client_id
    assert o0["client_id"] == client_id and o0["client_addr"] == CLIENT.peer
    assert o0["instance"] == "proxy-a" and o0["kind"] == "produce" and o0["v"] == 2
    assert o0["ts"] == 1_700_000_000.0
    assert (o0["leader"], o0["isr"], o0["isr_racks"]) == (1, [1, 2], ["rack-a", "rack-b"])
    assert (o0["required_racks"], o0["decision"], o0["reason"]) == (2, "forwarded", "")
    assert (o0["wire_error"], o0["broker_error"], o0["base_offset"]) == (0, 0, 100)
    assert o0["records"] == 1 and o0["bytes"] == len(BATCHES[("orders", 0)])
    assert o0["latency_ms"] == pytest.approx(250.0)
    assert rows[("orders", 2)]["records"] == 3  # make_batch(1 + index)
    assert rows[("orders", 2)]["base_offset"] == 200
    assert (rows[("payments", 0)]["broker_error"], rows[("payments", 0)]["base_offset"]) == (
        6, -1)
    assert len({r["req"] for r in rows.values()}) == 1


@pytest.mark.parametrize("dedicated", [None, DEDICATED])
def test_mixed_request_rejected_rows_at_once_forwarded_rows_on_answer(
    tmp_path: Path, dedicated: int | None
) -> None:
    play = Playbook(dedicated_code=dedicated)
    ledger, _ = ledger_for(play, tmp_path)
    action = play(produce(9, [("orders", [0, 1]), ("audit", [0])]), 9)
    assert isinstance(action, Forward) and action.transform is not None
    early = written(ledger)
    assert set(early) == {("orders", 1), ("audit", 0)}
    code = 19 if dedicated is None else DEDICATED
    for row in early.values():
        assert (row["decision"], row["reason"]) == (REJECTED, "NOT_ENOUGH_RACKS")
        assert (row["wire_error"], row["broker_error"], row["base_offset"]) == (code, None, None)
        assert row["latency_ms"] is None
    assert early[("orders", 1)]["isr_racks"] == ["rack-a"]
    upstream = kp_response(9, [("orders", [{"index": 0, "error_code": 0, "base_offset": 7}])],
                           correlation_id=CORR)
    action.transform(memoryview(upstream), 9)
    rows = written(ledger)
    assert rows[("orders", 0)]["decision"] == "forwarded"
    assert rows[("orders", 0)]["base_offset"] == 7
    assert len(rows) == 3


def test_all_rejected_writes_rows_and_replies(tmp_path: Path) -> None:
    play = Playbook()
    ledger, _ = ledger_for(play, tmp_path)
    assert isinstance(play(produce(12, [("audit", [0, 1])]), 12), Reply)
    rows = written(ledger)
    assert [r["decision"] for r in rows.values()] == [REJECTED, REJECTED]
    assert rows[("audit", 1)]["isr"] == [2]


def test_observe_mode_records_would_reject_with_the_brokers_answer(tmp_path: Path) -> None:
    play = Playbook(observe=True)
    ledger, _ = ledger_for(play, tmp_path)
    action = play(produce(9, [("orders", [0, 1])]), 9)
    assert isinstance(action, Forward) and action.transform is not None
    assert written(ledger) == {}
    action.transform(memoryview(kp_response(9, [("orders", [
        {"index": 0, "error_code": 0, "base_offset": 5},
        {"index": 1, "error_code": 0, "base_offset": 9}])], correlation_id=CORR)), 9)
    rows = written(ledger)
    assert rows[("orders", 1)]["decision"] == OBSERVED
    assert rows[("orders", 1)]["reason"] == "NOT_ENOUGH_RACKS"
    assert (rows[("orders", 1)]["wire_error"], rows[("orders", 1)]["base_offset"]) == (0, 9)
    assert rows[("orders", 0)]["decision"] == "forwarded"


def test_acks_1_and_disabled_rule_write_nothing(tmp_path: Path) -> None:
    play = Playbook()
    ledger, _ = ledger_for(play, tmp_path)
    action = play(produce(9, [("orders", [1])], acks=1), 9)
    assert isinstance(action, Forward) and action.transform == play.transform
    play1 = Playbook(default_min_racks=1)
    ledger1, _ = ledger_for(play1, tmp_path / "one")
    play1(produce(9, [("orders", [1])]), 9)
    assert written(ledger) == {} and written(ledger1) == {}


def test_unparsable_broker_answer_is_counted_and_still_handed_on(tmp_path: Path) -> None:
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path)
    action = play(produce(9, [("orders", [0])]), 9)
    assert isinstance(action, Forward) and action.transform is not None
    garbage = b"\x00\x00\x00\x06\x00\x00\x10\x92\xff\xff"
    assert action.transform(memoryview(garbage), 9) == memoryview(garbage)
    assert registry.get_sample_value("rackguard_ledger_response_parse_errors_total") == 0
    row = written(ledger)[("orders", 0)]  # parsed by the writer, not on the loop
    assert registry.get_sample_value("rackguard_ledger_response_parse_errors_total") == 1
    assert (row["broker_error"], row["base_offset"]) == (None, None)


def test_full_queue_drops_and_counts_never_blocks(tmp_path: Path) -> None:
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path, queue_size=5)
    frame = produce(12, [("audit", [0, 1])])  # both partitions rejected: queued at once
    for _ in range(4):
        assert isinstance(play(frame, 12), Reply)  # the reply never waits for the ledger
    # 2 + 2 rows fit in 5; the next two requests' rows do not
    assert registry.get_sample_value("rackguard_ledger_rows_dropped_total",
                                     {"reason": "queue_full"}) == 4
    assert registry.get_sample_value("rackguard_ledger_queue_depth") == 4
    assert ledger.flush() == 4
    assert registry.get_sample_value("rackguard_ledger_rows_written_total") == 4
    assert registry.get_sample_value("rackguard_ledger_queue_depth") == 0
    play(frame, 12)  # room again
    assert ledger.flush() == 2


def test_queue_is_bounded_by_the_bytes_it_holds(tmp_path: Path) -> None:
    frame = produce(12, [("audit", [0, 1])])
    play, probe_play = Playbook(), Playbook()
    probe, _ = ledger_for(probe_play, tmp_path / "probe")
    probe_play(frame, 12)
    one = probe.queued_bytes  # one request's rows (encoded text, or the frames it holds)
    assert one > 0
    # a request is queued while the queue holds at most queue_bytes: 3 of 5 here
    ledger, registry = ledger_for(play, tmp_path, queue_bytes=one * 5 // 2)
    for _ in range(5):
        play(frame, 12)
    assert registry.get_sample_value("rackguard_ledger_rows_dropped_total",
                                     {"reason": "queue_full"}) == 4
    assert ledger.flush() == 6


def test_rotation_by_size_and_by_age(tmp_path: Path) -> None:
    wall = WallClock()
    writer = RotatingJsonl(tmp_path, "decisions", "proxy/a b", 100, 60.0, wall)
    line = b"x" * 59 + b"\n"  # 60 bytes
    writer.write([line])
    writer.write([line])  # 60 < 100: same file
    writer.write([line])  # 120 >= 100: new file
    assert len(writer.paths) == 2
    wall.t += 61
    writer.write([line])  # too old: new file
    writer.close()
    assert len(writer.paths) == 3
    assert [p.stat().st_size for p in writer.paths] == [120, 60, 60]
    assert all(p.name.startswith("decisions-proxy_a_b-") for p in writer.paths)
    assert len(set(writer.paths)) == 3


def test_writer_thread_writes_rows_and_snapshots(tmp_path: Path) -> None:
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path, flush_interval_s=0.01,
                                  snapshot_interval_s=3600)
    ledger.start()
    play(produce(9, [("audit", [0])]), 9)
    deadline = time.monotonic() + 5
    while not registry.get_sample_value("rackguard_ledger_snapshots_total"):
        assert time.monotonic() < deadline, "no snapshot at start"
        time.sleep(0.01)
    ledger.seal()  # as the app does before stop: no event loop here to seal by timer
    ledger.stop()
    assert [r["decision"] for r in rows_in(ledger.decision_files)] == [REJECTED]
    snaps = [json.loads(line) for p in ledger.snapshot_files for line in p.read_text().splitlines()]
    # one at start, one at stop
    assert registry.get_sample_value("rackguard_ledger_snapshots_total") == 2
    first = [r for r in snaps if r["snapshot"] == 1]
    brokers = {r["node_id"]: r["rack"] for r in first if r["kind"] == "broker"}
    assert brokers == {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a"}
    parts = {(r["topic"], r["partition"]): r for r in first if r["kind"] == "partition"}
    assert len(parts) == 7
    o1 = parts[("orders", 1)]
    assert (o1["isr"], o1["isr_racks"], o1["required_racks"]) == ([1, 4], ["rack-a"], 2)
    assert o1["replicas"] == [1, 2, 3] and o1["replica_racks"] == ["rack-a", "rack-b", "rack-c"]
    assert o1["interval_s"] == 3600


def test_required_one_topic_still_records_its_isr_racks(tmp_path: Path) -> None:
    play = Playbook()
    play.settings = type(play.settings)(
        rule=RackRule(default_min_racks=1, topic_min_racks={"audit": 2}),
        dedicated_code=None, observe=False, unknown_wait_s=0.05)
    ledger, _ = ledger_for(play, tmp_path)
    action = play(produce(9, [("orders", [1])]), 9)
    assert isinstance(action, Forward)
    assert action.transform is not None
    action.transform(memoryview(kp_response(9, [("orders", [
        {"index": 1, "error_code": 0, "base_offset": 1}])], correlation_id=CORR)), 9)
    row = written(ledger)[("orders", 1)]
    assert (row["required_racks"], row["isr_racks"]) == (1, ["rack-a"])


def test_an_encoder_failure_drops_that_requests_rows_not_the_data_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug while encoding (here: the row fragment cannot be made for one topic) never
    reaches the response path or stops the writer: the rows are retried in Python on
    the writer, dropped there and counted; other requests' rows are written."""
    import proxy.ledger.rows as ledger_rows

    real = ledger_rows._context

    def broken(d: Any, *args: Any) -> Any:
        if d.topic == "payments":
            raise RuntimeError("planted encoder bug")
        return real(d, *args)

    monkeypatch.setattr(ledger_rows, "_context", broken)
    play = Playbook()
    ledger, registry = ledger_for(play, tmp_path)
    for topic_name in ("payments", "orders"):
        action = play(produce(9, [(topic_name, [0])]), 9)
        assert isinstance(action, Forward) and action.transform is not None
        upstream = kp_response(9, [(topic_name, [{"index": 0, "error_code": 0,
                                                  "base_offset": 7}])], correlation_id=CORR)
        out = action.transform(memoryview(upstream), 9)
        assert bytes(out) == upstream  # type: ignore[arg-type]
    assert set(written(ledger)) == {("orders", 0)}
    assert registry.get_sample_value("rackguard_ledger_rows_dropped_total",
                                     {"reason": "encode_error"}) == 1
