"""Time ``report durability`` over a generated ledger of N partition-writes.

    .venv/bin/python benchmarks/pipeline_durability.py --rows 10000000 [--master local[*]]

Writes N partition-writes (4 instances, 50 topics x 12 partitions, 24 hours, a
mix of forwarded / rejected / observed rows and rack counts) as schema 3 decision
files (with the broker's answers as bytes, as the proxy writes them), requests of
1 to 50 partitions each (mostly 10 to 50), each naming one of
48 views per instance (one every 30 minutes, each with its own ISRs), plus the
views, the rule and a tick every 30 s of the same period (proxy-0's), into a
temporary ledger directory; then times the durability report (read, join by
sequence number, aggregate, write the tables and the HTML) in local mode. Prints
one line per figure. The figure is reported, not asserted.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from pipeline.jobs import make_report, write_report  # noqa: E402
from pipeline.session import build_session  # noqa: E402
from protocol.produce_response import (  # noqa: E402
    PartitionResult,
    TopicResult,
    build_produce_response,
)
from proxy.ledger.tables import DECISION_SCHEMA, SNAPSHOT_SCHEMA  # noqa: E402

T0 = 1_700_000_000.0
SPAN = 24 * 3600.0
INSTANCES = 4
TOPICS, PARTITIONS, VIEWS = 50, 12, 48
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a", 5: "rack-b", 6: "rack-c"}


def isr_racks(view: int, topic: int, partition: int) -> int:
    """The rack count of a partition's ISR in a view: 5 % one, 30 % two, 65 % three."""
    roll = random.Random(view * 10_000 + topic * 100 + partition).random()
    return 1 if roll < 0.05 else 2 if roll < 0.35 else 3


def views(instance: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"kind": "brokers", "ts": T0, "instance": f"proxy-{instance}", "run": 1, "seq": 1,
         "nodes": list(RACKS), "racks": list(RACKS.values()), "live": [True] * 6},
        {"kind": "rule", "ts": T0, "instance": f"proxy-{instance}", "run": 1, "seq": 1,
         "default_min_racks": 2, "rule_topics": [], "rule_topic_racks": [],
         "rule_prefixes": [], "rule_prefix_racks": [], "observe": False,
         "dedicated_code": None}]
    for v in range(1, VIEWS + 1):
        for t in range(TOPICS):
            isr = [[1, 2, 3][:isr_racks(v, t, p)] for p in range(PARTITIONS)]
            rows.append({"kind": "topic", "ts": T0 + SPAN * (v - 1) / VIEWS,
                         "instance": f"proxy-{instance}", "run": 1, "seq": v,
                         "topic": f"topic-{t}", "min_isr": 2,
                         "partitions": list(range(PARTITIONS)), "leaders": [1] * PARTITIONS,
                         "replicas": [[1, 2, 3]] * PARTITIONS, "isr": isr})
    return rows


def generate(directory: Path, rows: int, seed: int = 7) -> int:
    """Write ``rows`` partition-writes (and the views and ticks); returns the bytes written."""
    rnd = random.Random(seed)
    per_file = 1_000_000
    req = 0
    for file_no, written in enumerate(range(0, rows, per_file)):
        end = min(written + per_file, rows)
        requests: list[dict[str, Any]] = []
        first = written
        while first < end:
            n = rnd.randint(10, 50) if rnd.random() < 0.8 else rnd.randint(1, 9)
            stop = min(first + n, end)
            instance = req % INSTANCES
            ts = T0 + SPAN * first / rows
            view = 1 + int((ts - T0) / SPAN * VIEWS)
            topic = rnd.randrange(TOPICS)
            parts = [(k % PARTITIONS) for k in range(first, stop)]
            np_index, np_decision, np_code = [], [], []
            forwarded: list[PartitionResult] = []
            for i, p in enumerate(parts):
                rejected = False
                if isr_racks(view, topic, p) == 1:
                    rejected = rnd.random() < 0.8
                    np_index.append(i)
                    np_decision.append("rejected" if rejected else "observed-would-reject")
                    np_code.append(19 if rejected else None)
                if not rejected:
                    forwarded.append(PartitionResult(p, 0, first + i))
            # the broker's answer as the proxy keeps it (the report reads it)
            answer = build_produce_response(9, req, (TopicResult(f"topic-{topic}", tuple(
                forwarded)),)) if forwarded else None
            requests.append({
                "ts": ts, "instance": f"proxy-{instance}", "run": 1, "req": req // INSTANCES,
                "client_id": f"app-{req % 20}", "client_addr": f"10.0.0.{req % 250}:4000",
                "api_version": 9, "view_seq": view, "rule_seq": 1,
                "latency_ms": 1 + rnd.random() * 5, "topics": [f"topic-{topic}"],
                "topic_no": [0] * len(parts), "partition": parts,
                "records": [1 + k % 10 for k in range(first, stop)],
                "bytes": [200 + k % 4000 for k in range(first, stop)], "answer": answer,
                "np_index": np_index or None, "np_decision": np_decision or None,
                "np_reason": ["NOT_ENOUGH_RACKS"] * len(np_index) or None,
                "np_code": np_code or None})
            req += 1
            first = stop
        pq.write_table(pa.Table.from_pylist(requests, schema=DECISION_SCHEMA),
                       str(directory / f"decisions-gen-20231114T221320-1-{file_no:06d}.parquet"),
                       compression="zstd")
    snaps = [r for i in range(INSTANCES) for r in views(i)]
    snaps += [{"kind": "tick", "ts": T0 + 30 * s, "instance": "proxy-0", "run": 1,
               "seq": 1 + int(30 * s / SPAN * VIEWS), "rule_seq": 1, "interval_s": 30.0}
              for s in range(int(SPAN // 30))]
    pq.write_table(pa.Table.from_pylist(snaps, schema=SNAPSHOT_SCHEMA),
                   str(directory / "snapshots-gen-20231114T221320-1-000000.parquet"),
                   compression="zstd")
    return sum(p.stat().st_size for p in directory.iterdir())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it")
    args = parser.parse_args(argv)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rg-ledger-"))
    ledger = root / "ledger"
    ledger.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        size = generate(ledger, args.rows)
        print(f"generated {args.rows:,} rows ({size / 1e6:.1f} MB of Parquet) in "
              f"{time.perf_counter() - start:.1f} s")
        spark = build_session(args.master)
        start = time.perf_counter()
        ns = argparse.Namespace(report="durability", ledger=[str(ledger)], min_racks=2)
        report = make_report(spark, ns)
        counts = write_report(report, root / "out", "parquet")
        took = time.perf_counter() - start
        spark.stop()
        print(f"durability over {args.rows:,} rows on {args.master}: {took:.1f} s "
              f"({args.rows / took:,.0f} rows/s); tables {counts}")
        s = report.summary
        print(f"rows read {s['partition_writes']:,}, acked bytes {s['acked_bytes']:,}, "
              f"share >= 2 racks {s['share_bytes_ge_n']:.4f}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
