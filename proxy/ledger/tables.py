"""Arrow record batches of ledger entries and snapshot rows (the writer thread only).

This module imports pyarrow (about 50 MB of resident memory): the ledger imports it
in its writer thread when that starts, never on the serving path's import.

Invariants: a batch has exactly the columns of :mod:`proxy.ledger.schema`, typed; the
broker's answer is kept as its bytes and ``error``/``base_offset`` left null (the
pipeline reads them from the answer: :mod:`pipeline.answers`); the work is a few
passes over a batch's entries, not a few per entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, chain
from operator import itemgetter
from typing import Any

import pyarrow as pa

from proxy.ledger.entry import (
    ANSWER,
    API_VERSION,
    BYTES,
    CLIENT_ID,
    LATENCY_MS,
    NOT_PASSED,
    PARTITION,
    PEER,
    RECORDS,
    REQ,
    ROWS,
    RULE_SEQ,
    TOPIC_IDS,
    TOPIC_NO,
    TOPICS,
    VIEW_SEQ,
    WALL,
    Row,
)
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
_STRINGS = pa.list_(pa.string())
_BINARIES = pa.list_(pa.binary())
_INT32S = pa.list_(pa.int32())
_INT16S = pa.list_(pa.int16())
_ERRORS = DECISION_SCHEMA.field("error").type
_OFFSETS = DECISION_SCHEMA.field("base_offset").type


def _column(entries: Sequence[Row], field: int, offsets: pa.Array, kind: pa.DataType
            ) -> pa.Array:
    values = list(chain.from_iterable(map(itemgetter(field), entries)))
    return pa.ListArray.from_arrays(offsets, pa.array(values, kind))


def _field(entries: Sequence[Row], field: int) -> list[Any]:
    return list(map(itemgetter(field), entries))


def decision_batch(entries: Sequence[Row], instance: str, run: int) -> pa.RecordBatch:
    """The entries (:meth:`Entry.row`) as one record batch: a few passes over them, each in C
    where it can be (the broker's answers are kept as their bytes, read by the pipeline)."""
    n = len(entries)
    offsets = pa.array([0, *accumulate(_field(entries, ROWS))], pa.int32())
    np_index: list[list[int] | None] = [None] * n
    np_decision: list[list[str] | None] = [None] * n
    np_reason: list[list[str] | None] = [None] * n
    np_code: list[list[int | None] | None] = [None] * n
    for i, np in enumerate(_field(entries, NOT_PASSED)):
        if np is not None:  # the rare request where some partition did not simply pass
            np_index[i] = [x[0] for x in np]
            np_decision[i] = [x[1] for x in np]
            np_reason[i] = [x[2] for x in np]
            np_code[i] = [x[3] for x in np]
    columns: list[Any] = [
        pa.array(_field(entries, WALL), pa.float64()),
        pa.array([instance] * n, pa.string()),
        pa.array([run] * n, pa.int64()),
        pa.array(_field(entries, REQ), pa.int64()),
        pa.array(_field(entries, CLIENT_ID), pa.string()),
        pa.array(_field(entries, PEER), pa.string()),
        pa.array(_field(entries, API_VERSION), pa.int16()),
        pa.array(_field(entries, VIEW_SEQ), pa.int64()),
        pa.array(_field(entries, RULE_SEQ), pa.int64()),
        pa.array(_field(entries, LATENCY_MS), pa.float32()),
        pa.array(_field(entries, TOPICS), _STRINGS),
        _column(entries, TOPIC_NO, offsets, pa.int8()),
        _column(entries, PARTITION, offsets, pa.int32()),
        _column(entries, RECORDS, offsets, pa.int32()),
        _column(entries, BYTES, offsets, pa.int32()),
        pa.array(_field(entries, TOPIC_IDS), _BINARIES),
        pa.array(_field(entries, ANSWER), pa.binary()),
        pa.nulls(n, _ERRORS),
        pa.nulls(n, _OFFSETS),
        pa.array(np_index, _INT32S),
        pa.array(np_decision, _STRINGS),
        pa.array(np_reason, _STRINGS),
        pa.array(np_code, _INT16S),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=DECISION_SCHEMA)


def snapshot_batch(rows: Sequence[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(list(rows), schema=SNAPSHOT_SCHEMA)
