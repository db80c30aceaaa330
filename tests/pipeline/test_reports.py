"""The four reports on a small hand-written ledger whose answers are worked out below.

Invariants under test: figures per topic and hour and overall match hand
computation (the same figures as when the ledger was JSON lines: each row now
joined by sequence number to the view it was decided on); rows of two proxy
instances with the same request numbers are two requests, not one; an empty
ledger gives zeros, not an error; the written outputs (tables, summary.json,
report.html with an SVG chart) exist.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from pipeline.dump_offsets import write_rows
from pipeline.jobs import run
from pipeline.ledger_io import read_ledger
from pipeline.reports import audit_loss, durability, placement, whatif
from pipeline.session import missing_requirement
from tests.pipeline.ledger_writer import write_ledger as write_files

pytestmark = pytest.mark.spark

T = 1_699_999_200.0  # an hour boundary (UTC)
H0 = str(int(T))  # hours are keyed by epoch seconds, whatever the local time zone
H1 = str(int(T) + 3600)


def prod(inst: str, req: int, ts: float, topic: str, part: int, racks: list[str],
         decision: str, wire: int | None, nbytes: int, records: int = 1,
         base: int | None = None, reason: str = "") -> dict[str, Any]:
    return {"ts": ts, "instance": inst, "req": req,
            "client_id": "c", "client_addr": "127.0.0.1:1", "topic": topic, "partition": part,
            "leader": 1, "isr": list(range(1, len(racks) + 1)), "isr_racks": racks,
            "required_racks": 2, "min_isr": 2, "decision": decision, "reason": reason,
            "wire_error": wire, "broker_error": None if decision == "rejected" else wire,
            "base_offset": base, "records": records, "bytes": nbytes, "latency_ms": 1.0,
            "metadata_age_ms": 5.0}


def snap(inst: str, ts: float, topic: str, part: int, isr_racks: list[str],
         replica_racks: list[str]) -> dict[str, Any]:
    return {"v": 1, "kind": "partition", "ts": ts, "instance": inst, "snapshot": 1,
            "interval_s": 10.0, "topic": topic, "partition": part, "leader": 1,
            "replicas": [1, 2, 3], "replica_racks": replica_racks, "isr": [1],
            "isr_racks": isr_racks, "min_isr": 2, "required_racks": 2,
            "metadata_age_ms": 1.0}


AB, A, ABC = ["a", "b"], ["a"], ["a", "b", "c"]
NER, STALE, OBS = "NOT_ENOUGH_RACKS", "METADATA_STALE", "observed-would-reject"

PROXY_A = [
    prod("A", 1, T + 10, "orders", 0, AB, "forwarded", 0, 100, 2, 0),
    prod("A", 1, T + 10, "orders", 1, A, "forwarded", 0, 50, 1, 0),
    prod("A", 2, T + 20, "orders", 0, A, "rejected", 19, 70, reason=NER),
    prod("A", 3, T + 3605, "orders", 0, ABC, "forwarded", 0, 200, 3, 2),
]
PROXY_B = [
    prod("B", 1, T + 30, "orders", 1, A, OBS, 0, 30, 1, 1, reason=NER),
    prod("B", 2, T + 40, "audit", 0, AB, "forwarded", 6, 10, 1, -1),
    prod("B", 3, T + 50, "orders", 0, [], "rejected", 19, 5, reason=STALE),
]
SNAPSHOTS = [
    snap("A", T + 0, "orders", 0, AB, ABC), snap("A", T + 10, "orders", 0, A, ABC),
    snap("B", T + 15, "orders", 0, A, ABC), snap("A", T + 20, "orders", 0, A, ABC),
    snap("A", T + 30, "orders", 0, ABC, ABC),
    snap("A", T + 0, "orders", 1, A, A), snap("A", T + 100, "orders", 1, A, A),
    snap("B", T + 0, "audit", 0, A, A), snap("B", T + 50, "audit", 0, AB, AB),
    snap("B", T + 60, "audit", 0, A, A),
]


def write_ledger(d: Path) -> Path:
    """Proxy A's files in ``d``, proxy B's in a subdirectory, and a file that is no ledger."""
    write_files(d, PROXY_A, [r for r in SNAPSHOTS if r["instance"] == "A"], name="A-1")
    write_files(d / "proxy-b", PROXY_B, [r for r in SNAPSHOTS if r["instance"] == "B"],
                name="B-1")
    (d / "unrelated.txt").write_text("ignored")
    return d


@pytest.fixture(scope="module")
def ledger(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return read_ledger(spark, [write_ledger(tmp_path_factory.mktemp("ledger"))])


def svg_ids(svg: str) -> set[str]:
    return {e.get("id", "") for e in ElementTree.fromstring(svg).iter()}


def strip_svg(page: str) -> str:
    return re.sub(r"<svg.*?</svg>", "", page, flags=re.S)


def by_key(df: Any, *keys: str) -> dict[Any, dict[str, Any]]:
    out = {}
    for r in df.collect():
        d = r.asDict()
        k = tuple(str(int(d[k].timestamp())) if isinstance(d[k], datetime) else str(d[k])
                  for k in keys)
        out[k if len(k) > 1 else k[0]] = d
    return out


def test_durability(spark: Any, ledger: Any) -> None:
    rep = durability(spark, ledger, 2)
    s = rep.summary
    assert (s["malformed_decision_rows"], s["malformed_snapshot_rows"]) == (0, 0)
    assert (s["decision_files"], s["snapshot_files"]) == (2, 2)
    assert s["instances"] == ["A", "B"]
    assert (s["produce_requests"], s["partition_writes"], s["acked_writes"]) == (6, 7, 4)
    assert (s["acked_bytes"], s["acked_bytes_ge_n"], s["acked_records"]) == (380, 300, 7)
    assert s["share_bytes_ge_n"] == pytest.approx(300 / 380)
    assert (s["rejected_writes"], s["observed_would_reject"], s["broker_errors"]) == (2, 1, 1)
    assert s["rejections_by_reason"] == {
        "rejected:NOT_ENOUGH_RACKS": 1, "rejected:METADATA_STALE": 1,
        "observed-would-reject:NOT_ENOUGH_RACKS": 1}
    # snapshot time (each snapshot: until the next, at most 2 x 10 s): orders-0 at 10 s,
    # under 5+5+10 s; orders-1 under 20 s (not 100); audit-0 under 20 s, at 10 s;
    # the last snapshot of each counts nothing
    assert (s["seconds_under"], s["seconds_at"], s["seconds_above"]) == (60, 20, 0)
    assert s["seconds_observed"] == 80
    hours = by_key(rep.tables["by_topic_hour"], "topic", "hour")
    o0 = hours[("orders", H0)]
    assert (o0["produce_requests"], o0["partition_writes"], o0["acked_writes"]) == (4, 5, 3)
    assert (o0["acked_bytes"], o0["acked_bytes_ge_n"]) == (180, 100)
    assert o0["share_bytes_ge_n"] == pytest.approx(100 / 180)
    o1 = hours[("orders", H1)]
    assert (o1["produce_requests"], o1["acked_bytes"], o1["share_bytes_ge_n"]) == (1, 200, 1.0)
    a0 = hours[("audit", H0)]
    assert (a0["acked_writes"], a0["broker_errors"], a0["share_bytes_ge_n"]) == (0, 1, None)
    parts = by_key(rep.tables["rack_time_by_partition"], "topic", "partition")
    assert (parts[("orders", "0")]["seconds_under"], parts[("orders", "0")]["seconds_at"]) == (
        20, 10)
    assert parts[("orders", "1")]["seconds_under"] == 20
    rej = by_key(rep.tables["rejections"], "topic", "decision", "reason")
    assert rej[("orders", "rejected", NER)]["bytes"] == 70
    assert rep.verdict.at_risk
    assert rep.verdict.findings == (
        "21 % of acknowledged bytes (80 B, 2 records) were acknowledged while their in-sync "
        "replicas spanned fewer than 2 racks, on 1 topic (orders), for 20 s (between 22:00:10 "
        "and 22:00:30 UTC).",
        "If a had been lost in that window they were gone.",
        "The proxy refused 2 partition writes (METADATA_STALE: 1, NOT_ENOUGH_RACKS: 1); "
        "producers retry these until their delivery timeout.",
        "Observe mode let through 1 write that enforcement would have refused.",
        "The cluster's snapshots show 60 s of partition-time with in-sync replicas on fewer "
        "than 2 racks.")
    assert [a.split(":")[0].split(" ")[0] for a in rep.verdict.advice] == [
        "Enforce", "NOT_ENOUGH_RACKS", "METADATA_STALE", "Partitions"]
    coverage, by_racks = rep.charts
    # a 60 s grid from T to T+3605: step 0 holds every snapshot but orders-1's and audit-0's
    # last (T+100, T+60), which hold into step 1 (see pipeline/coverage.py)
    cov = coverage.data["topics"]
    assert coverage.data["step_s"] == 60
    assert (cov["orders"]["under"][:3], cov["orders"]["above"][:3]) == (
        [0.5, 1.0, None], [0.5, 0.0, None])
    assert (cov["audit"]["at"][:2], cov["audit"]["under"][:2]) == ([1.0, 0.0], [0.0, 1.0])
    assert (cov["orders"]["rejected"][0], cov["orders"]["would_reject"][0]) == (2, 1)
    assert sum(cov["orders"]["rejected"]) == 2 and sum(cov["audit"]["rejected"]) == 0
    ids = svg_ids(coverage.svg)
    assert {"coverage-orders-under", "coverage-orders-at", "coverage-orders-above",
            "rejected-orders", "would-reject-orders", "coverage-audit-under"} <= ids
    assert by_racks.data == {"labels": ["1 rack", "2 racks", "3 racks"],
                             "values": [80, 100, 200]}
    assert {f"bytes-by-racks-bar-{n}_rack{s}" for n, s in ((1, ""), (2, "s"), (3, "s"))} <= \
        svg_ids(by_racks.svg)


def test_whatif(spark: Any, ledger: Any) -> None:
    rep = whatif(spark, ledger, [2, 3])
    n2, n3 = rep.summary["by_min_racks"]["2"], rep.summary["by_min_racks"]["3"]
    assert (n2["acked_requests"], n2["acked_writes"], n2["acked_bytes"]) == (3, 4, 380)
    assert (n2["would_reject_requests"], n2["would_reject_writes"]) == (2, 2)
    assert (n2["would_reject_bytes"], n2["would_reject_records"]) == (80, 2)
    assert (n3["would_reject_requests"], n3["would_reject_writes"]) == (2, 3)
    assert (n3["would_reject_bytes"], n3["would_reject_records"]) == (180, 4)
    assert n3["share_bytes_rejected"] == pytest.approx(180 / 380)
    hours = by_key(rep.tables["by_topic_hour"], "min_racks", "topic", "hour")
    assert hours[("2", "orders", H0)]["would_reject_bytes"] == 80
    assert hours[("2", "orders", H1)]["would_reject_bytes"] == 0
    assert rep.summary["malformed_decision_rows"] == 0
    assert rep.verdict.findings == (
        "min.insync.racks=2 would have refused 2 of 4 acknowledged writes (21 % of bytes: "
        "80 B, 2 records), on orders.",
        "min.insync.racks=3 would have refused 3 of 4 acknowledged writes (47 % of bytes: "
        "180 B, 4 records), on orders.")
    assert rep.verdict.at_risk and len(rep.verdict.advice) == 2  # one per value that refuses
    [chart] = rep.charts
    assert chart.data["values"] == pytest.approx([80 / 380, 180 / 380])
    assert {"whatif-bar-N___2", "whatif-bar-N___3"} <= svg_ids(chart.svg)


def test_placement(spark: Any, ledger: Any) -> None:
    rep = placement(spark, ledger, 2)
    assert (rep.summary["partitions"], rep.summary["under_now"], rep.summary["ever_under"]) == (
        3, 2, 2)
    bad = by_key(rep.tables["under_replicated_racks"], "topic", "partition")
    assert set(bad) == {("orders", "1"), ("audit", "0")}
    assert bad[("orders", "1")]["seconds_since"] == 100  # bad since the first snapshot
    assert bad[("audit", "0")]["seconds_since"] == 0  # fine at T+50, bad again at T+60
    assert bad[("audit", "0")]["since"].timestamp() == T + 60
    assert bad[("orders", "1")]["replica_racks"] == ["a"]
    assert rep.verdict.findings == (
        "2 of 3 partitions have replicas on fewer than 2 racks now (audit-0 (a), orders-1 (a)): "
        "with min.insync.racks=2, acks=all produces to them are refused even while every "
        "broker is up.",)
    assert rep.verdict.at_risk
    # the audit's categories over time, per topic: partition-seconds (N = 2, replica racks)
    over_time = [(r["topic"], r["partitions"], r["seconds_observed"], r["seconds_unsatisfiable"],
                  r["seconds_fragile"], r["seconds_healthy"])
                 for r in rep.tables["topic_time"].collect()]
    assert over_time == [("audit", 1, 30.0, 20.0, 10.0, 0.0), ("orders", 2, 50.0, 20.0, 0.0, 30.0)]
    assert (rep.summary["partition_seconds_unsatisfiable"],
            rep.summary["partition_seconds_fragile"]) == (40.0, 10.0)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_audit_loss(spark: Any, ledger: Any, tmp_path: Path, fmt: str) -> None:
    # acknowledged: orders-0 offsets 0,1 and 2,3,4; orders-1 offsets 0 and 1
    present = [("orders", 0, o) for o in (0, 1, 2, 4, 5)] + [("orders", 1, o) for o in (0, 1)]
    rows = [(t, p, o, 1000 + o, None) for t, p, o in present]
    path = write_rows(rows, tmp_path / f"dump.{fmt}")
    rep = audit_loss(spark, ledger, str(path))
    s = rep.summary
    assert (s["topics"], s["acked_offsets"], s["missing_offsets"]) == (["orders"], 7, 1)
    assert s["dump_offsets"] == 7
    missing = rep.tables["missing"].collect()
    assert [(r["topic"], r["partition"], r["offset"], r["instance"], r["req"])
            for r in missing] == [("orders", 0, 3, "A", 3)]
    assert rep.tables["missing"].columns == [
        "topic", "partition", "offset", "instance", "req", "client_id", "acked_at"]
    [run_] = rep.tables["missing_ranges"].collect()
    assert (run_["first_offset"], run_["last_offset"], run_["records"], run_["isr_racks"]) == (
        3, 3, 1, ["a,b,c"])
    assert rep.verdict.findings == (
        "1 acknowledged record is missing from the cluster: topic orders, partition 0, "
        "offset 3, acknowledged at 23:00:05 UTC while the ISR spanned a, b and c.",)
    assert rep.verdict.at_risk and rep.verdict.advice[0].startswith("These records")
    [chart] = rep.charts
    assert chart.data["missing"] == [[T + 3605, 3, 0]]
    assert chart.data["found_sample"] == 6
    assert chart.data["outages"] == [[T, T + 120]]  # orders-1 on one rack from T to T+120
    assert {"missing", "found", "outage-0"} <= svg_ids(chart.svg)


def test_empty_ledger_gives_zeros(spark: Any, tmp_path: Path) -> None:
    empty = read_ledger(spark, [tmp_path])
    d = durability(spark, empty, 2).summary
    assert (d["produce_requests"], d["acked_bytes"], d["share_bytes_ge_n"]) == (0, 0, None)
    assert (d["malformed_decision_rows"], d["decision_files"]) == (0, 0)
    w = whatif(spark, empty, [2, 3]).summary["by_min_racks"]
    assert w["2"]["would_reject_writes"] == 0 and w["3"]["acked_bytes"] == 0
    assert placement(spark, empty, 2).summary["partitions"] == 0
    dump = write_rows([], tmp_path / "empty.parquet")
    a = audit_loss(spark, empty, str(dump)).summary
    assert (a["acked_offsets"], a["missing_offsets"]) == (0, 0)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_command_writes_tables_summary_and_html(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    ledger_dir = write_ledger(tmp_path / "ledger")
    out = tmp_path / "out"
    assert run(["durability", "--ledger", str(ledger_dir), "--out", str(out),
                "--format", fmt], spark=spark) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "Share of acknowledged bytes on >= N racks: 79 %" in printed
    assert "WARNING" not in printed
    last = printed.rstrip("\n").splitlines()
    assert last[-1] == f"Report: {out / 'report.html'}"
    verdict_at = last.index("Verdict:")
    assert last[verdict_at + 1].startswith("  21 % of acknowledged bytes (80 B, 2 records)")
    assert "reading the ledger and computing the durability report" in captured.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["acked_bytes"] == 380
    assert summary["verdict"]["at_risk"] is True
    assert summary["verdict"]["findings"][0].startswith("21 % of acknowledged bytes")
    page = (out / "report.html").read_text()
    assert page.index("id='verdict'") < page.index("<svg") < page.index("Key figures")
    body = re.sub(r"<code>.*?</code>", "", strip_svg(page).split("</head>")[1])
    assert "malformed" not in body and "acked_bytes_ge_n" not in body and "{" not in body
    assert "Acknowledged bytes on &gt;= N racks" in page and "380 B" in page
    assert page.count("<h2>") == 6  # what to do, key figures, 4 tables (not "overall")
    assert {p.name for p in (out / "charts").iterdir()} == {"coverage.svg",
                                                            "bytes-by-racks.svg"}
    written = list((out / "by_topic_hour").glob(f"*.{fmt}"))
    assert written, "no table file"
    if fmt == "csv":
        assert written[0].read_text().splitlines()[0].startswith("topic,hour,produce_requests")


def test_missing_java_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    problem = missing_requirement()
    assert problem is not None and problem.startswith("Java not found") and "\n" not in problem
    assert os.environ["PATH"] == str(tmp_path)
