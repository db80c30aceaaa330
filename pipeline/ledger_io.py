"""Reading the ledger directory (decisions-*.jsonl, snapshots-*.jsonl) and offset dumps.

Decision lines come in two schemas, read together into the same rows (one per
partition, the v1 columns and ``malformed``): v1 writes one line per
partition with every field named; v2 writes one line per recorded request, its
fields once and each partition as an array of the proxy's
``proxy.ledger.schema.PARTITION_FIELDS``, in that order.

Invariant: every line read is either a valid row or counted as malformed
(``malformed`` column true), never silently dropped: a line that is not JSON,
has a field of the wrong type, lacks a field every row must have, or names an
unknown kind, decision or schema version ("v" other than 1 or 2) is malformed.
A v2 line whose own fields fail so (ts, instance, req, kind), that has no
partitions, or a partition that is not an array, is one malformed row;
otherwise each of its partition arrays is a row, malformed alone when it has
other than 15 elements, lacks a required element (topic, partition, decision,
isr_racks), names an unknown decision, or has a non-null element that does
not cast to its column's type (null is valid where v1 allows it). v2 elements
are read as JSON text and cast, so a JSON string holding a number or an array
where one is required is taken as that value (v1 refuses it). Blank lines are
not rows. The schema is explicit (no inference pass over the data).
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

from proxy.ledger.schema import DECISIONS, PARTITION_FIELDS

CORRUPT = "_corrupt_record"
_LINE_REQUIRED = ("ts", "instance", "req")
_PARTITION = "_partition"

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
"""The columns of decision rows (besides ``malformed``): v1's fields."""

# A StringType element takes any JSON value as its text (numbers, nested arrays), so each
# positional element can be cast to its column's type after one parse of the line.
_DECISION_READ_SCHEMA = StructType(
    [f for f in DECISION_SCHEMA.fields if f.name != CORRUPT]
    + [StructField("partitions", ArrayType(ArrayType(StringType()))), DECISION_SCHEMA[CORRUPT]])

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


def _v2_line_ok() -> Column:
    """A v2 line whose own fields are valid: its partitions become rows."""
    ok = (F.col("v") == 2) & F.col(CORRUPT).isNull() & (F.col("kind") == "produce")
    for name in _LINE_REQUIRED:
        ok = ok & F.col(name).isNotNull()
    return ok


def _element(name: str) -> Column:
    """Element ``name`` of the exploded partition array, as its column's type (null when
    it is null, missing, or does not cast)."""
    index = PARTITION_FIELDS.index(name)
    dtype = DECISION_SCHEMA[name].dataType
    if isinstance(dtype, StringType):
        return F.get(F.col(_PARTITION), index)
    if isinstance(dtype, ArrayType):
        return F.from_json(F.get(F.col(_PARTITION), index), dtype)
    # try_cast (not Column.try_cast, which pyspark 3.5 lacks): null, not an error, under ANSI
    return F.expr(f"try_cast(get({_PARTITION}, {index}) AS {dtype.simpleString()})")


def _decision_rows(lines: DataFrame) -> DataFrame:
    """A row per partition of a v2 line whose own fields are valid, one per other line."""
    exploded = lines.withColumn(
        _PARTITION, F.explode_outer(F.when(_v2_line_ok(), F.col("partitions"))))
    v2 = F.col("v") == 2
    return exploded.select(
        *(F.when(v2, _element(f.name)).otherwise(F.col(f.name)).alias(f.name)
          if f.name in PARTITION_FIELDS else F.col(f.name) for f in DECISION_SCHEMA.fields),
        F.col(_PARTITION))


def _decision_malformed() -> Column:
    required = [*_LINE_REQUIRED, "topic", "partition", "decision", "isr_racks"]
    bad = (F.col(CORRUPT).isNotNull() | (F.coalesce(F.col("kind"), F.lit("")) != "produce")
           | ~F.col("v").isin(1, 2))
    for name in required:
        bad = bad | F.col(name).isNull()
    bad = bad | ~F.col("decision").isin(*DECISIONS)
    part = F.col(_PARTITION)
    v2_bad = part.isNull() | (F.size(part) != len(PARTITION_FIELDS))
    for i, name in enumerate(PARTITION_FIELDS):
        if not isinstance(DECISION_SCHEMA[name].dataType, StringType):
            v2_bad = v2_bad | (F.get(part, i).isNotNull() & F.col(name).isNull())
    bad = bad | ((F.col("v") == 2) & v2_bad)
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
    decisions = (_decision_rows(_read(spark, dfiles, _DECISION_READ_SCHEMA))
                 .withColumn("malformed", _decision_malformed()).drop(_PARTITION).cache())
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
