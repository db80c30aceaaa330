"""Arrow record batches of ledger entries and snapshot rows (the writer thread only).

This module imports pyarrow (about 50 MB of resident memory): the ledger imports it
in its writer thread when that starts, never on the serving path's import.

Invariants: a batch has exactly the columns of :mod:`proxy.ledger.schema`, typed; a
partition's error code and base offset are the broker's, from its answer (null when
the proxy answered the partition itself, or the answer lacks it or cannot be read:
the caller counts those).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from protocol.primitives import ProtocolError
from protocol.produce_results import produce_results
from proxy.ledger.entry import FIELDS_PER_PARTITION, Entry
from proxy.ledger.schema import DECISION_COLUMNS, SNAPSHOT_COLUMNS


def arrow_type(name: str) -> pa.DataType:
    """``int32``, ``list<string>``, ``list<list<int32>>``... as an Arrow type."""
    if name.startswith("list<") and name.endswith(">"):
        return pa.list_(arrow_type(name[5:-1]))
    return pa.type_for_alias(name)


def arrow_schema(columns: Sequence[tuple[str, str]]) -> pa.Schema:
    return pa.schema([pa.field(n, arrow_type(t)) for n, t in columns])


DECISION_SCHEMA = arrow_schema(DECISION_COLUMNS)
SNAPSHOT_SCHEMA = arrow_schema(SNAPSHOT_COLUMNS)


def _lists(offsets: list[int], values: list[int], kind: pa.DataType) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                    pa.array(values, pa.int64()).cast(kind))


def answers(entry: Entry) -> tuple[list[int | None], list[int | None], bool]:
    """Per partition of the entry, the broker's error code and base offset (None where it
    has none); False when the answer could not be read."""
    n = entry.rows
    if entry.answer is None:
        return [None] * n, [None] * n, True
    try:
        results = produce_results(entry.answer, entry.api_version)
    except ProtocolError:
        return [None] * n, [None] * n, False
    keys = entry.topic_ids or entry.topics
    parts = entry.parts
    get: Any = results.get  # (map and zip: the per-partition loop in C)
    found: list[Any] = list(map(get, zip(map(keys.__getitem__, parts[0::4]), parts[1::4],
                                         strict=True)))
    if None not in found:  # the usual answer: every partition in it
        return [f[0] for f in found], [f[1] for f in found], True
    errors = [f[0] if f is not None else None for f in found]
    offsets = [f[1] if f is not None else None for f in found]
    return errors, offsets, True


def decision_batch(entries: Sequence[Entry], instance: str, run: int) -> tuple[pa.RecordBatch,
                                                                                 int]:
    """The entries as one record batch, and how many answers could not be read."""
    n = len(entries)
    offsets = [0]
    topic_no: list[int] = []
    partition: list[int] = []
    records: list[int] = []
    nbytes: list[int] = []
    errors: list[int | None] = []
    bases: list[int | None] = []
    unreadable = 0
    np_index: list[list[int] | None] = []
    np_decision: list[list[str] | None] = []
    np_reason: list[list[str] | None] = []
    np_code: list[list[int | None] | None] = []
    total = 0
    for e in entries:
        parts = e.parts
        topic_no.extend(parts[0::4])
        partition.extend(parts[1::4])
        records.extend(parts[2::4])
        nbytes.extend(parts[3::4])
        total += len(parts) // FIELDS_PER_PARTITION
        offsets.append(total)
        err, base, ok = answers(e)
        errors.extend(err)
        bases.extend(base)
        unreadable += not ok
        np = e.not_passed
        if np is None:
            np_index.append(None)
            np_decision.append(None)
            np_reason.append(None)
            np_code.append(None)
        else:
            np_index.append([x[0] for x in np])
            np_decision.append([x[1] for x in np])
            np_reason.append([x[2] for x in np])
            np_code.append([x[3] for x in np])
    columns: list[Any] = [
        pa.array([e.wall for e in entries], pa.float64()),
        pa.array([instance] * n, pa.string()),
        pa.array([run] * n, pa.int64()),
        pa.array([e.req for e in entries], pa.int64()),
        pa.array([e.client_id for e in entries], pa.string()),
        pa.array([e.peer for e in entries], pa.string()),
        pa.array([e.api_version for e in entries], pa.int16()),
        pa.array([e.view_seq for e in entries], pa.int64()),
        pa.array([e.rule_seq for e in entries], pa.int64()),
        pa.array([e.latency_ms for e in entries], pa.float32()),
        pa.array([e.topics for e in entries], pa.list_(pa.string())),
        _lists(offsets, topic_no, pa.int8()),
        _lists(offsets, partition, pa.int32()),
        _lists(offsets, records, pa.int32()),
        _lists(offsets, nbytes, pa.int32()),
        pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(errors, pa.int16())),
        pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(bases, pa.int64())),
        pa.array(np_index, pa.list_(pa.int32())),
        pa.array(np_decision, pa.list_(pa.string())),
        pa.array(np_reason, pa.list_(pa.string())),
        pa.array(np_code, pa.list_(pa.int16())),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=DECISION_SCHEMA), unreadable


def snapshot_batch(rows: Sequence[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(list(rows), schema=SNAPSHOT_SCHEMA)
