"""Reading the ledger directory (decisions-*.jsonl, snapshots-*.jsonl) and offset dumps.

Invariant: every line read is either a valid row or counted as malformed
(``malformed`` column true), never silently dropped: a line that is not JSON,
has a field of the wrong type, lacks a field every row must have, or names an
unknown kind or decision is malformed. Blank lines are not rows. The schema
is explicit (no inference pass over the data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

CORRUPT = "_corrupt_record"
DECISIONS = ("forwarded", "rejected", "observed-would-reject")

DECISION_SCHEMA = StructType([
    StructField("v", LongType()),
    StructField("kind", StringType()),
    StructField("ts", DoubleType()),
    StructField("instance", StringType()),
    StructField("req", LongType()),
    StructField("client_id", StringType()),
    StructField("client_addr", StringType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("leader", IntegerType()),
    StructField("isr", ArrayType(IntegerType())),
    StructField("isr_racks", ArrayType(StringType())),
    StructField("required_racks", IntegerType()),
    StructField("min_isr", IntegerType()),
    StructField("decision", StringType()),
    StructField("reason", StringType()),
    StructField("wire_error", IntegerType()),
    StructField("broker_error", IntegerType()),
    StructField("base_offset", LongType()),
    StructField("records", LongType()),
    StructField("bytes", LongType()),
    StructField("latency_ms", DoubleType()),
    StructField("metadata_age_ms", DoubleType()),
    StructField(CORRUPT, StringType()),
])

SNAPSHOT_SCHEMA = StructType([
    StructField("v", LongType()),
    StructField("kind", StringType()),
    StructField("ts", DoubleType()),
    StructField("instance", StringType()),
    StructField("snapshot", LongType()),
    StructField("interval_s", DoubleType()),
    StructField("node_id", IntegerType()),
    StructField("rack", StringType()),
    StructField("live", BooleanType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("leader", IntegerType()),
    StructField("replicas", ArrayType(IntegerType())),
    StructField("replica_racks", ArrayType(StringType())),
    StructField("isr", ArrayType(IntegerType())),
    StructField("isr_racks", ArrayType(StringType())),
    StructField("min_isr", IntegerType()),
    StructField("required_racks", IntegerType()),
    StructField("metadata_age_ms", DoubleType()),
    StructField(CORRUPT, StringType()),
])

OFFSETS_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", LongType()),
    StructField("key_hash", StringType()),
])


@dataclass(frozen=True)
class Ledger:
    """Parsed rows, each with a boolean ``malformed`` column; cached (read once)."""

    decisions: DataFrame
    snapshots: DataFrame
    decision_files: int
    snapshot_files: int


def ledger_files(paths: Sequence[str | Path], prefix: str) -> list[str]:
    """``prefix-*.jsonl`` files in the given directories (recursively) or the files named."""
    out: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out += sorted(str(p) for p in path.rglob(f"{prefix}-*.jsonl"))
        elif path.is_file() and path.name.startswith(prefix):
            out.append(str(path))
        elif not path.exists():
            raise FileNotFoundError(f"ledger path {str(path)!r} does not exist")
    return out


def _read(spark: SparkSession, files: list[str], schema: StructType) -> DataFrame:
    if not files:
        return spark.createDataFrame([], schema)
    return (spark.read.schema(schema)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT)
            .json(files))


def _decision_malformed() -> Column:
    required = ["ts", "instance", "req", "topic", "partition", "decision", "isr_racks"]
    bad = F.col(CORRUPT).isNotNull() | (F.coalesce(F.col("kind"), F.lit("")) != "produce")
    for name in required:
        bad = bad | F.col(name).isNull()
    bad = bad | ~F.col("decision").isin(*DECISIONS)
    return F.coalesce(bad, F.lit(True))


def _snapshot_malformed() -> Column:
    kind = F.coalesce(F.col("kind"), F.lit(""))
    partition_ok = ((kind == "partition") & F.col("topic").isNotNull()
                    & F.col("partition").isNotNull() & F.col("isr_racks").isNotNull()
                    & F.col("replica_racks").isNotNull())
    broker_ok = (kind == "broker") & F.col("node_id").isNotNull()
    ok = (F.col(CORRUPT).isNull() & F.col("ts").isNotNull() & F.col("instance").isNotNull()
          & F.col("interval_s").isNotNull() & (partition_ok | broker_ok))
    return ~F.coalesce(ok, F.lit(False))


def read_ledger(spark: SparkSession, paths: Sequence[str | Path]) -> Ledger:
    dfiles = ledger_files(paths, "decisions")
    sfiles = ledger_files(paths, "snapshots")
    decisions = _read(spark, dfiles, DECISION_SCHEMA).withColumn(
        "malformed", _decision_malformed()).cache()
    snapshots = _read(spark, sfiles, SNAPSHOT_SCHEMA).withColumn(
        "malformed", _snapshot_malformed()).cache()
    return Ledger(decisions, snapshots, len(dfiles), len(sfiles))


def read_offsets(spark: SparkSession, path: str | Path) -> DataFrame:
    """A dump written by ``rackguard dump-offsets`` (Parquet, or JSON Lines)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"offsets dump {str(p)!r} does not exist")
    if p.suffix in (".jsonl", ".json"):
        return spark.read.schema(OFFSETS_SCHEMA).json(str(p))
    return spark.read.parquet(str(p)).select(
        *(F.col(f.name).cast(f.dataType) for f in OFFSETS_SCHEMA.fields))
