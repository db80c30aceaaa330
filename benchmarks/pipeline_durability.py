"""Time ``report durability`` over a generated ledger of N rows.

    .venv/bin/python benchmarks/pipeline_durability.py --rows 10000000 [--master local[*]]

Writes N decision rows (4 instances, 50 topics x 12 partitions, 24 hours, a
mix of forwarded / rejected / observed rows and rack counts) plus snapshots
every 30 s of the same period into a temporary ledger directory, then times
the durability report (read, aggregate, write the tables and the HTML) in
local mode. Prints one line per figure. The figure is reported, not asserted.
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


def generate(directory: Path, rows: int, seed: int = 7) -> int:
    """Write ``rows`` decision rows (and snapshots); returns the bytes written."""
    rnd = random.Random(seed)
    instances = 4
    per_file = 1_000_000
    size = 0
    span = 24 * 3600.0
    template = ('{"v":1,"kind":"produce","ts":%.3f,"instance":"proxy-%d","req":%d,'
                '"client_id":"app-%d","client_addr":"10.0.0.%d:4000%d","topic":"topic-%d",'
                '"partition":%d,"leader":%d,"isr":%s,"isr_racks":%s,"required_racks":2,'
                '"min_isr":2,"decision":"%s","reason":"%s","wire_error":%s,"broker_error":%s,'
                '"base_offset":%s,"records":%d,"bytes":%d,"latency_ms":%.3f,'
                '"metadata_age_ms":%.1f}\n')
    isr_json = {len(r): (json.dumps(list(range(1, len(r) + 1))), json.dumps(r)) for r in RACKS}
    written = 0
    file_no = 0
    while written < rows:
        n = min(per_file, rows - written)
        lines = []
        for i in range(n):
            k = written + i
            racks = rnd.choices((1, 2, 3), (5, 30, 65))[0]
            roll = rnd.random()
            wire, broker, offset = "0", "0", str(k)
            if racks == 1 and roll < 0.8:
                decision, reason, wire, broker, offset = ("rejected", "NOT_ENOUGH_RACKS", "19",
                                                          "null", "null")
            elif racks == 1:
                decision, reason = "observed-would-reject", "NOT_ENOUGH_RACKS"
            else:
                decision, reason = "forwarded", ""
            isr, isr_racks = isr_json[racks]
            lines.append(template % (
                T0 + span * k / rows, k % instances, k // instances, k % 20, k % 250, k % 10,
                k % 50, k % 12, 1 + k % 6, isr, isr_racks, decision, reason, wire, broker,
                offset, 1 + k % 10, 200 + k % 4000, 1 + rnd.random() * 5, rnd.random() * 2000))
        text = "".join(lines)
        (directory / f"decisions-gen-{file_no:04d}.jsonl").write_text(text)
        size += len(text)
        written += n
        file_no += 1
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
        print(f"acked bytes {report.summary['acked_bytes']:,}, share >= 2 racks "
              f"{report.summary['share_bytes_ge_n']:.4f}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
