"""The verdict sentences and the dump's output path, without Spark.

Invariants under test: a verdict names its numbers (share, bytes, records,
topics, times, racks) and says what to do; a report with nothing at risk says
so; ``dump-offsets`` writes exactly the path it is given or refuses it,
before reading anything, with the reason.
"""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest

from pipeline import verdicts
from pipeline.dump_offsets import DumpPathError, check_out, main, write_rows
from pipeline.labels import human_bytes, human_seconds, percent, value_text
from pipeline.progress import Progress

T = 1_763_944_198.0  # 2025-11-24 00:29:58 UTC


def test_durability_names_share_bytes_records_topics_window_and_rack() -> None:
    facts = verdicts.DurabilityFacts(
        min_racks=2, acked_bytes=26_875_000, acked_records=1_600, acked_writes=1_600,
        topics=2, under_bytes=8_600_000, under_records=500, under_topics=("drill",),
        under_first_ts=T, under_last_ts=T + 8, under_rack_sets=(
            verdicts.RackSet(("rack-a",), 500, 8_600_000),),
        rejections={}, observed_would_reject=0, seconds_under=0.0)
    v = verdicts.durability(facts)
    assert v.findings == (
        "32 % of acknowledged bytes (8.6 MB, 500 records) were acknowledged while their "
        "in-sync replicas spanned fewer than 2 racks, on 1 topic (drill), for 8 s (between "
        "00:29:58 and 00:30:06 UTC).",
        "If rack-a had been lost in that window they were gone.")
    assert v.at_risk and v.advice[0].startswith("Enforce the rule: run rackguard with "
                                                "--min-insync-racks 2")


def test_durability_with_nothing_at_risk_says_so() -> None:
    facts = verdicts.DurabilityFacts(
        min_racks=2, acked_bytes=1_500, acked_records=30, acked_writes=10, topics=1,
        under_bytes=0, under_records=0, under_topics=(), under_first_ts=None,
        under_last_ts=None, under_rack_sets=(), rejections={"NOT_ENOUGH_RACKS": 4},
        observed_would_reject=0, seconds_under=0.0)
    v = verdicts.durability(facts)
    assert v.findings[0] == (
        "All acknowledged bytes (1.5 kB, 30 records, on 1 topic) were acknowledged while their "
        "in-sync replicas spanned at least 2 racks: losing any one rack would have lost none "
        "of them.")
    assert v.findings[1].startswith("The proxy refused 4 partition writes (NOT_ENOUGH_RACKS: 4)")
    assert not v.at_risk
    assert "outage procedure" in v.advice[0]


def test_durability_several_single_racks() -> None:
    facts = verdicts.DurabilityFacts(
        min_racks=2, acked_bytes=100, acked_records=4, acked_writes=4, topics=1,
        under_bytes=60, under_records=3, under_topics=("t",), under_first_ts=T,
        under_last_ts=T, under_rack_sets=(verdicts.RackSet(("rack-a",), 2, 40),
                                          verdicts.RackSet(("rack-b",), 1, 20)),
        rejections={}, observed_would_reject=0, seconds_under=0.0)
    v = verdicts.durability(facts)
    assert v.findings[0].endswith("on 1 topic (t) at 00:29:58 UTC.")
    assert v.findings[1] == ("Each depended on a single rack (rack-a only: 2 records, rack-b "
                             "only: 1 record): losing that rack in that window would have "
                             "lost them.")


def test_audit_loss_names_the_range_the_times_and_the_isr() -> None:
    facts = verdicts.LossFacts(
        topics=("drill",), acked_offsets=2_000, missing_offsets=500, unverifiable=0,
        ranges=(verdicts.MissingRange("drill", 0, 1000, 1499, 500, T, T + 3,
                                      (("rack-a",),)),))
    v = verdicts.audit_loss(facts)
    assert v.findings == (
        "500 acknowledged records are missing from the cluster: topic drill, partition 0, "
        "offsets 1000-1499, acknowledged between 00:29:58 and 00:30:01 UTC while the ISR "
        "spanned rack-a only.",)
    assert v.at_risk and "min.insync.racks=2" in v.advice[1]


def test_audit_loss_many_ranges_and_none_missing() -> None:
    ranges = tuple(verdicts.MissingRange("t", p, 0, 9, 10, T, T, (("a", "b"),))
                   for p in range(5))
    v = verdicts.audit_loss(verdicts.LossFacts(("t",), 100, 50, 2, ranges))
    assert v.findings[0].endswith("; and 2 more ranges (see the table).")
    assert v.findings[0].count("topic t, partition") == 3
    assert v.findings[1] == ("2 acknowledged writes carried no offset in the ledger and could "
                             "not be checked.")
    assert len(v.advice) == 1  # acknowledged on two racks: no rule advice
    ok = verdicts.audit_loss(verdicts.LossFacts(("t",), 100, 0, 0, ()))
    assert ok.findings == ("Every acknowledged record (100 offsets on t) is in the cluster: "
                           "none was lost.",)
    assert not ok.at_risk and ok.advice == ("Nothing to do.",)


def test_whatif_recommends_the_highest_value_that_refused_nothing() -> None:
    rows = [verdicts.WhatIfRow(2, 10, 1000, 0, 0, 0),
            verdicts.WhatIfRow(3, 10, 1000, 4, 400, 8, ("orders",))]
    v = verdicts.whatif(rows)
    assert v.findings == (
        "min.insync.racks=2 would have refused none of the 10 acknowledged writes.",
        "min.insync.racks=3 would have refused 4 of 10 acknowledged writes (40 % of bytes: "
        "400 B, 8 records), on orders.")
    assert v.advice[0].startswith("min.insync.racks=2 can be enforced on this traffic")


def test_placement_verdicts() -> None:
    ok = verdicts.placement(verdicts.PlacementFacts(2, 12, 0, 1, ()))
    assert ok.findings == ("Every partition (12) has replicas on at least 2 racks.",
                           "1 partition had fewer earlier in the ledger.")
    bad = verdicts.placement(verdicts.PlacementFacts(2, 12, 7, 7, ("a-0 (r1)",) * 5))
    assert "(a-0 (r1), a-0 (r1), a-0 (r1), a-0 (r1), a-0 (r1) and 2 more)" in bad.findings[0]
    assert bad.at_risk


def test_labels_and_units() -> None:
    assert (human_bytes(999), human_bytes(8_600_000), human_bytes(2_500_000_000)) == (
        "999 B", "8.6 MB", "2.5 GB")
    assert (human_seconds(8), human_seconds(60), human_seconds(5400)) == ("8 s", "60 s",
                                                                          "1.5 h")
    assert (percent(0.32), percent(0.0123), percent(1.0), percent(0.0)) == (
        "32 %", "1.2 %", "100 %", "0 %")
    assert value_text("acked_bytes", 8_600_000) == "8.6 MB"
    assert value_text("share_bytes_ge_n", 0.5) == "50 %"
    assert value_text("replica_racks", ["a", "b"]) == "a, b"
    assert value_text("rejections_by_reason", {"rejected:X": 2}) == "rejected:X: 2"
    assert value_text("share_bytes_ge_n", None) == "–"


@pytest.mark.parametrize("name", ["dump.csv", "dump", "dump.PARQUET.txt"])
def test_dump_refuses_an_extension_it_cannot_write(name: str) -> None:
    with pytest.raises(DumpPathError, match="name the output .parquet or .jsonl"):
        check_out(Path(name))


def test_dump_refuses_parquet_without_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda n, *a: None if n == "pyarrow" else real(n, *a))
    with pytest.raises(DumpPathError, match="Parquet needs pyarrow"):
        check_out(Path("x.parquet"))


def test_dump_writes_exactly_the_path_given(tmp_path: Path) -> None:
    rows = [("t", 0, 5, 1000, None)]
    jl = write_rows(rows, tmp_path / "out.jsonl")
    assert jl == tmp_path / "out.jsonl"
    assert json.loads(jl.read_text()) == {"topic": "t", "partition": 0, "offset": 5,
                                          "timestamp": 1000, "key_hash": None}
    pq = write_rows(rows, tmp_path / "sub" / "out.parquet")
    assert pq == tmp_path / "sub" / "out.parquet" and pq.read_bytes()[:4] == b"PAR1"


def test_dump_command_refuses_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    # an unreachable bootstrap: the path is refused first, so no connection is tried
    assert main(["--bootstrap", "127.0.0.1:1", "--topic", "t", "--out", "x.csv"]) == 2
    assert "name the output .parquet or .jsonl" in capsys.readouterr().err


class _Stage:
    def __init__(self, stage_id: int, done: int, total: int) -> None:
        self.stageId, self.numCompletedTasks, self.numTasks = stage_id, done, total


class _Tracker:
    def __init__(self, seen: threading.Event) -> None:
        self.seen = seen

    def getActiveStageIds(self) -> list[int]:  # noqa: N802 - Spark's name
        self.seen.set()
        return [7]

    def getStageInfo(self, stage_id: int) -> _Stage:  # noqa: N802 - Spark's name
        return _Stage(stage_id, 3, 8)


class _Spark:
    def __init__(self, seen: threading.Event) -> None:
        self.sparkContext = self
        self._tracker = _Tracker(seen)

    def statusTracker(self) -> _Tracker:  # noqa: N802 - Spark's name
        return self._tracker


def test_progress_says_each_step_and_sparks_running_stage() -> None:
    out = io.StringIO()
    ticks = iter(float(i) for i in range(1000))
    progress = Progress("rackguard report", out, clock=lambda: next(ticks), poll_s=0.001,
                        quiet_s=0)
    seen = threading.Event()
    with progress.step("reading the ledger", _Spark(seen)):
        assert seen.wait(10)
        while "Spark stage" not in out.getvalue():
            seen.clear()
            assert seen.wait(10)
    lines = out.getvalue().splitlines()
    assert lines[0] == "rackguard report: [   1.0 s] reading the ledger ..."
    assert any(line.endswith("reading the ledger: Spark stage 7, 3/8 tasks") for line in lines)


def _under(*sets: tuple[tuple[str, ...], int]) -> verdicts.DurabilityFacts:
    return verdicts.DurabilityFacts(
        min_racks=2, acked_bytes=1000, acked_records=10, acked_writes=10, topics=1,
        under_bytes=100, under_records=sum(n for _, n in sets), under_topics=("t",),
        under_first_ts=T, under_last_ts=T,
        under_rack_sets=tuple(verdicts.RackSet(r, n, 10 * n) for r, n in sets),
        rejections={}, observed_would_reject=0, seconds_under=0.0)


@pytest.mark.parametrize(("sets", "sentences"), [
    # brokers without a rack: the rack named, never a hole
    ([((("",), 3))], ["If the brokers without a rack had been lost in that window they were "
                      "gone."]),
    # one rack
    ([(("rack-a",), 3)], ["If rack-a had been lost in that window they were gone."]),
    # many single racks, one of them the rackless brokers
    ([(("rack-a",), 2), (("",), 1)], [
        "Each depended on a single rack (rack-a only: 2 records, the brokers without a rack "
        "only: 1 record): losing that rack in that window would have lost them."]),
    # no known rack at all (an ISR of brokers the proxy never saw)
    ([((), 4)], ["4 records were acknowledged while no in-sync replica was on a broker the "
                 "proxy knew the rack of: nothing shows where they were."]),
    # one rack, and records with no known rack
    ([(("rack-b",), 1), ((), 2)], [
        "Each depended on a single rack (rack-b only: 1 record): losing that rack in that "
        "window would have lost them.",
        "2 records were acknowledged while no in-sync replica was on a broker the proxy knew "
        "the rack of: nothing shows where they were."]),
])
def test_every_durability_sentence_names_its_racks(
        sets: list[tuple[tuple[str, ...], int]], sentences: list[str]) -> None:
    v = verdicts.durability(_under(*sets))
    assert list(v.findings[1:]) == sentences
    for line in v.findings:
        assert "  " not in line and "()" not in line and '""' not in line


@pytest.mark.parametrize(("racks", "phrase"), [
    ((("",),), "the brokers without a rack only"),
    ((("rack-a",),), "rack-a only"),
    ((("", "rack-a", "rack-b"),), "the brokers without a rack, rack-a and rack-b"),
    (((), ("rack-a",)), "no known rack (an empty ISR) or rack-a only"),
])
def test_loss_ranges_name_their_racks(racks: tuple[tuple[str, ...], ...], phrase: str) -> None:
    facts = verdicts.LossFacts(
        topics=("t",), acked_offsets=10, missing_offsets=2, unverifiable=0,
        ranges=(verdicts.MissingRange("t", 0, 5, 6, 2, T, T, racks),))
    v = verdicts.audit_loss(facts)
    assert v.findings[0].endswith(f"while the ISR spanned {phrase}.")
    assert "  " not in v.findings[0]


@pytest.mark.parametrize(("racks", "cell"), [
    ((), ""), (("",), "no rack"), (("rack-a",), "rack-a"), (("", "rack-a"), "no rack, rack-a")])
def test_placement_names_rackless_replicas(racks: tuple[str, ...], cell: str) -> None:
    assert verdicts.racks_list(racks) == cell
