"""rackguard placement: its inputs (flags, assignment and snapshot files, DescribeLogDirs
answers) and the command offline (tables, JSON, files, exit codes)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from proxy.placement.command import run
from proxy.placement.live import log_dir_sizes
from proxy.placement.model import PartitionReplicas as P
from proxy.placement.sources import (
    SourceError,
    parse_brokers,
    parse_topic_numbers,
    read_assignment,
    read_snapshot,
)

BROKERS = "1=a,2=b,3=c,4=a,5=b,6=c"
CURRENT = {"version": 1, "partitions": [
    {"topic": "pay", "partition": 0, "replicas": [1, 4, 2]},
    {"topic": "pay", "partition": 1, "replicas": [3, 6]},
    {"topic": "ok", "partition": 0, "replicas": [1, 2, 3]}]}


def test_parse_brokers() -> None:
    assert parse_brokers("1=a, 2=b,3=") == {1: "a", 2: "b", 3: None}
    for bad, why in (("1", "ID=RACK"), ("x=a", "integer"), ("1=a,1=b", "twice"), ("", "no")):
        with pytest.raises(SourceError, match=why):
            parse_brokers(bad)
    assert parse_topic_numbers(["a.b=3"], "--f") == {"a.b": 3}
    with pytest.raises(SourceError, match=">= 1"):
        parse_topic_numbers(["t=0"], "--f")


def test_assignment_file(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(CURRENT))
    topics = read_assignment(path)
    assert topics["pay"][1] == P((3, 6), 3)
    path.write_text('{"partitions": [{"topic": "t"}]}')
    with pytest.raises(SourceError, match="bad entry"):
        read_assignment(path)


def test_snapshot_file_gives_its_latest_state(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from proxy.ledger.tables import SNAPSHOT_SCHEMA

    def row(run: int, seq: int, ts: float, **fields: object) -> dict[str, object]:
        return {"instance": "i", "run": run, "seq": seq, "ts": ts, **fields}

    def topic(run: int, seq: int, leader: int, replicas: list[int]) -> dict[str, object]:
        return row(run, seq, 10.0 * seq, kind="topic", topic="t", partitions=[0],
                   leaders=[leader], replicas=[replicas], isr=[replicas])

    rule = {"rule_topics": ["t"], "rule_topic_racks": [3], "rule_prefixes": [],
            "rule_prefix_racks": []}
    rows = [
        row(1, 1, 1.0, kind="brokers", nodes=[9], racks=["z"], live=[True]),  # an older run
        row(2, 1, 10.0, kind="brokers", nodes=[1], racks=["a"], live=[True]),
        row(2, 1, 10.0, kind="rule", default_min_racks=2, **rule),
        topic(2, 1, 1, [1]),
        row(2, 1, 10.0, kind="topic", topic="gone", partitions=[0], leaders=[1],
            replicas=[[1]], isr=[[1]]),
        row(2, 2, 20.0, kind="brokers", nodes=[1, 2, 3], racks=["a", "b", "c"],
            live=[True, True, False]),
        topic(2, 2, 2, [2, 1]),
        row(2, 2, 20.0, kind="gone", topic="gone"),
        row(2, 2, 20.0, kind="tick", rule_seq=1, interval_s=30.0),
    ]
    path = tmp_path / "snapshots-i-1.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SNAPSHOT_SCHEMA), str(path))
    inputs = read_snapshot(path)
    assert inputs.racks == {1: "a", 2: "b"}
    assert inputs.topics == {"t": {0: P((2, 1), 2)}}
    assert inputs.required == {"t": 3}
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    with pytest.raises(SourceError, match="not a ledger snapshot file"):
        read_snapshot(tmp_path / "x.parquet")


def test_log_dir_sizes_take_the_largest_replica() -> None:
    answers = [
        {"broker": 1, "log_dirs": [{"error_code": 0, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "partition_size": 100, "is_future_key": False}]}]}]},
        {"broker": 2, "log_dirs": [{"error_code": 0, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "partition_size": 120, "is_future_key": False},
            {"partition_index": 1, "partition_size": 7, "is_future_key": False}]}]}]},
        {"broker": 3, "log_dirs": [{"error_code": 57, "topics": []}]},
    ]
    assert log_dir_sizes(answers) == {("t", 0): 120, ("t", 1): 7}


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def current(tmp_path: Path) -> Path:
    path = tmp_path / "current.json"
    path.write_text(json.dumps(CURRENT))
    return path


def test_audit_table_and_json(current: Path) -> None:
    code, out, _ = _run("audit", "--brokers", BROKERS, "--assignment", str(current))
    assert code == 0
    assert "3 partitions: 1 unsatisfiable, 1 fragile, 1 healthy" in out
    assert out.index("pay ") < out.index("ok ")  # worst topic first
    code, out, _ = _run("audit", "--brokers", BROKERS, "--assignment", str(current), "--json",
                        "--topic-min-insync-racks", "ok=3")
    doc = json.loads(out)
    assert [(t["topic"], t["unsatisfiable"], t["fragile"]) for t in doc["topics"]] == [
        ("pay", 1, 1), ("ok", 0, 1)]


def test_plan_fix_writes_the_plan_and_the_rollback(current: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "fix.json"
    code, _, err = _run("plan", "--fix", "--brokers", BROKERS, "--assignment", str(current),
                        "--out", str(out_file))
    assert code == 0, err
    plan = json.loads(out_file.read_text())
    assert [(p["topic"], p["partition"]) for p in plan["partitions"]] == [("pay", 0), ("pay", 1)]
    rollback = json.loads(tmp_path.joinpath("fix.rollback.json").read_text())
    assert rollback["partitions"][1]["replicas"] == [3, 6]
    assert "2 partitions to reassign, 2 replica moves" in err


def test_plan_fresh_prints_kafkas_assignment() -> None:
    code, out, _ = _run("plan", "--fresh", "new", "--partitions", "7", "--replication-factor",
                        "3", "--start-index", "0", "--brokers",
                        "0=rack1,1=rack3,2=rack3,3=rack2,4=rack2,5=rack1")
    assert code == 0
    doc = json.loads(out)
    assert [p["replicas"] for p in doc["partitions"]] == [
        [0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3], [0, 4, 2]]


@pytest.mark.parametrize("argv,code,message", [
    (("plan", "--fresh", "t", "--partitions", "3", "--replication-factor", "4",
      "--brokers", "1=a,2=b,3=c"), 2, "replication factor 4 larger than the 3"),
    (("plan", "--fresh", "t", "--partitions", "3", "--replication-factor", "2",
      "--min-insync-racks", "4", "--brokers", "1=a,2=b,3=c"), 2, "more than the 3 racks"),
    (("plan", "--fix", "--brokers", "1=a,2=b", "--min-insync-racks", "3"), 2,
     "needs --assignment"),
    (("audit", "--brokers", "1=a", "--snapshot", "x"), 2, "exactly one of"),
])
def test_impossible_requests_exit_2_with_a_message(argv: tuple[str, ...], code: int,
                                                   message: str) -> None:
    got, _, err = _run(*argv)
    assert got == code and message in err


def test_unfixable_partitions_exit_1(current: Path) -> None:
    code, out, err = _run("plan", "--fix", "--brokers", BROKERS, "--assignment", str(current),
                          "--min-insync-racks", "3")
    assert code == 1
    assert "pay-1 replicas [3, 6]: 2 replica(s) cannot span 3 racks" in err
    assert json.loads(out)["partitions"] == [
        {"topic": "pay", "partition": 0, "replicas": [1, 6, 2]}]


def test_min_insync_racks_from_the_proxys_config(current: Path, tmp_path: Path) -> None:
    config = tmp_path / "rackguard.toml"
    config.write_text('min_insync_racks = 3\n\n[topic_min_insync_racks]\nok = 1\n')
    code, out, err = _run("audit", "--brokers", BROKERS, "--assignment", str(current),
                          "--config", str(config), "--json")
    assert code == 0, err
    doc = {t["topic"]: t for t in json.loads(out)["topics"]}
    assert (doc["pay"]["min_insync_racks"], doc["ok"]["min_insync_racks"]) == (3, 1)
    assert doc["pay"]["unsatisfiable"] == 2
