"""``rackguard dump-offsets``: every offset of one topic, for the loss audit.

Reads the topic from the beginning of each partition to the end offsets taken
at start (kafka-python, no consumer group, nothing committed) and writes one
row per record: topic, partition, offset, timestamp (ms), key_hash (first 16
hex digits of the key's SHA-256, or null), to exactly the path it is given:
Parquet for ``.parquet`` (through pyarrow), JSON Lines for ``.jsonl``; any
other name, or Parquet without pyarrow, is refused before reading, with the
reason.

Invariant: the dump covers exactly [beginning, end-at-start) of every
partition or the command fails (exit 1) saying which partition fell short;
no Spark is needed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.progress import Progress

Row = tuple[str, int, int, int, str | None]
FORMATS = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl"}


def key_hash(key: bytes | None) -> str | None:
    return None if key is None else hashlib.sha256(key).hexdigest()[:16]


def read_topic(bootstrap: str, topic: str, timeout_s: float = 60.0) -> Iterator[Row]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                             group_id=None, consumer_timeout_ms=1000,
                             max_partition_fetch_bytes=8 * 1024 * 1024)
    try:
        parts = consumer.partitions_for_topic(topic)
        deadline = time.monotonic() + timeout_s
        while parts is None and time.monotonic() < deadline:
            consumer.topics()
            parts = consumer.partitions_for_topic(topic)
            if parts is None:
                time.sleep(0.2)
        if parts is None:
            raise RuntimeError(f"topic {topic!r} not found")
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        pending = {tp for tp in tps if consumer.position(tp) < ends[tp]}
        while pending:
            if time.monotonic() > deadline:
                short = ", ".join(f"{tp.partition} at {consumer.position(tp)} of {ends[tp]}"
                                  for tp in sorted(pending, key=lambda t: t.partition))
                raise RuntimeError(f"timed out reading {topic}: partition(s) {short}")
            batch = consumer.poll(timeout_ms=500)
            for tp, records in batch.items():
                for r in records:
                    if r.offset < ends[tp]:
                        yield (topic, tp.partition, r.offset, r.timestamp, key_hash(r.key))
            for tp in list(pending):
                if consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
                    consumer.pause(tp)
    finally:
        consumer.close()


class DumpPathError(ValueError):
    """The output path names a format this machine cannot write (the message says why)."""


def check_out(out: Path) -> str:
    """The format ``out`` asks for ("parquet" or "jsonl"), or DumpPathError saying why not."""
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise DumpPathError(f"cannot write {str(out)!r}: name the output .parquet or .jsonl "
                            f"(not {out.suffix or 'no extension'!r})")
    if fmt == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise DumpPathError(f"cannot write {str(out)!r}: Parquet needs pyarrow (pip install "
                            "pyarrow), or name the output .jsonl")
    return fmt


def write_rows(rows: list[Row], out: Path) -> Path:
    """Exactly ``out``: Parquet for .parquet, JSON Lines for .jsonl/.json (check_out)."""
    fmt = check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with out.open("w") as f:
            for t, p, o, ts, k in rows:
                f.write(json.dumps({"topic": t, "partition": p, "offset": o, "timestamp": ts,
                                    "key_hash": k}) + "\n")
        return out
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: list[tuple[Any, ...]] = list(zip(*rows, strict=True)) if rows else [()] * 5
    table = pa.table({
        "topic": pa.array(columns[0], pa.string()),
        "partition": pa.array(columns[1], pa.int32()),
        "offset": pa.array(columns[2], pa.int64()),
        "timestamp": pa.array(columns[3], pa.int64()),
        "key_hash": pa.array(columns[4], pa.string()),
    })
    pq.write_table(table, out)
    return out


def dump_topics(bootstrap: str, topics: list[str], timeout_s: float,
                progress: Progress) -> list[Row]:
    """Every offset of ``topics``, saying how far it got every few seconds."""
    rows: list[Row] = []
    for topic in topics:
        last = time.monotonic()
        with progress.step(f"reading every offset of {topic} from {bootstrap}"):
            for row in read_topic(bootstrap, topic, timeout_s):
                rows.append(row)
                if time.monotonic() - last >= 5:
                    last = time.monotonic()
                    progress.say(f"{topic}: {len(rows):,} offsets so far")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rackguard dump-offsets",
        description="Write every offset of a topic (topic, partition, offset, timestamp, "
        "key hash) to exactly the path given: .parquet (needs pyarrow) or .jsonl, for "
        "report audit-loss.")
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT[,...]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True, metavar="PATH.parquet|PATH.jsonl")
    parser.add_argument("--timeout-s", type=float, default=120.0, metavar="S")
    args = parser.parse_args(argv)
    prog = "rackguard dump-offsets"
    out = Path(args.out)
    try:
        check_out(out)
        rows = dump_topics(args.bootstrap, [args.topic], args.timeout_s, Progress(prog))
    except DumpPathError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one line for any failure
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    path = write_rows(rows, out)
    per: dict[int, int] = {}
    for _, p, *_rest in rows:
        per[p] = per.get(p, 0) + 1
    print(f"{prog}: {len(rows)} offset(s) of {args.topic} in {len(per)} partition(s) -> {path}")
    return 0
