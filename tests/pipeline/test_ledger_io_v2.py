"""Reading schema v2 decision lines: one per request, each partition a positional array.

Invariants under test: a v2 line is one row per partition with v1's columns and
types, line fields copied to each; the v2 ledger of the reports' hand-written
content gives the same rows (but ``v``) and the same report figures as its v1
ledger; v1 and v2 lines mix, in a directory and in one file; malformed v2
input counts exactly: a line whose own fields fail (not JSON, a missing or
mistyped line field, another kind or version, no partitions) is one malformed
row whatever its partitions, a bad partition array (length, an element's type,
a missing required element, an unknown decision) is one malformed row and its
line's other partitions stay valid, and a null where v1 allows one is valid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import BooleanType

from pipeline.ledger_io import CORRUPT, DECISION_SCHEMA, PARTITION_FIELDS, read_ledger
from pipeline.reports import durability, whatif
from tests.pipeline.test_reports import (
    BAD_DECISIONS,
    PROXY_A,
    PROXY_B,
    T,
    v1_lines,
    v2_lines,
    write_ledger,
)

pytestmark = pytest.mark.spark

DROP = object()  # a field left out of the line


def part(index: int, /, **changes: Any) -> list[Any]:
    values = {"topic": "t", "partition": index, "leader": 1, "isr": [1, 2],
              "isr_racks": ["a", "b"], "required_racks": 2, "min_isr": 2,
              "decision": "forwarded", "reason": "", "wire_error": 0, "broker_error": 0,
              "base_offset": 7, "records": 1, "bytes": 100, "metadata_age_ms": 12.0}
    return [changes.get(f, values[f]) for f in PARTITION_FIELDS]


TWO = (part(0), part(1))


def line(partitions: Any = TWO, **changes: Any) -> str:
    fields = {"v": 2, "kind": "produce", "instance": "i", "ts": T, "req": 3, "client_id": "c",
              "client_addr": "127.0.0.1:5", "latency_ms": 1.5,
              "partitions": partitions}
    fields.update(changes)
    return json.dumps({k: v for k, v in fields.items() if v is not DROP})


def with_bad(bad: Any) -> str:
    """A line whose middle partition is ``bad`` between two valid ones."""
    return line([part(0), bad, part(2)])


def rows_of(ledger: Any) -> list[dict[str, Any]]:
    return sorted((r.asDict() for r in ledger.decisions.collect()), key=repr)


def test_a_v2_line_is_one_v1_row_per_partition(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "decisions-i-1.jsonl").write_text(
        '{"v":2,"kind":"produce","instance":"i","ts":1700000000.123456,"req":3,"client_id":"c",'
        '"client_addr":"127.0.0.1:5","latency_ms":1.5,"partitions":['
        '["t",0,1,[1,2],["a","b"],2,2,"forwarded","",0,0,7,1,100,12.0],'
        '["t",1,null,[2],["b"],2,2,"observed-would-reject","NOT_ENOUGH_RACKS",null,null,null,'
        '-1,200,null]]}\n')
    ledger = read_ledger(spark, [tmp_path])
    assert [(f.name, f.dataType) for f in ledger.decisions.schema.fields] == [
        (f.name, f.dataType) for f in DECISION_SCHEMA.fields] + [("malformed", BooleanType())]
    same = {"v": 2, "kind": "produce", "instance": "i", "ts": 1700000000.123456, "req": 3,
            "client_id": "c", "client_addr": "127.0.0.1:5", "latency_ms": 1.5, "topic": "t",
            "required_racks": 2, "min_isr": 2, CORRUPT: None, "malformed": False}
    assert rows_of(ledger) == [
        {**same, "partition": 0, "leader": 1, "isr": [1, 2], "isr_racks": ["a", "b"],
         "decision": "forwarded", "reason": "", "wire_error": 0, "broker_error": 0,
         "base_offset": 7, "records": 1, "bytes": 100, "metadata_age_ms": 12.0},
        {**same, "partition": 1, "leader": None, "isr": [2], "isr_racks": ["b"],
         "decision": "observed-would-reject", "reason": "NOT_ENOUGH_RACKS", "wire_error": None,
         "broker_error": None, "base_offset": None, "records": -1, "bytes": 200,
         "metadata_age_ms": None},
    ]


def test_v2_ledger_gives_the_v1_ledgers_rows_and_reports(spark: Any, tmp_path: Path) -> None:
    v1 = read_ledger(spark, [write_ledger(tmp_path / "v1")])
    v2 = read_ledger(spark, [write_ledger(tmp_path / "v2", v2_lines)])
    assert (v1.decisions.count(), v2.decisions.count()) == (11, 11)  # 7 rows, 4 malformed
    assert rows_of(v2) == sorted(({**r, "v": 2} if not r["malformed"] else r
                                  for r in rows_of(v1)), key=repr)
    for report in (lambda ledger: durability(spark, ledger, 2),
                   lambda ledger: whatif(spark, ledger, [2, 3])):
        a, b = report(v1), report(v2)
        assert a.summary == b.summary
        assert a.tables.keys() == b.tables.keys()
        for name, table in a.tables.items():
            assert sorted(map(repr, table.collect())) == sorted(
                map(repr, b.tables[name].collect())), name


def test_v1_and_v2_lines_mix(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "decisions-A-1.jsonl").write_text(v2_lines(PROXY_A[:2]) + v1_lines(PROXY_A[2:]))
    (tmp_path / "decisions-B-1.jsonl").write_text(
        v1_lines(PROXY_B[:1]) + v2_lines(PROXY_B[1:]) + BAD_DECISIONS[0] + "\n")
    s = durability(spark, read_ledger(spark, [tmp_path]), 2).summary
    assert (s["produce_requests"], s["partition_writes"], s["acked_writes"]) == (6, 7, 4)
    assert (s["acked_bytes"], s["acked_bytes_ge_n"], s["acked_records"]) == (380, 300, 7)
    assert (s["rejected_writes"], s["observed_would_reject"], s["broker_errors"]) == (2, 1, 1)
    assert (s["malformed_decision_rows"], s["decision_files"], s["instances"]) == (1, 2, ["A", "B"])


NULLABLE = ("leader", "isr", "required_racks", "min_isr", "reason", "wire_error", "broker_error",
            "base_offset", "records", "bytes", "metadata_age_ms")
CASES = [  # name, line, valid rows, malformed rows
    ("not-json", "this is not json", 0, 1),
    ("no-ts", line(ts=DROP), 0, 1),
    ("no-instance", line(instance=DROP), 0, 1),
    ("no-req", line(req=DROP), 0, 1),
    ("ts-string", line(ts="yesterday"), 0, 1),
    ("latency-string", line(latency_ms="slow"), 0, 1),
    ("other-kind", line(kind="partition"), 0, 1),
    ("no-kind", line(kind=DROP), 0, 1),
    ("v3", line(v=3), 0, 1),
    ("no-v", line(v=DROP), 0, 1),
    ("no-partitions", line(partitions=DROP), 0, 1),
    ("empty-partitions", line([]), 0, 1),
    ("null-partitions", line(None), 0, 1),
    ("partitions-string", line("x"), 0, 1),
    ("a-partition-not-an-array", line([part(0), 5]), 0, 1),
    ("14-elements", with_bad(part(1)[:-1]), 2, 1),
    ("16-elements", with_bad([*part(1), 0]), 2, 1),
    ("null-partition", with_bad(None), 2, 1),
    ("partition-string", with_bad(part(1, partition="x")), 2, 1),
    ("partition-fraction", with_bad(part(1, partition=1.5)), 2, 1),
    ("leader-string", with_bad(part(1, leader="x")), 2, 1),
    ("records-string", with_bad(part(1, records="x")), 2, 1),
    ("wire-error-string", with_bad(part(1, wire_error="abc")), 2, 1),
    ("offset-fraction", with_bad(part(1, base_offset=1.5)), 2, 1),
    ("bytes-overflow", with_bad(part(1, bytes=2**63)), 2, 1),
    ("age-string", with_bad(part(1, metadata_age_ms="abc")), 2, 1),
    ("isr-of-strings", with_bad(part(1, isr=["x"])), 2, 1),
    ("racks-string", with_bad(part(1, isr_racks="a")), 2, 1),
    ("racks-number", with_bad(part(1, isr_racks=5)), 2, 1),
    ("racks-null", with_bad(part(1, isr_racks=None)), 2, 1),
    ("topic-null", with_bad(part(1, topic=None)), 2, 1),
    ("partition-null", with_bad(part(1, partition=None)), 2, 1),
    ("decision-null", with_bad(part(1, decision=None)), 2, 1),
    ("decision-unknown", with_bad(part(1, decision="bogus")), 2, 1),
    ("nulls-v1-allows", line([part(0), part(1, **dict.fromkeys(NULLABLE))], client_id=None,
                             latency_ms=None), 2, 0),
]


def with_req(text: str, req: int) -> str:
    """``text`` with its request number (if it has one) set to ``req``."""
    try:
        fields = json.loads(text)
    except ValueError:
        return text
    return json.dumps({**fields, "req": req} if "req" in fields else fields)


def test_malformed_v2_counted_exactly(spark: Any, tmp_path: Path) -> None:
    lines = [with_req(text, n) for n, (_, text, _, _) in enumerate(CASES)]
    (tmp_path / "decisions-i-1.jsonl").write_text("".join(text + "\n" for text in lines))
    # rows of a line that is not JSON carry it whole; the others, their request number
    case_of: dict[Any, str] = {text: name for text, (name, *_) in zip(lines, CASES, strict=True)}
    case_of.update({n: name for n, (name, *_) in enumerate(CASES)})
    case_of[None] = "no-req"
    counts = {name: [0, 0] for name, *_ in CASES}
    for r in read_ledger(spark, [tmp_path]).decisions.collect():
        counts[case_of[r[CORRUPT] if r[CORRUPT] is not None else r["req"]]][r["malformed"]] += 1
    assert counts == {name: [valid, malformed] for name, _, valid, malformed in CASES}
