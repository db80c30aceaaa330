"""``rackguard audit``: the loss audit in one command.

    rackguard audit --bootstrap HOST:PORT --ledger DIR [--topic T] [--out DIR]

Reads the ledger, dumps every offset of the topics it acknowledged writes to
(or of ``--topic``) from the cluster into ``OUT/offsets.parquet`` (JSON Lines,
``offsets.jsonl``, without pyarrow), and runs ``report audit-loss`` over both:
the same tables, page and verdict, and the dump kept beside them.

Invariant: the topics are dumped after the ledger is read, so every offset
the ledger saw acknowledged had been written before the dump began; a topic
that cannot be read fails the command (exit 1) naming it, and nothing is
reported as missing for it.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.dump_offsets import dump_topics, write_rows
from pipeline.progress import Progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROG = "rackguard audit"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Find acknowledged records missing from the cluster: dump "
        "the topics' offsets and run the audit-loss report over the ledger, in one command.")
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT[,...]",
                        help="the cluster (or a rackguard in front of it) to read the topics "
                        "from")
    parser.add_argument("--ledger", action="append", required=True, metavar="PATH",
                        help="ledger directory (repeatable)")
    parser.add_argument("--topic", default=None,
                        help="audit only this topic (default: every topic the ledger "
                        "acknowledged writes to)")
    parser.add_argument("--out", metavar="PATH", default="rackguard-audit-loss",
                        help="output directory (default ./rackguard-audit-loss)")
    parser.add_argument("--master", metavar="URL", default="local[*]",
                        help="Spark master (default local[*])")
    parser.add_argument("--format", choices=("parquet", "csv"), default="parquet",
                        help="table format (default parquet)")
    parser.add_argument("--timeout-s", type=float, default=120.0, metavar="S",
                        help="time allowed to read each topic (default 120)")
    return parser


def main(argv: list[str] | None = None, spark: SparkSession | None = None) -> int:
    from pipeline.session import missing_requirement, session_for

    args = build_parser().parse_args(argv)
    out = Path(args.out)
    problem = missing_requirement() if spark is None else None
    if problem is not None:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return 2
    progress = Progress(PROG)
    from pipeline.jobs import print_summary, write_report
    from pipeline.ledger_io import read_ledger
    from pipeline.reports import audit_loss, produce_rows

    try:
        with session_for(spark, args.master, progress) as session:
            with progress.step("reading the ledger", session):
                ledger = read_ledger(session, args.ledger)
                topics = [args.topic] if args.topic else sorted(
                    r[0] for r in produce_rows(ledger).filter("acked").select("topic")
                    .distinct().collect())
            progress.say(f"topics to audit: {', '.join(topics) or 'none'}")
            try:
                rows = dump_topics(args.bootstrap, topics, args.timeout_s, progress)
            except Exception as exc:  # noqa: BLE001 - one line for any failure
                print(f"{PROG}: reading the topics failed: {exc}", file=sys.stderr)
                return 1
            has_parquet = importlib.util.find_spec("pyarrow") is not None
            dump = write_rows(rows, out / ("offsets.parquet" if has_parquet
                                           else "offsets.jsonl"))
            progress.say(f"{len(rows):,} offsets dumped to {dump}")
            with progress.step("comparing the acknowledged offsets with the dump", session):
                report = audit_loss(session, ledger, str(dump), args.topic)
                counts = write_report(report, out, args.format)
    except FileNotFoundError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    print_summary(report, out, counts)
    return 0
