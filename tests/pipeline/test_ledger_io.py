"""pipeline.ledger_io over files the proxy's own ledger wrote (schema 3).

Invariants under test: every partition-write comes back as one row, joined by
sequence number to the view it was decided on (the ISR before a change for a row
decided before it, after for one after), with the same fields as the plain-Python
reference join (tests/unit/ledger/_ledger_lines.py); a file still being written (an
Arrow stream, its last batch torn by a crash) is read up to its last complete batch;
snapshot rows are one per partition per tick, from the view in force at the tick.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.ledger_io import read_ledger
from proxy.ledger.files import StreamFiles
from proxy.ledger.recorder import DecisionLedger
from proxy.relay.actions import Forward
from tests.unit._views import part, snap, topic
from tests.unit.enforce.test_enforcement_hook import CLUSTER, IDS, TOPICS, Playbook, produce
from tests.unit.ledger._ledger_lines import partition_rows
from tests.unit.ledger.test_ledger import answer, ledger_for

pytestmark = pytest.mark.spark

FIELDS = ("ts", "instance", "req", "client_id", "client_addr", "topic", "partition", "leader",
          "isr", "isr_racks", "min_isr", "decision", "reason", "wire_error", "broker_error",
          "base_offset", "records", "bytes", "latency_ms")


def traffic(tmp_path: Path) -> tuple[DecisionLedger, Playbook]:
    """Requests before and after audit-1's ISR grows to two racks; a tick at each."""
    play = Playbook()
    ledger, _ = ledger_for(play, tmp_path, snapshot_interval_s=30.0)
    play(produce(9, [("audit", [0, 1]), ("orders", [1])]), 9)  # all refused
    action = play(produce(9, [("orders", [0, 1]), ("payments", [0])]), 9)
    assert isinstance(action, Forward) and action.transform is not None
    action.transform(memoryview(answer(9, {"orders": [(0, 0, 10)], "payments": [(0, 0, 3)]})),
                     9)
    ledger.flush()
    play.clock.t += 31
    topics = [*TOPICS]
    topics[1] = topic("audit", [part(0, (4, 1)), part(1, (2, 3))], IDS["audit"])
    play.store.apply_metadata(snap(topics, brokers=CLUSTER), full=True)
    action = play(produce(9, [("audit", [0, 1])]), 9)  # audit-1 passes now
    assert isinstance(action, Forward) and action.transform is not None
    action.transform(memoryview(answer(9, {"audit": [(1, 0, 77)]})), 9)
    ledger.flush()
    return ledger, play


def test_rows_equal_the_reference_join(spark: Any, tmp_path: Path) -> None:
    ledger, _ = traffic(tmp_path)
    ledger.stop()
    expected = sorted(tuple(r[f] for f in FIELDS) for r in partition_rows(tmp_path))
    read = read_ledger(spark, [tmp_path])
    got = sorted(tuple(r[f] for f in FIELDS) for r in read.decisions.collect())
    assert got == expected and len(got) == 8
    by = {(r["req"], r["topic"], r["partition"]): r for r in read.decisions.collect()}
    assert by[(1, "audit", 1)]["isr_racks"] == ["rack-b"]  # before the change
    assert by[(3, "audit", 1)]["isr_racks"] == ["rack-b", "rack-c"]  # after it
    assert by[(3, "audit", 1)]["decision"] == "forwarded"
    assert by[(3, "audit", 1)]["base_offset"] == 77
    assert by[(3, "audit", 0)]["decision"] == "rejected"
    assert by[(3, "audit", 0)]["wire_error"] == 19
    assert {r["required_racks"] for r in by.values()} == {2}
    # three ticks (start, +31 s, stop), each a row per partition of the view then: 7 each
    snaps = read.snapshots.collect()
    assert len(snaps) == 21
    audit1 = sorted((r["ts"], r["isr_racks"], r["replica_racks"]) for r in snaps
                    if (r["topic"], r["partition"]) == ("audit", 1))
    assert [r[1] for r in audit1] == [["rack-b"], ["rack-b", "rack-c"], ["rack-b", "rack-c"]]
    assert audit1[0][2] == ["rack-a", "rack-b", "rack-c"]


def test_an_open_stream_with_a_torn_tail_is_read_to_its_last_whole_batch(
        spark: Any, tmp_path: Path) -> None:
    ledger, play = traffic(tmp_path)
    files = ledger._decisions
    assert isinstance(files, StreamFiles) and files.path is not None
    stream = files.path
    assert stream.suffix == ".arrows"  # two batches so far, the file still open
    whole = stream.read_bytes()
    play(produce(9, [("audit", [0])]), 9)  # a third batch...
    ledger.flush()
    grown = stream.read_bytes()
    assert len(grown) > len(whole)
    torn = tmp_path / "torn"
    torn.mkdir()
    for p in tmp_path.glob("snapshots-*"):
        (torn / p.name).write_bytes(p.read_bytes())
    # ...cut in the middle, as a kill -9 during a write would leave it
    (torn / stream.name).write_bytes(grown[:len(whole) + (len(grown) - len(whole)) // 2])
    rows = read_ledger(spark, [torn]).decisions.collect()
    assert sorted({r["req"] for r in rows}) == [1, 2, 3]
    assert len(rows) == 8
