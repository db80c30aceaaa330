"""Rack coverage on a time grid, for the charts: per topic and step, the share of partitions
whose ISR spans fewer than, exactly, or more than N racks, and the refusals in that step.

How a step gets its state: each snapshot of a partition holds until the next snapshot of
that partition (from any instance), at most twice its interval, and the last one until the
end of the ledger (also at most twice its interval); a step shows, per partition, the latest
snapshot that holds during it. So a run shorter than one snapshot interval still shows one
band across its length instead of a dot.

Invariant: computed by Spark, collected only as (topic, step) aggregates: at most
``MAX_STEPS`` steps per topic, whatever the ledger's size.
"""

from __future__ import annotations

import math

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pipeline.charts import CoverageSeries

MAX_STEPS = 120
_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200,
          21600, 86400)


def nice_step(raw: float) -> float:
    for step in _STEPS:
        if step >= raw:
            return float(step)
    return float(86400 * math.ceil(raw / 86400))


def time_bounds(rows: DataFrame, snaps: DataFrame) -> tuple[float, float] | None:
    found = [r for r in (snaps.agg(F.min("ts"), F.max("ts")).first(),
                         rows.agg(F.min("ts"), F.max("ts")).first())
             if r is not None and r[0] is not None]
    if not found:
        return None
    return min(float(r[0]) for r in found), max(float(r[1]) for r in found)


def grid(lo: float, hi: float) -> tuple[float, int]:
    """(step, number of steps) covering [lo, hi] in at most MAX_STEPS steps."""
    step = nice_step((hi - lo) / MAX_STEPS)
    return step, int((hi - lo) // step) + 1


def series(rows: DataFrame, snaps: DataFrame, n: int, lo: float, hi: float
           ) -> tuple[list[CoverageSeries], float]:
    """Per topic: its coverage on the grid over [lo, hi], and the grid's step."""
    step, steps = grid(lo, hi)
    order = Window.partitionBy("topic", "partition").orderBy("ts", "instance", "snapshot")
    hold = F.least(F.coalesce(F.lead("ts").over(order), F.lit(hi)),
                   F.col("ts") + 2 * F.col("interval_s"))
    first = F.floor((F.col("ts") - lo) / step).cast("int")
    last = F.greatest(first, F.ceil((F.col("hold") - lo) / step).cast("int") - 1)
    held = (snaps.withColumn("hold", hold)  # a window can't sit inside a generator
            .select("topic", "partition", "ts", "rack_count",
                    F.explode(F.sequence(first, F.least(last, F.lit(steps - 1))))
                    .alias("step")))
    latest = (held.groupBy("topic", "partition", "step")
              .agg(F.max(F.struct("ts", "rack_count")).alias("s"))
              .select("topic", "step", F.col("s.rack_count").alias("rc")))
    states = {(r["topic"], r["step"]): r for r in latest.groupBy("topic", "step").agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.when(F.col("rc") < n, 1).otherwise(0)).alias("under"),
        F.sum(F.when(F.col("rc") == n, 1).otherwise(0)).alias("at")).collect()}
    marked = (rows.filter(F.col("decision") != "forwarded")
              .withColumn("step", F.least(F.floor((F.col("ts") - lo) / step).cast("int"),
                                          F.lit(steps - 1)))
              .groupBy("topic", "step")
              .agg(F.sum(F.when(F.col("decision") == "rejected", 1).otherwise(0)).alias("rej"),
                   F.sum(F.when(F.col("decision") != "rejected", 1).otherwise(0)).alias("obs"))
              .collect())
    marks = {(r["topic"], r["step"]): (int(r["rej"]), int(r["obs"])) for r in marked}
    topics = sorted({t for t, _ in states} | {t for t, _ in marks})
    out = []
    for topic in topics:
        s = CoverageSeries(topic, [lo + k * step for k in range(steps + 1)], [], [], [], [], [])
        for k in range(steps + 1):  # the extra last point closes the last step's band
            r = states.get((topic, min(k, steps - 1)))
            if r is None:
                s.under.append(None)
                s.at.append(None)
                s.above.append(None)
            else:
                s.under.append(r["under"] / r["n"])
                s.at.append(r["at"] / r["n"])
                s.above.append((r["n"] - r["under"] - r["at"]) / r["n"])
            rej, obs = marks.get((topic, k), (0, 0)) if k < steps else (0, 0)
            s.rejected.append(rej)
            s.would_reject.append(obs)
        out.append(s)
    return out, step


def under_spans(cov: list[CoverageSeries], topics: set[str] | None = None
                ) -> list[tuple[float, float]]:
    """Time spans in which some partition (of ``topics``, or any) was under N racks."""
    spans: list[tuple[float, float]] = []
    for s in cov:
        if topics is not None and s.topic not in topics:
            continue
        for k in range(len(s.times) - 1):
            u = s.under[k]
            if u:
                spans.append((s.times[k], s.times[k + 1]))
    spans.sort()
    merged: list[tuple[float, float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged
