"""Test helper: a ledger directory read back as one flat dict per partition-write.

The reference the pipeline's Spark join is held to, in plain Python (pyarrow only):
each request's partitions, joined by ``(instance, run, view_seq)`` to the latest
``topic`` snapshot row with ``seq <= view_seq`` and the latest ``brokers`` row, and by
``rule_seq`` to the rule. Only tests import this.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.answers import fill_answers
from proxy.ledger.files import read_stream
from proxy.ledger.schema import FORWARDED, REJECTED


def table(paths: list[Path]) -> list[dict[str, Any]]:
    """The files' rows; a decisions file's broker answers read as the pipeline reads them."""
    rows: list[dict[str, Any]] = []
    for p in paths:
        t = pq.read_table(p) if p.suffix == ".parquet" else read_stream(p)
        if t is not None:
            if p.name.startswith("decisions-"):
                t, _ = fill_answers(t)
            rows += t.to_pylist()
    return rows


def _latest(rows: list[dict[str, Any]], seq: int) -> dict[str, Any] | None:
    best = None
    for r in rows:
        if r["seq"] <= seq and (best is None or r["seq"] > best["seq"]):
            best = r
    return best


def partition_rows(directory: Path) -> list[dict[str, Any]]:
    files = sorted(directory.iterdir())
    decisions = table([p for p in files if p.name.startswith("decisions-")])
    snaps = table([p for p in files if p.name.startswith("snapshots-")])
    out: list[dict[str, Any]] = []
    for d in decisions:
        run = [s for s in snaps if (s["instance"], s["run"]) == (d["instance"], d["run"])]
        brokers = _latest([s for s in run if s["kind"] == "brokers"], d["view_seq"])
        racks = dict(zip(brokers["nodes"], brokers["racks"], strict=True)) if brokers else {}
        rule = _latest([s for s in run if s["kind"] == "rule"], d["rule_seq"])
        np = {i: (dec, reason, code) for i, dec, reason, code in zip(
            d["np_index"] or [], d["np_decision"] or [], d["np_reason"] or [],
            d["np_code"] or [], strict=True)}
        for i, topic_no in enumerate(d["topic_no"]):
            topic = d["topics"][topic_no]
            state = _latest([s for s in run if s["kind"] in ("topic", "gone")
                             and s["topic"] == topic], d["view_seq"])
            leader, isr, min_isr = -1, [], None
            if state is not None and state["kind"] == "topic" \
                    and d["partition"][i] in state["partitions"]:
                at = state["partitions"].index(d["partition"][i])
                leader, isr, min_isr = state["leaders"][at], state["isr"][at], state["min_isr"]
            decision, reason, code = np.get(i, (FORWARDED, "", None))
            out.append({
                "ts": d["ts"], "instance": d["instance"], "req": d["req"],
                "client_id": d["client_id"], "client_addr": d["client_addr"],
                "topic": topic, "partition": d["partition"][i], "leader": leader, "isr": isr,
                "isr_racks": sorted({racks[n] for n in isr if n in racks}),
                "min_isr": min_isr, "decision": decision, "reason": reason,
                "wire_error": code if decision == REJECTED else d["error"][i],
                "broker_error": None if decision == REJECTED else d["error"][i],
                "base_offset": d["base_offset"][i], "records": d["records"][i],
                "bytes": d["bytes"][i], "latency_ms": d["latency_ms"],
                "rule": rule, "view_seq": d["view_seq"],
            })
    return out


__all__ = ["partition_rows", "table", "pa"]
