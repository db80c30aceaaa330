"""The four reports over a ledger: durability, whatif, placement, audit-loss.

Definitions (docs/ledger-and-reports.md states them too):
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

from pipeline import charts, coverage, verdicts
from pipeline.charts import Chart
from pipeline.labels import human_bytes, percent
from pipeline.ledger_io import CORRUPT, Ledger, read_offsets
from pipeline.verdicts import Verdict


@dataclass
class Report:
    name: str
    tables: dict[str, DataFrame]
    summary: dict[str, Any]
    verdict: Verdict
    charts: list[Chart] = field(default_factory=list)
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
    facts = _durability_facts(rows, summary, min_racks)
    return Report("durability", {
        "by_topic_hour": by_hour,
        "rejections": rejections,
        "rack_time_by_topic_hour": rack_time_hour,
        "rack_time_by_partition": rack_time_partition,
        "overall": overall_df,
    }, summary, verdicts.durability(facts),
        [*_coverage_charts(rows, snaps, min_racks), _bytes_by_racks_chart(rows, min_racks)])


def _durability_facts(rows: DataFrame, summary: dict[str, Any], n: int
                      ) -> verdicts.DurabilityFacts:
    acked = rows.filter("acked")
    under = acked.filter(F.col("rack_count") < n)
    u = under.agg(_sum_if(F.lit(True), F.col("bytes")).alias("b"),
                  _sum_if(F.col("records") >= 0, F.col("records")).alias("r"),
                  F.min("ts").alias("t0"), F.max("ts").alias("t1"),
                  F.sort_array(F.collect_set("topic")).alias("topics")).first()
    sets = (under.groupBy(F.array_sort("isr_racks").alias("racks"))
            .agg(_sum_if(F.col("records") >= 0, F.col("records")).alias("r"),
                 _sum_if(F.lit(True), F.col("bytes")).alias("b"))
            .orderBy(F.desc("b")).limit(5).collect())
    refused = {r["reason"] or "": int(r["n"]) for r in
               rows.filter(F.col("decision") == "rejected").groupBy("reason")
               .agg(F.count(F.lit(1)).alias("n")).collect()}
    return verdicts.DurabilityFacts(
        min_racks=n,
        acked_bytes=int(summary.get("acked_bytes") or 0),
        acked_records=int(summary.get("acked_records") or 0),
        acked_writes=int(summary.get("acked_writes") or 0),
        topics=acked.select("topic").distinct().count(),
        under_bytes=int(u["b"]) if u else 0,
        under_records=int(u["r"]) if u else 0,
        under_topics=tuple(u["topics"] or ()) if u else (),
        under_first_ts=u["t0"] if u else None,
        under_last_ts=u["t1"] if u else None,
        under_rack_sets=tuple(verdicts.RackSet(tuple(r["racks"] or ()), int(r["r"]),
                                               int(r["b"])) for r in sets),
        rejections=refused,
        observed_would_reject=int(summary.get("observed_would_reject") or 0),
        seconds_under=float(summary.get("seconds_under") or 0.0))


def _coverage_charts(rows: DataFrame, snaps: DataFrame, n: int) -> list[Chart]:
    bounds = coverage.time_bounds(rows, snaps)
    if bounds is None:
        return [charts.coverage([], n, 0.0)]
    cov, step = coverage.series(rows, snaps, n, *bounds)
    return [charts.coverage(cov, n, step)]


def _bytes_by_racks_chart(rows: DataFrame, n: int) -> Chart:
    found = {int(r["rack_count"]): int(r["b"]) for r in rows.filter("acked")
             .groupBy("rack_count").agg(_sum_if(F.lit(True), F.col("bytes")).alias("b"))
             .collect()}
    racks = sorted(found)
    total = sum(found.values()) or 1
    return charts.bars(
        "bytes-by-racks", "Acknowledged bytes by the number of racks their ISR spanned",
        [f"{k} rack{'s' if k != 1 else ''}" for k in racks], [found[k] for k in racks],
        [charts.UNDER if k < n else charts.AT if k == n else charts.ABOVE for k in racks],
        [f"{human_bytes(found[k])} ({percent(found[k] / total)})" for k in racks],
        "acknowledged bytes", human_bytes)


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
    topics = {int(r["min_racks"]): tuple(r["topics"]) for r in crossed.filter(wr)
              .groupBy("min_racks").agg(F.sort_array(F.collect_set("topic")).alias("topics"))
              .collect()}
    rows = [verdicts.WhatIfRow(int(n), int(v["acked_writes"]), int(v["acked_bytes"]),
                               int(v["would_reject_writes"]), int(v["would_reject_bytes"]),
                               int(v["would_reject_records"]), topics.get(int(n), ()))
            for n, v in sorted(per_n.items(), key=lambda kv: int(kv[0]))]
    chart = charts.bars(
        "whatif", "Share of acknowledged bytes each min.insync.racks would have refused",
        [f"N = {r.min_racks}" for r in rows],
        [r.would_reject_bytes / r.acked_bytes if r.acked_bytes else 0.0 for r in rows],
        [charts.UNDER if r.would_reject_writes else charts.ABOVE for r in rows],
        [f"{percent(r.would_reject_bytes / r.acked_bytes) if r.acked_bytes else '0 %'} "
         f"({human_bytes(r.would_reject_bytes)})" for r in rows],
        "share of acknowledged bytes", percent)
    return Report("whatif", {"overall": overall, "by_topic_hour": by_hour}, summary,
                  verdicts.whatif(rows), [chart])


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
    worst = tuple(f"{r['topic']}-{r['partition']} "
                  f"({verdicts.racks_list(r['replica_racks'] or ()) or 'no rack'})"
                  for r in bad.limit(5).collect())
    facts = verdicts.PlacementFacts(min_racks, int(summary.get("partitions") or 0),
                                    int(summary.get("under_now") or 0),
                                    int(summary.get("ever_under") or 0), worst)
    over_time = placement_time(snaps, min_racks)
    totals = over_time.agg(*(F.coalesce(F.sum(c), F.lit(0.0)).alias(c) for c in (
        "seconds_unsatisfiable", "seconds_fragile"))).first()
    summary.update({f"partition_{k}": v for k, v in _clean(totals.asDict() if totals else {})
                    .items()})
    return Report("placement", {"under_replicated_racks": bad, "topic_time": over_time},
                  summary, verdicts.placement(facts))


def placement_time(snaps: DataFrame, min_racks: int) -> DataFrame:
    """Per topic, partition-seconds in each of the placement audit's categories (replicas
    on fewer than N racks: unsatisfiable; on exactly N: fragile; more: healthy), each
    snapshot standing for its ``dur_s``; worst topics first."""
    rc = F.col("replica_rack_count")
    return (snaps.groupBy("topic")
            .agg(F.countDistinct("partition").alias("partitions"),
                 F.sum("dur_s").alias("seconds_observed"),
                 _sum_if(rc < min_racks, F.col("dur_s")).alias("seconds_unsatisfiable"),
                 _sum_if(rc == min_racks, F.col("dur_s")).alias("seconds_fragile"),
                 _sum_if(rc > min_racks, F.col("dur_s")).alias("seconds_healthy"))
            .withColumn("share_unsatisfiable",
                        _share(F.col("seconds_unsatisfiable"), F.col("seconds_observed")))
            .withColumn("share_fragile",
                        _share(F.col("seconds_fragile"), F.col("seconds_observed")))
            .orderBy(F.desc("seconds_unsatisfiable"), F.desc("seconds_fragile"), "topic"))


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
        "topic", "partition", "instance", "req", "client_id", "ts", "isr_racks",
        F.explode(F.sequence(F.col("base_offset"),
                             F.col("base_offset") + F.col("records") - 1)).alias("offset"))
    lost = acked_offsets.join(dump, ["topic", "partition", "offset"], "left_anti").cache()
    missing = (lost.drop("isr_racks").withColumn("acked_at", F.timestamp_seconds("ts"))
               .drop("ts").orderBy("topic", "partition", "offset"))
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
    ranges = _missing_ranges(lost)
    facts = verdicts.LossFacts(
        tuple(sorted(topics)), int(summary.get("acked_offsets") or 0),
        int(summary.get("missing_offsets") or 0), unverifiable,
        tuple(_missing_range(r) for r in ranges.limit(50).collect()))
    chart = _loss_chart(ledger, rows, lost, acked_offsets.join(dump, ["topic", "partition",
                                                                      "offset"]), topics)
    notes = ["offsets below a partition's log start (deleted by retention) count as missing: "
             "dump the topic before retention removes the outage window"]
    return Report("audit-loss", {"missing_ranges": ranges, "missing": missing,
                                 "by_partition": per_partition}, summary,
                  verdicts.audit_loss(facts), [chart], notes)


def _missing_ranges(lost: DataFrame) -> DataFrame:
    """Runs of consecutive missing offsets per partition (gaps and islands)."""
    order = Window.partitionBy("topic", "partition").orderBy("offset")
    return (lost.withColumn("run", F.col("offset") - F.row_number().over(order))
            .groupBy("topic", "partition", "run")
            .agg(F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
                 F.count(F.lit(1)).alias("records"),
                 F.timestamp_seconds(F.min("ts")).alias("first_acked_at"),
                 F.timestamp_seconds(F.max("ts")).alias("last_acked_at"),
                 F.sort_array(F.collect_set(F.array_join(F.array_sort("isr_racks"), ",")))
                 .alias("isr_racks"))
            .drop("run").orderBy("topic", "partition", "first_offset"))


def _missing_range(r: Any) -> verdicts.MissingRange:
    return verdicts.MissingRange(
        r["topic"], r["partition"], r["first_offset"], r["last_offset"], r["records"],
        r["first_acked_at"].timestamp(), r["last_acked_at"].timestamp(),
        tuple(tuple(x for x in s.split(",") if x) for s in r["isr_racks"]))


def _loss_chart(ledger: Ledger, rows: DataFrame, lost: DataFrame, found: DataFrame,
                topics: list[str]) -> Chart:
    """Missing offsets (at most 5,000) and a sample of the present ones (about 2,000) by the
    time they were acknowledged, with the spans where some ISR was on one rack shaded."""
    points = ("ts", "offset", "partition")
    missing = [tuple(r) for r in lost.select(*points).orderBy("ts", "offset").limit(5000)
               .collect()]
    present = found.count()
    sample = found if present <= 2000 else found.sample(fraction=2000 / present, seed=7)
    shown = [tuple(r) for r in sample.select(*points).limit(2000).collect()]
    snaps = partition_snapshots(ledger).filter(F.col("topic").isin(*topics)
                                               if topics else F.lit(False))
    bounds = coverage.time_bounds(rows, snaps)
    spans = coverage.under_spans(coverage.series(rows, snaps, 2, *bounds)[0]) if bounds else []
    return charts.loss_timeline(missing, shown, spans, ", ".join(sorted(topics)) or "no topic")


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out
