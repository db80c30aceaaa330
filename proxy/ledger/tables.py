"""Arrow record batches of ledger entries and snapshot rows (the writer thread only).

This module imports pyarrow (about 50 MB of resident memory): the ledger imports it
in its writer thread when that starts, never on the serving path's import.

Invariants: a batch has exactly the columns of :mod:`proxy.ledger.schema`, typed; the
broker's answer is kept as its bytes and ``error``/``base_offset`` left null (the
pipeline reads them from the answer: :mod:`pipeline.answers`); the queued requests'
bytes (:mod:`proxy.ledger.buffer`) are reinterpreted, not decoded: the work is a few
dozen Arrow calls per batch, none per request or partition but the strings' conversion.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from proxy.ledger.buffer import (
    F_ANSWER_LEN,
    F_API_VERSION,
    F_IDS,
    F_LATENCY,
    F_RACKS_CODE,
    F_REQ,
    F_ROWS,
    F_RULE_SEQ,
    F_TOPICS,
    F_VIEW_SEQ,
    F_WALL,
    ROW,
    Chunk,
)
from proxy.ledger.entry import OUTCOMES, RACKS_CODE
from proxy.ledger.schema import DECISION_COLUMNS, SNAPSHOT_COLUMNS


def arrow_type(name: str) -> pa.DataType:
    """``int32``, ``list<string>``, ``list<list<int32>>``... as an Arrow type."""
    if name.startswith("list<") and name.endswith(">"):
        return pa.list_(arrow_type(name[5:-1]))
    return pa.type_for_alias(name)


def arrow_schema(columns: Sequence[tuple[str, str]]) -> pa.Schema:
    return pa.schema([pa.field(n, arrow_type(t)) for n, t in columns])


# A handful of strings repeated for every partition that did not pass: written as
# indices (the outcome codes themselves) into one dictionary each, which the stream
# holds once; Parquet stores them dictionary-encoded and Spark reads them as the
# strings. As plain strings they were two thirds of a batch's bytes before compression.
_DICTIONARY_ENCODED = ("np_decision", "np_reason")
_CODED = pa.list_(pa.dictionary(pa.int8(), pa.string()))
DECISION_SCHEMA = pa.schema([
    pa.field(n, _CODED if n in _DICTIONARY_ENCODED else arrow_type(t))
    for n, t in DECISION_COLUMNS])
SNAPSHOT_SCHEMA = arrow_schema(SNAPSHOT_COLUMNS)
_TYPES = {f.name: f.type for f in DECISION_SCHEMA}
_ZERO = pa.array([0], pa.int32())
# by outcome code: the decision, the reason, and the proxy's error code (-1: the request's)
# (code 0, passed, is never listed)
_DECISION = pa.array([d for d, _, _ in OUTCOMES], pa.string())
_REASON = pa.array([r for _, r, _ in OUTCOMES], pa.string())
_CODE = pa.array([c for _, _, c in OUTCOMES], pa.int32())
_RACKS_OUTCOMES = [bytes((i,)) for i, (_, _, c) in enumerate(OUTCOMES) if c == RACKS_CODE]


def _column(data: bytes | array[Any], kind: pa.DataType, length: int) -> pa.Array:
    """``length`` fixed-width values laid out in ``data`` as an Arrow array (no copy)."""
    return pa.Array.from_buffers(kind, length, [None, pa.py_buffer(data)])


class _Rows:
    """The fields of a chunk's fixed-size rows, each as a column (a field is a strided
    slice of an ``array``: one C loop, about half the time of a strided memoryview's
    ``tobytes``)."""

    def __init__(self, rows: bytes, count: int) -> None:
        self._int64s = array("q", rows)
        self._float64s = array("d", rows)
        self._int32s = array("i", rows)
        self._count = count

    def int64(self, field: int) -> pa.Array:
        return _column(self._int64s[field::ROW // 8], pa.int64(), self._count)

    def float64(self, field: int) -> pa.Array:
        return _column(self._float64s[field::ROW // 8], pa.float64(), self._count)

    def int32(self, field: int) -> pa.Array:
        return _column(self._int32s[field::ROW // 4], pa.int32(), self._count)


def _offsets(counts: pa.Array) -> pa.Array:
    """List offsets (int32, one more than ``counts``) from per-row lengths."""
    return pa.concat_arrays([_ZERO, pc.cumulative_sum(counts)])


def decision_batch(chunk: Chunk, instance: str, run: int) -> pa.RecordBatch:
    """A chunk of queued requests as one record batch: the fixed-size fields and the
    partitions reinterpreted from their bytes, the strings converted once per batch,
    the sparse decisions derived from the outcome codes, all in Arrow's C code (no
    Python work per request or partition)."""
    n = chunk.count
    rows = _Rows(chunk.rows, n)
    counts = rows.int32(F_ROWS)
    offsets = _offsets(counts)
    parts = array("i", chunk.parts)
    total = chunk.partitions

    def per_partition(field: int, kind: pa.DataType) -> pa.Array:
        values = _column(parts[field::4], pa.int32(), total)
        return pa.ListArray.from_arrays(offsets, values if kind == pa.int32() else
                                        values.cast(kind))

    latency = rows.float64(F_LATENCY)
    answer_len = rows.int32(F_ANSWER_LEN)
    answers = pa.Array.from_buffers(pa.binary(), n, [
        None, _offsets(answer_len).buffers()[1], pa.py_buffer(chunk.answers)])
    id_count = rows.int32(F_IDS)  # 0: named by name (null)
    columns: list[Any] = [
        rows.float64(F_WALL),
        pa.repeat(pa.scalar(instance, pa.string()), n),
        pa.repeat(pa.scalar(run, pa.int64()), n),
        rows.int64(F_REQ),
        pa.array(chunk.who[0::2], pa.string()),
        pa.array(chunk.who[1::2], pa.string()),
        rows.int32(F_API_VERSION).cast(pa.int16()),
        rows.int64(F_VIEW_SEQ),
        rows.int64(F_RULE_SEQ),
        pc.if_else(pc.is_nan(latency), pa.scalar(None, pa.float64()), latency).cast(
            pa.float32()),
        pa.ListArray.from_arrays(_offsets(rows.int32(F_TOPICS)),
                                 pa.array(chunk.topics, pa.string())),
        per_partition(0, pa.int8()),  # topic_no: a request names <= 127 topics
        per_partition(1, pa.int32()),
        per_partition(2, pa.int32()),
        per_partition(3, pa.int32()),
        pa.ListArray.from_arrays(_offsets(id_count), pa.array(chunk.topic_ids, pa.binary()),
                                 mask=pc.equal(id_count, 0)),
        pc.if_else(pc.equal(answer_len, 0), pa.scalar(None, pa.binary()), answers),
        pa.nulls(n, _TYPES["error"]),
        pa.nulls(n, _TYPES["base_offset"]),
        *_not_passed(chunk, offsets, counts, rows.int32(F_RACKS_CODE)),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=DECISION_SCHEMA)


def _not_passed(chunk: Chunk, offsets: pa.Array, counts: pa.Array, racks_code: pa.Array
                ) -> list[pa.Array]:
    """np_index, np_decision, np_reason, np_code: per request, the partitions that did not
    simply pass (a null list when all did)."""
    n, total = chunk.count, chunk.partitions
    names = ("np_index", "np_decision", "np_reason", "np_code")
    passed = chunk.codes.count(0)
    if passed == total:
        return [pa.nulls(n, _TYPES[name]) for name in names]
    codes = _column(chunk.codes, pa.uint8(), total)
    parent = pc.list_parent_indices(pa.ListArray.from_arrays(offsets, codes))
    position = pc.subtract(_arange(total), pc.take(offsets, parent))  # within its request
    if passed:  # keep the others
        kept = pc.not_equal(codes, 0)
        np_offsets = pc.take(_offsets(kept.cast(pa.int32())), offsets)
        codes, parent, position = (pc.filter(codes, kept), pc.filter(parent, kept),
                                   pc.filter(position, kept))
        none = pc.equal(np_offsets.slice(1), np_offsets.slice(0, n))
    else:  # none passed (observe mode on a rack shortfall): every partition is listed
        np_offsets, none = offsets, pc.equal(counts, 0)
    code = pc.take(_CODE, codes)
    if any(racks in chunk.codes for racks in _RACKS_OUTCOMES):  # the request's own code
        code = pc.if_else(pc.equal(code, RACKS_CODE), pc.take(racks_code, parent), code)
    indices = codes.cast(pa.int8())
    values = (position, pa.DictionaryArray.from_arrays(indices, _DECISION),
              pa.DictionaryArray.from_arrays(indices, _REASON), code.cast(pa.int16()))
    return [pa.ListArray.from_arrays(np_offsets, v.cast(_TYPES[name].value_type), mask=none)
            for name, v in zip(names, values, strict=True)]


_ARANGE = [pa.array([], pa.int32())]


def _arange(length: int) -> pa.Array:
    """0, 1, ... length - 1 (int32): a slice of one array kept for the next batches."""
    if len(_ARANGE[0]) < length:
        _ARANGE[0] = pa.array(range(max(length, 2 * len(_ARANGE[0]))), pa.int32())
    return _ARANGE[0].slice(0, length)


def snapshot_batch(rows: Sequence[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(list(rows), schema=SNAPSHOT_SCHEMA)
