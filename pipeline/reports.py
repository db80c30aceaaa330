"""The four reports over a ledger: durability, whatif, placement, audit-loss.

Definitions (the README states them too):
- a partition write is *acknowledged* when it was not rejected by the proxy
  and the code on the wire was 0 (the broker accepted it);
- its *rack count* is the number of distinct racks of the ISR the decision was
  made on (rows carry it whatever the topic's required racks);
- a produce *request* is one (instance, req) pair, so rows of several proxy
  instances never merge;
- from snapshots, each snapshot of a partition stands for the time until the
  next snapshot of that partition (from any instance), at most twice its own
  interval (a late snapshot still counts; a proxy that was down does not);
  the last one stands for nothing. Time is attributed to the hour
  the snapshot was taken in.

Invariants: malformed rows are excluded from every figure and counted in
every summary; no Python UDFs (the jobs run on executors without this
package); every figure is computed by Spark, only small result tables (and
chart series) are collected to the driver.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from pipeline.ledger_io import CORRUPT, Ledger, read_offsets


@dataclass
class Report:
    name: str
    tables: dict[str, DataFrame]
    summary: dict[str, Any]
    charts: list[tuple[str, list[tuple[float, float | None]], list[tuple[float, float | None]]]] = \
        field(default_factory=list)  # (title, series A, series B) of (time, share)
    notes: list[str] = field(default_factory=list)


def _sum_if(cond: Column, value: Column | None = None) -> Column:
    return F.coalesce(F.sum(F.when(cond, value if value is not None else F.lit(1))), F.lit(0))


def _share(num: Column, den: Column) -> Column:
    return F.when(den > 0, num / den)


def _hour() -> Column:
    return F.date_trunc("hour", F.timestamp_seconds(F.col("ts"))).alias("hour")


def _malformed_summary(ledger: Ledger) -> dict[str, Any]:
    bad_d = ledger.decisions.filter("malformed")
    bad_s = ledger.snapshots.filter("malformed")
    samples = [r[0] for r in bad_d.select(F.coalesce(F.col(CORRUPT), F.to_json(
        F.struct(*(c for c in ledger.decisions.columns if c not in (CORRUPT, "malformed"))))))
        .limit(5).collect()]
    return {
        "decision_files": ledger.decision_files,
        "snapshot_files": ledger.snapshot_files,
        "malformed_decision_rows": bad_d.count(),
        "malformed_snapshot_rows": bad_s.count(),
        "malformed_samples": [s[:200] for s in samples if s is not None],
    }


def produce_rows(ledger: Ledger) -> DataFrame:
    """Valid decision rows with ``hour``, ``acked`` and ``rack_count``."""
    return (ledger.decisions.filter(~F.col("malformed"))
            .withColumn("hour", _hour())
            .withColumn("acked", (F.col("decision") != "rejected")
                        & F.coalesce(F.col("wire_error") == 0, F.lit(False)))
            .withColumn("rack_count", F.size("isr_racks")))


def partition_snapshots(ledger: Ledger) -> DataFrame:
    """Valid partition snapshot rows with ``dur_s`` (the time each stands for)."""
    snaps = ledger.snapshots.filter(~F.col("malformed") & (F.col("kind") == "partition"))
    w = Window.partitionBy("topic", "partition").orderBy("ts", "instance", "snapshot")
    nxt = F.lead("ts").over(w)
    return (snaps.withColumn("hour", _hour())
            .withColumn("dur_s", F.when(nxt.isNull(), F.lit(0.0))
                        .otherwise(F.least(nxt - F.col("ts"), 2 * F.col("interval_s"))))
            .withColumn("rack_count", F.size("isr_racks"))
            .withColumn("replica_rack_count", F.size("replica_racks")))


def _produce_aggs(n: int) -> list[Column]:
    acked = F.col("acked")
    return [
        F.countDistinct("instance", "req").alias("produce_requests"),
        F.count(F.lit(1)).alias("partition_writes"),
        _sum_if(acked).alias("acked_writes"),
        _sum_if(acked, F.col("bytes")).alias("acked_bytes"),
        _sum_if(acked & (F.col("records") >= 0), F.col("records")).alias("acked_records"),
        _sum_if(acked & (F.col("rack_count") >= n), F.col("bytes")).alias("acked_bytes_ge_n"),
        _sum_if(F.col("decision") == "rejected").alias("rejected_writes"),
        _sum_if(F.col("decision") == "observed-would-reject").alias("observed_would_reject"),
        _sum_if((F.col("decision") != "rejected") & F.col("wire_error").isNotNull()
                & (F.col("wire_error") != 0)).alias("broker_errors"),
        _sum_if((F.col("decision") != "rejected") & F.col("wire_error").isNull())
        .alias("no_broker_answer"),
    ]


def _rack_time_aggs(n: int) -> list[Column]:
    rc = F.col("rack_count")
    return [
        F.sum("dur_s").alias("seconds_observed"),
        _sum_if(rc < n, F.col("dur_s")).alias("seconds_under"),
        _sum_if(rc == n, F.col("dur_s")).alias("seconds_at"),
        _sum_if(rc > n, F.col("dur_s")).alias("seconds_above"),
    ]


def durability(spark: SparkSession, ledger: Ledger, min_racks: int = 2) -> Report:
    rows = produce_rows(ledger)
    snaps = partition_snapshots(ledger)
    share = _share(F.col("acked_bytes_ge_n"), F.col("acked_bytes")).alias("share_bytes_ge_n")
    by_hour = (rows.groupBy("topic", "hour").agg(*_produce_aggs(min_racks))
               .select("*", share).orderBy("topic", "hour"))
    rejections = (rows.filter(F.col("decision") != "forwarded")
                  .groupBy("topic", "hour", "decision", "reason")
                  .agg(F.count(F.lit(1)).alias("partition_writes"),
                       F.coalesce(F.sum("bytes"), F.lit(0)).alias("bytes"))
                  .orderBy("topic", "hour", "decision", "reason"))
    rack_time_hour = (snaps.groupBy("topic", "hour").agg(
        *_rack_time_aggs(min_racks),
        F.countDistinct(F.when(F.col("rack_count") < min_racks, F.col("partition")))
        .alias("partitions_under")).orderBy("topic", "hour"))
    rack_time_partition = (snaps.groupBy("topic", "partition").agg(*_rack_time_aggs(min_racks))
                           .orderBy("topic", "partition"))
    overall_row = rows.agg(*_produce_aggs(min_racks)).select("*", share).first()
    rt = snaps.agg(*_rack_time_aggs(min_racks)).first()
    overall: dict[str, Any] = overall_row.asDict() if overall_row is not None else {}
    overall.update(rt.asDict() if rt is not None else {})
    reasons = {f"{r['decision']}:{r['reason']}": r["n"] for r in
               rows.filter(F.col("decision") != "forwarded")
               .groupBy("decision", "reason").agg(F.count(F.lit(1)).alias("n")).collect()}
    summary = {"min_racks": min_racks, **_clean(overall), "rejections_by_reason": reasons,
               "instances": sorted(r[0] for r in rows.select("instance").distinct().collect()),
               **_malformed_summary(ledger)}
    overall_df = spark.createDataFrame([(k, json.dumps(v, default=str)) for k, v in
                                        summary.items()], "key string, value string")
    return Report("durability", {
        "by_topic_hour": by_hour,
        "rejections": rejections,
        "rack_time_by_topic_hour": rack_time_hour,
        "rack_time_by_partition": rack_time_partition,
        "overall": overall_df,
    }, summary, [coverage_chart(rows, snaps, min_racks)])


def whatif(spark: SparkSession, ledger: Ledger, min_racks: Sequence[int] = (2, 3)) -> Report:
    acked = produce_rows(ledger).filter("acked")
    ns = spark.createDataFrame([(int(n),) for n in min_racks], "min_racks int")
    crossed = acked.crossJoin(F.broadcast(ns)).withColumn(
        "would_reject", F.col("rack_count") < F.col("min_racks"))
    wr = F.col("would_reject")
    aggs = [
        F.countDistinct("instance", "req").alias("acked_requests"),
        F.count(F.lit(1)).alias("acked_writes"),
        F.coalesce(F.sum("bytes"), F.lit(0)).alias("acked_bytes"),
        F.countDistinct(F.when(wr, F.struct("instance", "req"))).alias("would_reject_requests"),
        _sum_if(wr).alias("would_reject_writes"),
        _sum_if(wr, F.col("bytes")).alias("would_reject_bytes"),
        _sum_if(wr & (F.col("records") >= 0), F.col("records")).alias("would_reject_records"),
    ]
    share = _share(F.col("would_reject_bytes"), F.col("acked_bytes")).alias(
        "share_bytes_rejected")
    by_hour = (crossed.groupBy("min_racks", "topic", "hour").agg(*aggs).select("*", share)
               .orderBy("min_racks", "topic", "hour"))
    overall = (crossed.groupBy("min_racks").agg(*aggs).select("*", share)
               .orderBy("min_racks"))
    per_n = {str(r["min_racks"]): _clean(r.asDict()) for r in overall.collect()}
    for n in min_racks:  # an empty ledger still answers every N
        per_n.setdefault(str(n), {"min_racks": n, "acked_requests": 0, "acked_writes": 0,
                                  "acked_bytes": 0, "would_reject_requests": 0,
                                  "would_reject_writes": 0, "would_reject_bytes": 0,
                                  "would_reject_records": 0, "share_bytes_rejected": None})
    summary = {"min_racks": list(min_racks), "by_min_racks": per_n, **_malformed_summary(ledger)}
    return Report("whatif", {"by_topic_hour": by_hour, "overall": overall}, summary)


def placement(spark: SparkSession, ledger: Ledger, min_racks: int = 2) -> Report:
    snaps = partition_snapshots(ledger).withColumn(
        "ok", F.col("replica_rack_count") >= min_racks)
    part = Window.partitionBy("topic", "partition")
    latest = Window.partitionBy("topic", "partition").orderBy(F.desc("ts"), F.desc("instance"))
    marked = (snaps.withColumn("last_ok_ts", F.max(F.when(F.col("ok"), F.col("ts"))).over(part))
              .withColumn("ever_bad", F.max(F.when(~F.col("ok"), 1).otherwise(0)).over(part))
              .withColumn("since_ts", F.min(F.when(
                  ~F.col("ok") & (F.col("last_ok_ts").isNull()
                                  | (F.col("ts") > F.col("last_ok_ts"))), F.col("ts"))).over(part))
              .withColumn("rn", F.row_number().over(latest)))
    last = marked.filter(F.col("rn") == 1)
    bad = (last.filter(~F.col("ok"))
           .select("topic", "partition", "replicas", "replica_racks",
                   F.col("replica_rack_count").alias("rack_count"),
                   F.timestamp_seconds("since_ts").alias("since"),
                   F.timestamp_seconds("ts").alias("last_seen"),
                   (F.col("ts") - F.col("since_ts")).alias("seconds_since"))
           .orderBy("topic", "partition"))
    counts = last.agg(F.count(F.lit(1)).alias("partitions"),
                      _sum_if(~F.col("ok")).alias("under_now"),
                      _sum_if(F.col("ever_bad") == 1).alias("ever_under")).first()
    summary = {"min_racks": min_racks, **_clean(counts.asDict() if counts else {}),
               **_malformed_summary(ledger)}
    return Report("placement", {"under_replicated_racks": bad}, summary)


def audit_loss(spark: SparkSession, ledger: Ledger, offsets_path: str,
               topic: str | None = None) -> Report:
    dump = read_offsets(spark, offsets_path).select("topic", "partition", "offset").distinct()
    topics = [r[0] for r in dump.select("topic").distinct().collect()]
    if topic is not None:
        topics = [topic]
        dump = dump.filter(F.col("topic") == topic)
    rows = produce_rows(ledger).filter(F.col("acked") & F.col("topic").isin(*topics)
                                       if topics else F.lit(False))
    countable = rows.filter((F.col("base_offset") >= 0) & (F.col("records") > 0))
    unverifiable = rows.filter((F.col("base_offset") < 0) | F.col("base_offset").isNull()
                               | (F.col("records") < 0)).count()
    acked_offsets = countable.select(
        "topic", "partition", "instance", "req", "client_id", "ts",
        F.explode(F.sequence(F.col("base_offset"),
                             F.col("base_offset") + F.col("records") - 1)).alias("offset"))
    missing = (acked_offsets.join(dump, ["topic", "partition", "offset"], "left_anti")
               .withColumn("acked_at", F.timestamp_seconds("ts")).drop("ts")
               .orderBy("topic", "partition", "offset"))
    per_partition = (acked_offsets.join(
        dump.withColumn("found", F.lit(True)), ["topic", "partition", "offset"], "left")
        .groupBy("topic", "partition")
        .agg(F.countDistinct("offset").alias("acked_offsets"),
             F.countDistinct(F.when(F.col("found").isNull(), F.col("offset")))
             .alias("missing_offsets"))
        .orderBy("topic", "partition"))
    totals = per_partition.agg(
        F.coalesce(F.sum("acked_offsets"), F.lit(0)).alias("acked_offsets"),
        F.coalesce(F.sum("missing_offsets"), F.lit(0)).alias("missing_offsets")).first()
    summary = {"topics": sorted(topics), **_clean(totals.asDict() if totals else {}),
               "dump_offsets": dump.count(), "unverifiable_acked_writes": unverifiable,
               **_malformed_summary(ledger)}
    notes = ["offsets below a partition's log start (deleted by retention) count as missing: "
             "dump the topic before retention removes the outage window"]
    return Report("audit-loss", {"missing": missing, "by_partition": per_partition}, summary,
                  notes=notes)


def coverage_chart(
    rows: DataFrame, snaps: DataFrame, n: int
) -> tuple[str, list[tuple[float, float | None]], list[tuple[float, float | None]]]:
    """Per time bucket: share of partition-time whose ISR spanned >= n racks (snapshots),
    and share of acknowledged bytes whose ISR did (ledger). At most ~120 buckets."""
    bounds = [r for r in (
        snaps.agg(F.min("ts"), F.max("ts")).first(), rows.agg(F.min("ts"), F.max("ts")).first())
        if r is not None and r[0] is not None]
    if not bounds:
        return (f"rack coverage (>= {n} racks)", [], [])
    lo = min(b[0] for b in bounds)
    hi = max(b[1] for b in bounds)
    step = _nice_step((hi - lo) / 120)
    bucket = (F.floor((F.col("ts") - lo) / step) * step + lo).alias("bucket")
    time_share = (snaps.groupBy(bucket).agg(
        _share(_sum_if(F.col("rack_count") >= n, F.col("dur_s")), F.sum("dur_s")).alias("s"))
        .orderBy("bucket").collect())
    byte_share = (rows.filter("acked").groupBy(bucket).agg(
        _share(_sum_if(F.col("rack_count") >= n, F.col("bytes")), F.sum("bytes")).alias("s"))
        .orderBy("bucket").collect())
    return (f"rack coverage: ISR spanning >= {n} racks",
            [(float(r[0]), r[1]) for r in time_share],
            [(float(r[0]), r[1]) for r in byte_share])


def _nice_step(raw: float) -> float:
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400):
        if step >= raw:
            return float(step)
    return float(86400 * math.ceil(raw / 86400))


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out
