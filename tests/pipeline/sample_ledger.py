"""A ledger a person would recognise: ten minutes of two topics through a lost zone.

Brokers 1-6 in rack-a, rack-b, rack-c (two each); one proxy instance writing
schema 2 lines and a snapshot every 10 s. ``orders`` (6 partitions, enforced
with min.insync.racks=2) and ``drill`` (3 partitions, not enforced). From
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

T0 = 1_763_944_200.0  # 2025-11-24 00:30:00 UTC
RACK = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a", 5: "rack-b", 6: "rack-c"}
TOPICS = {"orders": 6, "drill": 3}
OUTAGE = (T0 + 240, T0 + 300)
STEP_S = 0.5
RECORDS = 5
BYTES = 700

LINE_FIELDS = ("topic", "partition", "leader", "isr", "isr_racks", "required_racks", "min_isr",
               "decision", "reason", "wire_error", "broker_error", "base_offset", "records",
               "bytes", "metadata_age_ms")


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
    lines: list[str] = []
    lost: list[tuple[str, int, int]] = []
    kept: list[tuple[str, int, int]] = []
    req = 0
    t = T0
    figures = {"acked_records": 0, "lost_records": 0, "refused": 0, "under_records": 0}
    while t < T0 + 600:
        for topic, count in TOPICS.items():
            req += 1
            parts = []
            for p in range(count):
                isr = _isr(p, t)
                racks = sorted({RACK[n] for n in isr})
                required = 2 if topic == "orders" else 1
                if len(racks) < required:
                    parts.append([topic, p, isr[0], isr, racks, required, 2, "rejected",
                                  "NOT_ENOUGH_RACKS", 19, None, None, RECORDS, BYTES, 120.0])
                    figures["refused"] += 1
                    continue
                base = offsets[(topic, p)]
                offsets[(topic, p)] += RECORDS
                parts.append([topic, p, isr[0], isr, racks, required, 2, "forwarded", "", 0, 0,
                              base, RECORDS, BYTES, 120.0])
                figures["acked_records"] += RECORDS
                if len(racks) < 2:
                    figures["under_records"] += RECORDS
                for o in range(base, base + RECORDS):
                    gone = topic == "drill" and p == 0 and len(racks) < 2
                    (lost if gone else kept).append((topic, p, o))
                if topic == "drill" and p == 0 and len(racks) < 2:
                    figures["lost_records"] += RECORDS
            lines.append(json.dumps({"v": 2, "kind": "produce", "instance": "px-1", "ts": t,
                                     "req": req, "client_id": f"{topic}-app",
                                     "client_addr": "10.0.0.5:40112", "latency_ms": 2.5,
                                     "partitions": parts}))
        t += STEP_S
    (directory / "decisions-px-1-1.jsonl").write_text("\n".join(lines) + "\n")
    snaps = []
    s = T0
    n = 0
    while s < T0 + 600:
        n += 1
        for topic, count in TOPICS.items():
            for p in range(count):
                isr = _isr(p, s)
                reps = _replicas(p)
                snaps.append(json.dumps({
                    "v": 1, "kind": "partition", "ts": s, "instance": "px-1", "snapshot": n,
                    "interval_s": 10.0, "topic": topic, "partition": p, "leader": isr[0],
                    "replicas": reps, "replica_racks": sorted({RACK[r] for r in reps}),
                    "isr": isr, "isr_racks": sorted({RACK[r] for r in isr}), "min_isr": 2,
                    "required_racks": 2 if topic == "orders" else 1, "metadata_age_ms": 80.0}))
        s += 10
    (directory / "snapshots-px-1-1.jsonl").write_text("\n".join(snaps) + "\n")
    dump = [{"topic": tp, "partition": p, "offset": o, "timestamp": 0, "key_hash": None}
            for tp, p, o in kept]
    (directory.parent / "offsets.jsonl").write_text(
        "".join(json.dumps(d) + "\n" for d in dump))
    figures["dump_offsets"] = len(kept)
    return figures
