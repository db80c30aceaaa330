"""A ledger a person would recognise: ten minutes of two topics through a lost zone.

Brokers 1-6 in rack-a, rack-b, rack-c (two each); one proxy instance writing
schema 3 files: a record per request naming its view (1 before the outage, 2
during, 3 after), the three views, the rule and a tick every 10 s. ``orders``
(6 partitions, enforced with min.insync.racks=2) and ``drill`` (3 partitions, not enforced). From
minute 4 to minute 5 rack-b and rack-c drop out of every ISR: the proxy
refuses orders' writes with NOT_ENOUGH_RACKS, while drill's writes are
acknowledged on rack-a alone, and then rack-a is lost with them: the topic
dump lacks exactly drill's offsets written in that minute on partition 0 (its
leader moved to a broker that had not caught up).

Used by the browser test and for the screenshots in docs/ledger-and-reports.md; the numbers below
are what the reports must say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.pipeline.ledger_writer import request_row, rule_row, write_tables

T0 = 1_763_944_200.0  # 2025-11-24 00:30:00 UTC
RACK = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a", 5: "rack-b", 6: "rack-c"}
TOPICS = {"orders": 6, "drill": 3}
OUTAGE = (T0 + 240, T0 + 300)
STEP_S = 0.5
RECORDS = 5
BYTES = 700

INSTANCE, RUN = "px-1", 7


def _view(t: float) -> int:
    return 1 if t < OUTAGE[0] else 2 if t < OUTAGE[1] else 3


def _views() -> list[dict[str, Any]]:
    """The brokers, the rule, and each topic in each of the three views."""
    rows: list[dict[str, Any]] = [
        {"kind": "brokers", "ts": T0, "instance": INSTANCE, "run": RUN, "seq": 1,
         "nodes": list(RACK), "racks": list(RACK.values()), "live": [True] * len(RACK)},
        {**rule_row(INSTANCE, RUN, T0, default=1, topics={"orders": 2})}]
    for seq, at in ((1, T0), (2, OUTAGE[0]), (3, OUTAGE[1])):
        for topic, count in TOPICS.items():
            rows.append({
                "kind": "topic", "ts": at, "instance": INSTANCE, "run": RUN, "seq": seq,
                "topic": topic, "min_isr": 2, "partitions": list(range(count)),
                "leaders": [_isr(p, at)[0] for p in range(count)],
                "replicas": [_replicas(p) for p in range(count)],
                "isr": [_isr(p, at) for p in range(count)]})
    return rows


def _replicas(p: int) -> list[int]:
    """Two replicas in rack-a (the leader first) and one in rack-b or rack-c."""
    leader = 1 if p % 2 == 0 else 4
    return [leader, 5 - leader, (2, 3, 5, 6)[p % 4]]


def _isr(p: int, t: float) -> list[int]:
    reps = _replicas(p)
    return reps[:2] if OUTAGE[0] <= t < OUTAGE[1] else reps


def write(directory: Path) -> dict[str, int]:
    """Writes the ledger under ``directory``; returns the figures the reports must show."""
    directory.mkdir(parents=True, exist_ok=True)
    offsets = {(t, p): 0 for t, n in TOPICS.items() for p in range(n)}
    requests: list[dict[str, Any]] = []
    lost: list[tuple[str, int, int]] = []
    kept: list[tuple[str, int, int]] = []
    req = 0
    t = T0
    figures = {"acked_records": 0, "lost_records": 0, "refused": 0, "under_records": 0}
    while t < T0 + 600:
        for topic, count in TOPICS.items():
            req += 1
            parts: list[dict[str, Any]] = []
            for p in range(count):
                isr = _isr(p, t)
                racks = sorted({RACK[n] for n in isr})
                required = 2 if topic == "orders" else 1
                part = {"topic": topic, "partition": p, "records": RECORDS, "bytes": BYTES}
                if len(racks) < required:
                    parts.append({**part, "decision": "rejected", "reason": "NOT_ENOUGH_RACKS",
                                  "wire_error": 19})
                    figures["refused"] += 1
                    continue
                base = offsets[(topic, p)]
                offsets[(topic, p)] += RECORDS
                parts.append({**part, "decision": "forwarded", "wire_error": 0,
                              "base_offset": base})
                figures["acked_records"] += RECORDS
                if len(racks) < 2:
                    figures["under_records"] += RECORDS
                for o in range(base, base + RECORDS):
                    gone = topic == "drill" and p == 0 and len(racks) < 2
                    (lost if gone else kept).append((topic, p, o))
                if topic == "drill" and p == 0 and len(racks) < 2:
                    figures["lost_records"] += RECORDS
            requests.append(request_row(INSTANCE, RUN, req, t, _view(t), parts,
                                        client_id=f"{topic}-app",
                                        client_addr="10.0.0.5:40112", latency_ms=2.5))
        t += STEP_S
    snaps = _views()
    s = T0
    while s < T0 + 600:
        snaps.append({"kind": "tick", "ts": s, "instance": INSTANCE, "run": RUN,
                      "seq": _view(s), "rule_seq": 1, "interval_s": 10.0})
        s += 10
    write_tables(directory, "px-1-1", requests, snaps)
    dump = [{"topic": tp, "partition": p, "offset": o, "timestamp": 0, "key_hash": None}
            for tp, p, o in kept]
    (directory.parent / "offsets.jsonl").write_text(
        "".join(json.dumps(d) + "\n" for d in dump))
    figures["dump_offsets"] = len(kept)
    return figures
