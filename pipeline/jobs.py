"""Entry point of the reports: ``rackguard report ...`` and ``spark-submit pipeline/jobs.py ...``.

    rackguard report durability --ledger DIR [--out DIR] [--master URL] [--min-racks N]
    rackguard report whatif     --ledger DIR [--min-racks 2,3]
    rackguard report placement  --ledger DIR [--min-racks N]
    rackguard report audit-loss --ledger DIR --offsets DUMP [--topic T]
    spark-submit pipeline/jobs.py durability --ledger DIR ...

Writes each table (Parquet, or CSV with ``--format csv``), ``summary.json``
and ``report.html`` under ``--out``, and prints a summary.

Invariant: the same code runs under ``rackguard report`` (local mode unless
``--master``) and spark-submit (whose master wins when ``--master`` is not
given); a missing Java or pyspark is reported in one line and exit code 2;
malformed ledger rows are counted in every summary, never silently dropped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script (spark-submit pipeline/jobs.py): the
    # installed pipeline is used; the script's own folder must not shadow modules
    _here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != Path(_here)]

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipeline.reports import Report

REPORTS = ("durability", "whatif", "placement", "audit-loss")
HTML_ROWS = 200


def _racks_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N[,N...], got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"rack counts must be >= 1, got {text!r}")
    return values


def build_parser(prog: str = "rackguard report", default_master: str | None = None
                 ) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Reports over rackguard's decision ledger (PySpark).")
    sub = parser.add_subparsers(dest="report", metavar="REPORT", required=True)
    helps = {
        "durability": "acknowledged bytes by ISR rack coverage, rejections, time under/at "
                      "the minimum, per topic and hour",
        "whatif": "what min.insync.racks = N would have rejected among acknowledged produces",
        "placement": "partitions whose replicas span fewer than N racks, and since when",
        "audit-loss": "acknowledged offsets missing from a dump of the topic",
    }
    for name in REPORTS:
        p = sub.add_parser(name, help=helps[name], description=helps[name])
        p.add_argument("--ledger", action="append", required=True, metavar="PATH",
                       help="ledger directory (repeatable; several proxies' files may share one)")
        p.add_argument("--out", metavar="PATH", default=None,
                       help=f"output directory (default ./rackguard-{name})")
        p.add_argument("--master", metavar="URL", default=default_master,
                       help="Spark master (default: "
                       + (default_master or "spark-submit's, else local[*]") + ")")
        p.add_argument("--format", choices=("parquet", "csv"), default="parquet",
                       help="table format (default parquet)")
        if name == "whatif":
            p.add_argument("--min-racks", type=_racks_list, default=[2, 3], metavar="N[,N]",
                           help="rack counts to evaluate (default 2,3)")
        elif name != "audit-loss":
            p.add_argument("--min-racks", type=int, default=2, metavar="N",
                           help="rack count N (default 2)")
        if name == "audit-loss":
            p.add_argument("--offsets", required=True, metavar="PATH",
                           help="dump written by rackguard dump-offsets (Parquet or .jsonl)")
            p.add_argument("--topic", default=None, help="audit only this topic")
    return parser


def make_report(spark: SparkSession, args: argparse.Namespace) -> Report:
    from pipeline.ledger_io import read_ledger
    from pipeline.reports import audit_loss, durability, placement, whatif

    ledger = read_ledger(spark, args.ledger)
    if args.report == "durability":
        return durability(spark, ledger, args.min_racks)
    if args.report == "whatif":
        return whatif(spark, ledger, args.min_racks)
    if args.report == "placement":
        return placement(spark, ledger, args.min_racks)
    return audit_loss(spark, ledger, args.offsets, args.topic)


def _for_csv(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, StructType

    cols = []
    for f in df.schema.fields:
        if isinstance(f.dataType, ArrayType):
            cols.append(F.concat_ws(" ", F.col(f.name).cast("array<string>")).alias(f.name))
        elif isinstance(f.dataType, StructType):
            cols.append(F.to_json(F.col(f.name)).alias(f.name))
        else:
            cols.append(F.col(f.name))
    return df.select(*cols)


def write_report(report: Report, out: Path, fmt: str) -> dict[str, Any]:
    """Tables, summary.json, the charts and report.html under ``out``; returns the table
    row counts."""
    from pipeline.html_report import render

    out.mkdir(parents=True, exist_ok=True)
    shown: dict[str, tuple[list[str], list[list[Any]], int]] = {}
    counts: dict[str, Any] = {}
    for name, df in report.tables.items():
        df = df.cache()
        total = df.count()
        counts[name] = total
        writer = (_for_csv(df) if fmt == "csv" else df).coalesce(1).write.mode("overwrite")
        if fmt == "csv":
            writer.option("header", True).csv(str(out / name))
        else:
            writer.parquet(str(out / name))
        rows = [[_plain(v) for v in r] for r in df.limit(HTML_ROWS).collect()]
        shown[name] = (df.columns, rows, total)
        df.unpersist()
    verdict = {"findings": list(report.verdict.findings), "advice": list(report.verdict.advice),
               "at_risk": report.verdict.at_risk}
    (out / "summary.json").write_text(
        json.dumps({"verdict": verdict, **report.summary}, indent=2, default=str) + "\n")
    (out / "charts").mkdir(exist_ok=True)
    for chart in report.charts:
        (out / "charts" / f"{chart.id}.svg").write_text(chart.svg)
    (out / "report.html").write_text(render(report.name, report.verdict, report.summary,
                                            shown, report.charts, report.notes))
    return counts


def _plain(v: Any) -> Any:
    if hasattr(v, "asDict"):
        return v.asDict()
    return v


def print_summary(report: Report, out: Path, counts: dict[str, Any]) -> None:
    """Key figures, tables and notes; then the verdict and the page's path, last."""
    from pipeline.labels import label, table_title, value_text

    s = report.summary
    print(f"rackguard {report.name} report")
    skip = {"malformed_samples", "decision_files", "snapshot_files", "by_min_racks"}
    for k, v in s.items():
        if k not in skip:
            print(f"  {label(k)}: {value_text(k, v)}")
    bad = s.get("malformed_decision_rows", 0) + s.get("malformed_snapshot_rows", 0)
    if bad:
        print(f"  WARNING: {bad} malformed ledger row(s) excluded, e.g. "
              f"{s.get('malformed_samples', [])[:1]}")
    print("  Tables: " + ", ".join(f"{table_title(k)} ({v:,} rows)" for k, v in counts.items()))
    for note in report.notes:
        print(f"  Note: {note}")
    print("Verdict:")
    for line in report.verdict.findings:
        print(f"  {line}")
    print("What to do:")
    for line in report.verdict.advice:
        print(f"  - {line}")
    print(f"Report: {out / 'report.html'}")


def run(argv: list[str], spark: SparkSession | None = None, prog: str = "rackguard report",
        default_master: str | None = None) -> int:
    from pipeline.progress import Progress

    args = build_parser(prog, default_master).parse_args(argv)
    out = Path(args.out or f"rackguard-{args.report}")
    progress = Progress(prog)
    from pipeline.session import missing_requirement, session_for

    problem = missing_requirement() if spark is None else None
    if problem is not None:
        print(f"{prog}: {problem}", file=sys.stderr)
        return 2
    try:
        with session_for(spark, args.master, progress) as session:
            with progress.step(f"reading the ledger and computing the {args.report} report",
                               session):
                report = make_report(session, args)
            with progress.step(f"writing the tables and the page to {out}", session):
                counts = write_report(report, out, args.format)
    except FileNotFoundError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    print_summary(report, out, counts)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv, prog="jobs.py")


if __name__ == "__main__":
    sys.exit(main())
