"""Reading the ledger directory (schema 3: decisions and snapshots, Parquet) and offset dumps.

The proxy writes one row per request that names the view and the rule it was decided
on by sequence number, and the view and the rule themselves only when they change
(``proxy.ledger.schema``). This module joins them back into the rows the reports
read, one per partition-write, with the columns the reports have always had:

- a decision row gets its partition's leader, ISR and min.insync.replicas from the
  topic's latest ``topic`` snapshot row with ``seq <= view_seq`` (same instance and
  run), its ISR's racks from the latest ``brokers`` row, its required racks from the
  ``rule`` row of its ``rule_seq``;
- a snapshot row is made per partition per ``tick`` (the proxy was up, on that view,
  every snapshot interval), from the state in force at the tick's view: the same rows
  the former periodic snapshots held.

Files are typed (Parquet; a file still being written, or left by a crash, is an Arrow
IPC stream whose complete batches are read): there is no parsing, so no malformed
row; the ``malformed`` column stays for the reports' summaries and is always false.
The broker's answers, which the proxy keeps as bytes, are read here per decisions
file before Spark reads it (:mod:`pipeline.answers`; the file is rewritten into a
scratch directory with its ``error`` and ``base_offset`` filled in).
Files of the JSON ledger (schemas 1 and 2) are not read.

Invariant: the joins are keyed by the few distinct (instance, run, topic, view_seq)
the rows name, so their cost follows the rows and the views that changed, not the
cluster's size times the traffic.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from pipeline.answers import DROPPED, fill_answers
from proxy.ledger.schema import (
    BROKERS,
    CLOSED_SUFFIX,
    DECISION_COLUMNS,
    DECISION_FILE_PREFIX,
    FORWARDED,
    GONE,
    OPEN_SUFFIX,
    REJECTED,
    RULE,
    SNAPSHOT_COLUMNS,
    SNAPSHOT_FILE_PREFIX,
    TICK,
    TOPIC,
)

CORRUPT = "_corrupt_record"  # kept in the rows' columns for the reports' summaries

_SCALARS: dict[str, DataType] = {
    "float64": DoubleType(), "float32": FloatType(), "string": StringType(),
    "int64": LongType(), "int32": IntegerType(), "int16": ShortType(), "int8": ByteType(),
    "bool": BooleanType(),
}


def spark_type(name: str) -> DataType:
    if name.startswith("list<") and name.endswith(">"):
        return ArrayType(spark_type(name[5:-1]))
    return _SCALARS[name]


def spark_schema(columns: Sequence[tuple[str, str]]) -> StructType:
    return StructType([StructField(n, spark_type(t)) for n, t in columns])


RAW_DECISIONS = spark_schema([c for c in DECISION_COLUMNS if c[0] not in DROPPED])
RAW_SNAPSHOTS = spark_schema(SNAPSHOT_COLUMNS)

DECISION_SCHEMA = StructType([
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
"""The columns of the decision rows the reports read (besides ``malformed``)."""

SNAPSHOT_SCHEMA = StructType([
    StructField("kind", StringType()),
    StructField("ts", DoubleType()),
    StructField("instance", StringType()),
    StructField("snapshot", LongType()),
    StructField("interval_s", DoubleType()),
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
"""The columns of the per-tick partition rows the reports read (besides ``malformed``)."""

OFFSETS_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", LongType()),
    StructField("key_hash", StringType()),
])


@dataclass(frozen=True)
class Ledger:
    """Joined rows, each with a boolean ``malformed`` column (always false); cached."""

    decisions: DataFrame
    snapshots: DataFrame
    decision_files: int
    snapshot_files: int


def ledger_files(paths: Sequence[str | Path], prefix: str) -> list[Path]:
    """``prefix-*`` ledger files (Parquet, and open Arrow streams) in the given directories
    (recursively) or the files named."""
    out: list[Path] = []
    suffixes = (CLOSED_SUFFIX, OPEN_SUFFIX)
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out += sorted(p for p in path.rglob(f"{prefix}-*") if p.suffix in suffixes)
        elif path.is_file() and path.name.startswith(prefix):
            out.append(path)
        elif not path.exists():
            raise FileNotFoundError(f"ledger path {str(path)!r} does not exist")
    return out


_scratch: list[str] = []


def _scratch_file(stem: str) -> Path:
    if not _scratch:
        _scratch.append(tempfile.mkdtemp(prefix="rackguard-ledger-"))
        atexit.register(shutil.rmtree, _scratch[0], True)
    return Path(_scratch[0]) / f"{len(list(Path(_scratch[0]).iterdir()))}-{stem}.parquet"


def _stream_table(path: Path) -> pa.Table | None:
    """The complete batches of an open (or crashed) Arrow stream; None when it holds no
    complete batch."""
    batches = []
    try:
        with pa.OSFile(str(path), "rb") as source:
            reader = pa.ipc.open_stream(source)
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
                except (pa.ArrowInvalid, OSError):
                    break  # a torn last batch
            schema = reader.schema
    except (pa.ArrowInvalid, OSError):
        return None
    if not batches:
        return None
    return pa.Table.from_batches(batches, schema=schema)


def _readable(path: Path, decisions: bool) -> str | None:
    """A Parquet file Spark reads for a ledger file: the file itself, or (an open stream;
    decisions, whose broker answers are read here first) one in a scratch directory
    removed at exit."""
    if path.suffix == CLOSED_SUFFIX and not decisions:
        return str(path)
    table = pq.read_table(str(path)) if path.suffix == CLOSED_SUFFIX else _stream_table(path)
    if table is None:
        return None
    if decisions:
        table, _unreadable = fill_answers(table)
    target = _scratch_file(path.stem)
    pq.write_table(table, str(target), compression="none")
    return str(target)


def _read(spark: SparkSession, files: list[Path], schema: StructType,
          decisions: bool = False) -> DataFrame:
    readable = [_readable(p, decisions) for p in files]
    names = [p for p in readable if p is not None]
    if not names:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*names)


def _latest(keys: DataFrame, states: DataFrame, by: list[str], seq_col: str) -> DataFrame:
    """For each row of ``keys`` (``by`` and ``seq_col``), the row of ``states`` (``by``, ``seq``)
    with the greatest ``seq <= seq_col``."""
    joined = keys.join(states, by).filter(F.col("seq") <= F.col(seq_col))
    w = Window.partitionBy(*by, seq_col).orderBy(F.desc("seq"))
    return joined.withColumn("_rn", F.row_number().over(w)).filter("_rn = 1").drop("_rn")


def _racks_of(nodes: str, rack_map: str) -> Column:
    """Distinct racks of the brokers in the array column ``nodes``, sorted; a node without a
    brokers entry counts as no rack (it proves nothing)."""
    return F.coalesce(F.expr(
        f"array_sort(array_distinct(filter(transform({nodes}, n -> try_element_at({rack_map}, "
        f"n)), r -> r is not null)))"), F.array().cast("array<string>"))


def _required(topic: str) -> Column:
    return F.coalesce(
        F.expr(f"try_element_at(map_from_arrays(rule_topics, rule_topic_racks), {topic})"),
        F.expr(f"try_element_at(filter(arrays_zip(rule_prefixes, rule_prefix_racks), "
               f"x -> startswith({topic}, x.rule_prefixes)), 1).rule_prefix_racks"),
        F.col("default_min_racks"))


def _state_tables(snaps: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    key = ["instance", "run"]
    topics = snaps.filter(F.col("kind").isin(TOPIC, GONE)).select(
        *key, "topic", "seq", F.col("kind").alias("state"), "min_isr", "partitions",
        "leaders", "replicas", "isr")
    brokers = snaps.filter(F.col("kind") == BROKERS).select(
        *key, "seq", F.map_from_arrays("nodes", "racks").alias("rack_map"))
    rules = snaps.filter(F.col("kind") == RULE).select(
        *key, F.col("seq").alias("rule_seq"), "default_min_racks", "rule_topics",
        "rule_topic_racks", "rule_prefixes", "rule_prefix_racks")
    return topics, brokers, rules


def _decision_rows(raw: DataFrame, snaps: DataFrame) -> DataFrame:
    topics, brokers, rules = _state_tables(snaps)
    key = ["instance", "run"]
    parts = raw.select(
        *key, "ts", "req", "client_id", "client_addr", "view_seq", "rule_seq", "latency_ms",
        "topics", F.map_from_arrays("np_index", F.arrays_zip("np_decision", "np_reason",
                                                             "np_code")).alias("np"),
        F.posexplode(F.arrays_zip("topic_no", "partition", "records", "bytes", "error",
                                  "base_offset")).alias("pos", "p"))
    parts = (parts.withColumn("topic", F.expr("get(topics, p.topic_no)"))
             .withColumn("partition", F.col("p.partition").cast("int"))
             .withColumn("n", F.expr("try_element_at(np, pos)")))
    # each partition's state at each view the rows name, with its racks, worked out once
    # per (view, topic, partition), not per row
    views = parts.select(*key, "topic", "view_seq").distinct()
    state = _latest(views, topics, [*key, "topic"], "view_seq").filter(F.col("state") == TOPIC)
    racks = _latest(views.select(*key, "view_seq").distinct(), brokers, key, "view_seq")
    lookup = (state.join(racks.drop("seq"), [*key, "view_seq"], "left")
              .select(*key, "topic", "view_seq", "min_isr", "rack_map", F.posexplode(
                  F.arrays_zip("partitions", "leaders", "isr")).alias("i", "s"))
              .select(*key, "topic", "view_seq", "min_isr",
                      F.col("s.partitions").cast("int").alias("partition"),
                      F.col("s.leaders").alias("leader"), F.col("s.isr").alias("isr"),
                      _racks_of("s.isr", "rack_map").alias("isr_racks")))
    required = (parts.select(*key, "topic", "rule_seq").distinct()
                .join(F.broadcast(rules), [*key, "rule_seq"], "left")
                .select(*key, "topic", "rule_seq", _required("topic").alias("required_racks")))
    rows = (parts.join(lookup, [*key, "topic", "view_seq", "partition"], "left")
            .join(required, [*key, "topic", "rule_seq"], "left"))
    decision = F.coalesce(F.col("n.np_decision"), F.lit(FORWARDED))
    rejected = decision == REJECTED
    return rows.select(
        F.col("ts").cast("double").alias("ts"), "instance", "req", "client_id", "client_addr",
        "topic", "partition", F.coalesce(F.col("leader"), F.lit(-1)).cast("int").alias("leader"),
        F.coalesce(F.col("isr"), F.array().cast("array<int>")).alias("isr"),
        F.coalesce(F.col("isr_racks"), F.array().cast("array<string>")).alias("isr_racks"),
        F.col("required_racks").cast("int").alias("required_racks"),
        F.col("min_isr").cast("int").alias("min_isr"),
        decision.alias("decision"), F.coalesce(F.col("n.np_reason"), F.lit("")).alias("reason"),
        F.when(rejected, F.col("n.np_code")).otherwise(F.col("p.error")).cast("int")
        .alias("wire_error"),
        F.when(rejected, F.lit(None)).otherwise(F.col("p.error")).cast("int")
        .alias("broker_error"),
        F.col("p.base_offset").cast("long").alias("base_offset"),
        F.col("p.records").cast("long").alias("records"),
        F.col("p.bytes").cast("long").alias("bytes"),
        F.col("latency_ms").cast("double").alias("latency_ms"),
        F.lit(None).cast("double").alias("metadata_age_ms"),
        F.lit(None).cast("string").alias(CORRUPT))


def _snapshot_rows(snaps: DataFrame) -> DataFrame:
    topics, brokers, rules = _state_tables(snaps)
    key = ["instance", "run"]
    ticks = (snaps.filter(F.col("kind") == TICK)
             .select(*key, "ts", F.col("seq").alias("view_seq"), "rule_seq", "interval_s")
             .withColumn("snapshot", F.row_number().over(
                 Window.partitionBy(*key).orderBy("ts")).cast("long")))
    views = ticks.select(*key, "view_seq", "rule_seq").distinct()
    # the latest state of every topic at each view the ticks name, each partition's racks
    # and required racks worked out once per (view, rule, partition), not per tick
    joined = views.join(topics, key).filter(F.col("seq") <= F.col("view_seq"))
    w = Window.partitionBy(*key, "view_seq", "rule_seq", "topic").orderBy(F.desc("seq"))
    state = (joined.withColumn("_rn", F.row_number().over(w))
             .filter((F.col("_rn") == 1) & (F.col("state") == TOPIC)).drop("_rn", "seq"))
    racks = _latest(views.select(*key, "view_seq").distinct(), brokers, key, "view_seq")
    per_partition = (state.join(racks.drop("seq"), [*key, "view_seq"], "left")
                     .join(F.broadcast(rules), [*key, "rule_seq"], "left")
                     .select(*key, "view_seq", "rule_seq", "topic", "min_isr", "rack_map",
                             _required("topic").alias("required_racks"),
                             F.posexplode(F.arrays_zip("partitions", "leaders", "replicas",
                                                       "isr")).alias("i", "s"))
                     .select(*key, "view_seq", "rule_seq", "topic", "min_isr", "required_racks",
                             F.col("s.partitions").cast("int").alias("partition"),
                             F.col("s.leaders").cast("int").alias("leader"),
                             F.col("s.replicas").alias("replicas"),
                             _racks_of("s.replicas", "rack_map").alias("replica_racks"),
                             F.col("s.isr").alias("isr"),
                             _racks_of("s.isr", "rack_map").alias("isr_racks")))
    rows = ticks.join(per_partition, [*key, "view_seq", "rule_seq"])
    return rows.select(
        F.lit("partition").alias("kind"), F.col("ts").cast("double").alias("ts"), "instance",
        "snapshot", F.col("interval_s").cast("double").alias("interval_s"), "topic",
        "partition", "leader", "replicas", "replica_racks", "isr", "isr_racks",
        F.col("min_isr").cast("int").alias("min_isr"),
        F.col("required_racks").cast("int").alias("required_racks"),
        F.lit(None).cast("double").alias("metadata_age_ms"),
        F.lit(None).cast("string").alias(CORRUPT))


def read_ledger(spark: SparkSession, paths: Sequence[str | Path]) -> Ledger:
    dfiles = ledger_files(paths, DECISION_FILE_PREFIX)
    sfiles = ledger_files(paths, SNAPSHOT_FILE_PREFIX)
    raw_snaps = _read(spark, sfiles, RAW_SNAPSHOTS).cache()
    decisions = _decision_rows(_read(spark, dfiles, RAW_DECISIONS, decisions=True), raw_snaps)
    snapshots = _snapshot_rows(raw_snaps)
    return Ledger(decisions.withColumn("malformed", F.lit(False)).cache(),
                  snapshots.withColumn("malformed", F.lit(False)).cache(),
                  len(dfiles), len(sfiles))


def read_offsets(spark: SparkSession, path: str | Path) -> DataFrame:
    """A dump written by ``rackguard dump-offsets`` (Parquet, or JSON Lines)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"offsets dump {str(p)!r} does not exist")
    if p.suffix in (".jsonl", ".json"):
        return spark.read.schema(OFFSETS_SCHEMA).json(str(p))
    return spark.read.parquet(str(p)).select(
        *(F.col(f.name).cast(f.dataType) for f in OFFSETS_SCHEMA.fields))
