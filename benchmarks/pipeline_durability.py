"""Time ``report durability`` over a generated ledger of N rows.

    .venv/bin/python benchmarks/pipeline_durability.py --rows 10000000 [--master local[*]]

Writes N decision rows (4 instances, 50 topics x 12 partitions, 24 hours, a
mix of forwarded / rejected / observed rows and rack counts) as schema v2
lines of 1 to 50 partitions each (mostly 10 to 50), plus snapshots every 30 s
of the same period, into a temporary ledger directory, then times the
durability report (read, aggregate, write the tables and the HTML) in local
mode. Prints one line per figure. The figure is reported, not asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.jobs import make_report, write_report  # noqa: E402
from pipeline.session import build_session  # noqa: E402

T0 = 1_700_000_000.0
RACKS = (["rack-a"], ["rack-a", "rack-b"], ["rack-a", "rack-b", "rack-c"])
ISR_JSON = {len(r): (json.dumps(list(range(1, len(r) + 1)), separators=(",", ":")),
                     json.dumps(r, separators=(",", ":"))) for r in RACKS}
HEAD = ('{"v":2,"kind":"produce","instance":"proxy-%d","ts":%.6f,"req":%d,'
        '"client_id":"app-%d","client_addr":"10.0.0.%d:4000%d","latency_ms":%.3f,'
        '"partitions":[')
PARTITION = '["topic-%d",%d,%d,%s,%s,2,2,"%s","%s",%s,%s,%s,%d,%d,%.1f]'


def partition_array(rnd: random.Random, k: int) -> str:
    """Row ``k`` as a v2 partition array (the elements of ``PARTITION_FIELDS``)."""
    racks = rnd.choices((1, 2, 3), (5, 30, 65))[0]
    roll = rnd.random()
    wire, broker, offset = "0", "0", str(k)
    if racks == 1 and roll < 0.8:
        decision, reason, wire, broker, offset = ("rejected", "NOT_ENOUGH_RACKS", "19", "null",
                                                  "null")
    elif racks == 1:
        decision, reason = "observed-would-reject", "NOT_ENOUGH_RACKS"
    else:
        decision, reason = "forwarded", ""
    isr, isr_racks = ISR_JSON[racks]
    return PARTITION % (k % 50, k % 12, 1 + k % 6, isr, isr_racks, decision, reason, wire,
                        broker, offset, 1 + k % 10, 200 + k % 4000, rnd.random() * 2000)


def generate(directory: Path, rows: int, seed: int = 7) -> int:
    """Write ``rows`` decision rows (and snapshots); returns the bytes written."""
    rnd = random.Random(seed)
    instances = 4
    per_file = 1_000_000
    size = 0
    span = 24 * 3600.0
    line_no = 0
    for file_no, written in enumerate(range(0, rows, per_file)):
        end = min(written + per_file, rows)
        lines = []
        first = written
        while first < end:
            n = rnd.randint(10, 50) if rnd.random() < 0.8 else rnd.randint(1, 9)
            stop = min(first + n, end)
            lines.append(HEAD % (line_no % instances, T0 + span * first / rows,
                                 line_no // instances, line_no % 20, line_no % 250, line_no % 10,
                                 1 + rnd.random() * 5)
                         + ",".join(partition_array(rnd, k) for k in range(first, stop))
                         + "]}\n")
            line_no += 1
            first = stop
        text = "".join(lines)
        (directory / f"decisions-gen-{file_no:04d}.jsonl").write_text(text)
        size += len(text)
    snaps = []
    for s in range(int(span // 30)):
        for t in range(50):
            for p in range(12):
                snap_racks = RACKS[0] if (s + t + p) % 40 == 0 else RACKS[2]
                snaps.append(json.dumps({
                    "v": 1, "kind": "partition", "ts": T0 + 30 * s, "instance": "proxy-0",
                    "snapshot": s, "interval_s": 30.0, "topic": f"topic-{t}", "partition": p,
                    "leader": 1, "replicas": [1, 2, 3], "replica_racks": RACKS[2],
                    "isr": [1, 2, 3], "isr_racks": snap_racks, "min_isr": 2, "required_racks": 2,
                    "metadata_age_ms": 100.0}) + "\n")
    text = "".join(snaps)
    (directory / "snapshots-gen-0000.jsonl").write_text(text)
    return size + len(text)


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
        print(f"generated {args.rows:,} rows ({size / 1e9:.2f} GB) in "
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
        print(f"rows read {s['partition_writes']:,} (+{s['malformed_decision_rows']:,} "
              f"malformed), acked bytes {s['acked_bytes']:,}, share >= 2 racks "
              f"{s['share_bytes_ge_n']:.4f}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
