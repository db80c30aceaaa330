"""Test helper: ledger files (schema 3) written from rows as the reports see them.

Tests state a ledger the way the reports read it, one dict per partition-write (its
ISR's racks, decision, codes...) and one per partition snapshot; this writes the
files the proxy would have written for them: requests that name a view sequence
number, and the views (topic rows, brokers, rule, ticks) those numbers point at, with
the proxy's own Arrow schemas. Each rack name is one broker. Decisions and snapshots
of an instance are written as two runs of it, so each request can have a view of its
own and each tick exactly the partitions its snapshot listed.

Only tests import this.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from proxy.ledger.schema import FORWARDED, REJECTED
from proxy.ledger.tables import DECISION_SCHEMA, SNAPSHOT_SCHEMA

DECISION_RUN, SNAPSHOT_RUN = 1, 2


class Racks:
    """Rack name -> the one broker of that rack (node ids in order of first use)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.nodes: dict[str, int] = {}
        for name in names:
            self.node(name)

    def node(self, rack: str) -> int:
        return self.nodes.setdefault(rack, len(self.nodes) + 1)

    def row(self, instance: str, run: int, seq: int, ts: float) -> dict[str, Any]:
        return {"kind": "brokers", "ts": ts, "instance": instance, "run": run, "seq": seq,
                "nodes": list(self.nodes.values()), "racks": list(self.nodes),
                "live": [True] * len(self.nodes)}


def rule_row(instance: str, run: int, ts: float, default: int = 2,
             topics: Mapping[str, int] | None = None) -> dict[str, Any]:
    return {"kind": "rule", "ts": ts, "instance": instance, "run": run, "seq": 1,
            "default_min_racks": default, "rule_topics": list(topics or {}),
            "rule_topic_racks": list((topics or {}).values()), "rule_prefixes": [],
            "rule_prefix_racks": [], "observe": False, "dedicated_code": None}


def _topic_row(instance: str, run: int, seq: int, ts: float, topic: str,
               parts: Sequence[tuple[int, int, list[int], list[int]]], min_isr: int = 2
               ) -> dict[str, Any]:
    """``parts``: (partition, leader, replicas, isr)."""
    parts = sorted(parts)
    return {"kind": "topic", "ts": ts, "instance": instance, "run": run, "seq": seq,
            "topic": topic, "min_isr": min_isr, "partitions": [p[0] for p in parts],
            "leaders": [p[1] for p in parts], "replicas": [p[2] for p in parts],
            "isr": [p[3] for p in parts]}


def request_row(instance: str, run: int, req: int, ts: float, view_seq: int,
                parts: Sequence[Mapping[str, Any]], client_id: str = "c",
                client_addr: str = "127.0.0.1:1", latency_ms: float | None = 1.0
                ) -> dict[str, Any]:
    """One request's record; ``parts``: dicts with topic, partition, decision, reason,
    wire_error, base_offset, records, bytes."""
    topics = list(dict.fromkeys(p["topic"] for p in parts))
    not_passed = [(i, p) for i, p in enumerate(parts)
                  if p["decision"] != FORWARDED or p.get("reason")]
    return {
        "ts": ts, "instance": instance, "run": run, "req": req, "client_id": client_id,
        "client_addr": client_addr, "api_version": 9, "view_seq": view_seq, "rule_seq": 1,
        "latency_ms": latency_ms, "topics": topics,
        "topic_no": [topics.index(p["topic"]) for p in parts],
        "partition": [p["partition"] for p in parts],
        "records": [p.get("records", 1) for p in parts],
        "bytes": [p["bytes"] for p in parts],
        "error": [None if p["decision"] == REJECTED else p.get("wire_error") for p in parts],
        "base_offset": [p.get("base_offset") for p in parts],
        "np_index": [i for i, _ in not_passed] or None,
        "np_decision": [p["decision"] for _, p in not_passed] or None,
        "np_reason": [p.get("reason") or "" for _, p in not_passed] or None,
        "np_code": [p.get("wire_error") if p["decision"] == REJECTED else None
                    for _, p in not_passed] or None,
    }


def write_tables(directory: Path, name: str, decisions: list[dict[str, Any]],
                 snapshots: list[dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    if decisions:
        pq.write_table(pa.Table.from_pylist(decisions, schema=DECISION_SCHEMA),
                       str(directory / f"decisions-{name}.parquet"))
    if snapshots:
        pq.write_table(pa.Table.from_pylist(snapshots, schema=SNAPSHOT_SCHEMA),
                       str(directory / f"snapshots-{name}.parquet"))


def write_ledger(directory: Path, rows: Sequence[Mapping[str, Any]],
                 snaps: Sequence[Mapping[str, Any]] = (), name: str = "test",
                 default_racks: int = 2) -> None:
    """``rows``: one dict per partition-write with instance, req, ts, topic, partition,
    isr_racks, decision, reason, wire_error, base_offset, records, bytes (optionally
    client_id, client_addr, latency_ms); ``snaps``: one per partition snapshot with
    instance, ts, topic, partition, isr_racks, replica_racks, interval_s."""
    racks = Racks(sorted({r for row in [*rows, *snaps] for key in ("isr_racks", "replica_racks")
                          for r in row.get(key) or ()}))
    decisions: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    instances = sorted({r["instance"] for r in [*rows, *snaps]})
    for inst in instances:
        for run in (DECISION_RUN, SNAPSHOT_RUN):
            states += [racks.row(inst, run, 1, 0.0), rule_row(inst, run, 0.0, default_racks)]
    for inst in instances:
        seqs = itertools.count(1)
        requests: dict[int, list[Mapping[str, Any]]] = {}
        for row in rows:
            if row["instance"] == inst:
                requests.setdefault(row["req"], []).append(row)
        for req, parts in requests.items():
            seq = next(seqs)
            by_topic: dict[str, list[tuple[int, int, list[int], list[int]]]] = {}
            for p in parts:
                isr = [racks.node(r) for r in p["isr_racks"]]
                by_topic.setdefault(p["topic"], []).append(
                    (p["partition"], isr[0] if isr else -1, isr, isr))
            states += [_topic_row(inst, DECISION_RUN, seq, parts[0]["ts"], t, ps)
                       for t, ps in by_topic.items()]
            first = parts[0]
            decisions.append(request_row(
                inst, DECISION_RUN, req, first["ts"], seq, parts,
                first.get("client_id", "c"), first.get("client_addr", "127.0.0.1:1"),
                first.get("latency_ms", 1.0)))
        seqs = itertools.count(1)
        ticks: dict[float, list[Mapping[str, Any]]] = {}
        for s in snaps:
            if s["instance"] == inst:
                ticks.setdefault(s["ts"], []).append(s)
        known: set[str] = set()
        for ts, parts in sorted(ticks.items()):
            seq = next(seqs)
            by_topic = {}
            for p in parts:
                isr = [racks.node(r) for r in p["isr_racks"]]
                reps = [racks.node(r) for r in p["replica_racks"]]
                by_topic.setdefault(p["topic"], []).append(
                    (p["partition"], isr[0] if isr else -1, reps, isr))
            states += [_topic_row(inst, SNAPSHOT_RUN, seq, ts, t, ps)
                       for t, ps in by_topic.items()]
            states += [{"kind": "gone", "ts": ts, "instance": inst, "run": SNAPSHOT_RUN,
                        "seq": seq, "topic": t} for t in sorted(known - set(by_topic))]
            known = set(by_topic)
            states.append({"kind": "tick", "ts": ts, "instance": inst, "run": SNAPSHOT_RUN,
                           "seq": seq, "rule_seq": 1,
                           "interval_s": float(parts[0]["interval_s"])})
    write_tables(directory, name, decisions, states)
