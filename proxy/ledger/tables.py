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
from collections.abc import Callable, Sequence
from itertools import accumulate
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
    """The fields of a chunk's fixed-size rows, each as an ``array`` (a field is a strided
    slice: one C loop, about half the time of a strided memoryview's ``tobytes``) or as
    a column."""

    def __init__(self, rows: bytes, count: int) -> None:
        self._int64s = array("q", rows)
        self._float64s = array("d", rows)
        self._int32s = array("i", rows)
        self._float32s = array("f", rows)
        self._int16s = array("h", rows)
        self._count = count

    def ints(self, field: int) -> array[int]:
        return self._int32s[field::ROW // 4]

    def int64(self, field: int) -> pa.Array:
        return _column(self._int64s[field::ROW // 8], pa.int64(), self._count)

    def float64(self, field: int) -> pa.Array:
        return _column(self._float64s[field::ROW // 8], pa.float64(), self._count)

    def float32(self, field: int) -> pa.Array:
        return _column(self._float32s[field::ROW // 4], pa.float32(), self._count)

    def int16(self, field: int) -> pa.Array:
        return _column(self._int16s[field::ROW // 2], pa.int16(), self._count)


def _same(values: array[int] | bytes, value: int) -> bool:
    """Every one of ``values`` is ``value`` (a C loop)."""
    return values.count(value) == len(values)


def _offsets(counts: array[int]) -> pa.Array:
    """List offsets (int32, one more than ``counts``) from per-row lengths, without an
    Arrow compute call (in a writer that runs every few seconds, a call's dispatch costs
    more than summing a batch's few thousand lengths in a C loop)."""
    n = len(counts)
    if not n:
        return _ZERO
    first = counts[0]
    if first and _same(counts, first):  # k each: 0, k, 2k...
        if first == 1:
            return _arange(n + 1)
        offsets = array("i", range(0, (n + 1) * first, first))
    else:
        offsets = array("i", accumulate(counts, initial=0))
    return _column(offsets, pa.int32(), n + 1)


def _cumulative(counts: pa.Array) -> pa.Array:
    return pa.concat_arrays([_ZERO, pc.cumulative_sum(counts)])


def _repeat(value: int, length: int, kind: pa.DataType) -> pa.Array:
    """``length`` times ``value``, as ``kind`` (int8, int16 or int32)."""
    code = {1: "b", 2: "h", 4: "i"}[kind.bit_width // 8]
    return _column(array(code, [value]) * length, kind, length)


def decision_batch(chunk: Chunk, instance: str, run: int) -> pa.RecordBatch:
    """A chunk of queued requests as one record batch: the fixed-size fields and the
    partitions reinterpreted from their bytes, the strings converted once per batch,
    the sparse decisions derived from the outcome codes, all in C code (no Python work
    per request or partition).

    A batch costs mostly the Arrow calls that build it, each dearer in a writer that
    runs every few seconds (its code no longer in the caches) than in a loop; so what a
    batch usually is (requests of one topic, each answered, named by name; the
    partitions sharing one outcome) is built without the calls the general case needs."""
    n = chunk.count
    rows = _Rows(chunk.rows, n)
    counts = rows.ints(F_ROWS)
    offsets = _offsets(counts)
    parts = array("i", chunk.parts)
    total = chunk.partitions

    def per_partition(field: int) -> pa.Array:
        return pa.ListArray.from_arrays(offsets, _column(parts[field::4], pa.int32(), total))

    topic_no = parts[0::4]
    answer_len = rows.ints(F_ANSWER_LEN)
    answered = (pc.not_equal(_column(answer_len, pa.int32(), n), 0) if 0 in answer_len
                else None)
    latency = rows.float32(F_LATENCY)
    answers = pa.Array.from_buffers(pa.binary(), n, [
        None, _offsets(answer_len).buffers()[1], pa.py_buffer(chunk.answers)])
    if answered is not None:  # null where the proxy answered alone
        latency = pc.if_else(answered, latency, pa.scalar(None, pa.float32()))
        answers = pc.if_else(answered, answers, pa.scalar(None, pa.binary()))
    id_count = rows.ints(F_IDS)  # 0: named by name (null)
    columns: list[Any] = [
        rows.float64(F_WALL),
        _constant(instance, pa.string(), n),
        _constant(run, pa.int64(), n),
        rows.int64(F_REQ),
        pa.array(chunk.who[0::2], pa.string()),
        pa.array(chunk.who[1::2], pa.string()),
        rows.int16(F_API_VERSION),
        rows.int64(F_VIEW_SEQ),
        rows.int64(F_RULE_SEQ),
        latency,
        pa.ListArray.from_arrays(_offsets(rows.ints(F_TOPICS)),
                                 pa.array(chunk.topics, pa.string())),
        # topic_no: a request names <= 127 topics
        pa.ListArray.from_arrays(offsets, _repeat(0, total, pa.int8())
                                 if _same(topic_no, 0) else
                                 _column(topic_no, pa.int32(), total).cast(pa.int8())),
        per_partition(1),
        per_partition(2),
        per_partition(3),
        pa.nulls(n, _TYPES["topic_ids"]) if not chunk.topic_ids else
        pa.ListArray.from_arrays(_offsets(id_count), pa.array(chunk.topic_ids, pa.binary()),
                                 mask=pc.equal(_column(id_count, pa.int32(), n), 0)),
        answers,
        pa.nulls(n, _TYPES["error"]),
        pa.nulls(n, _TYPES["base_offset"]),
        *_not_passed(chunk, offsets, counts, rows.ints(F_RACKS_CODE)),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=DECISION_SCHEMA)


_NP = ("np_index", "np_decision", "np_reason", "np_code")


def _not_passed(chunk: Chunk, offsets: pa.Array, counts: array[int], racks_code: array[int]
                ) -> list[pa.Array]:
    """np_index, np_decision, np_reason, np_code: per request, the partitions that did not
    simply pass (a null list when all did)."""
    n, total = chunk.count, chunk.partitions
    codes = chunk.codes
    if _same(codes, 0):
        return [pa.nulls(n, _TYPES[name]) for name in _NP]
    if _same(codes, codes[0]):  # none passed, all alike (observe mode on a rack shortfall)
        return _alike(codes[0], total, offsets, counts, racks_code)
    column = _column(codes, pa.uint8(), total)
    parent = _parents(offsets, total)
    position = _positions(offsets, parent, total)
    kept = pc.not_equal(column, 0)
    np_offsets = pc.take(_cumulative(kept.cast(pa.int32())), offsets)
    column, parent, position = (pc.filter(column, kept), pc.filter(parent, kept),
                                pc.filter(position, kept))
    none = pc.equal(np_offsets.slice(1), np_offsets.slice(0, n))
    code = pc.take(_CODE, column)
    if any(racks in codes for racks in _RACKS_OUTCOMES):  # the request's own code
        code = pc.if_else(pc.equal(code, RACKS_CODE),
                          pc.take(_column(racks_code, pa.int32(), n), parent), code)
    indices = column.cast(pa.int8())
    values = (position, pa.DictionaryArray.from_arrays(indices, _DECISION),
              pa.DictionaryArray.from_arrays(indices, _REASON), code.cast(pa.int16()))
    return [pa.ListArray.from_arrays(np_offsets, v.cast(_TYPES[name].value_type), mask=none)
            for name, v in zip(_NP, values, strict=True)]


def _alike(code: int, total: int, offsets: pa.Array, counts: array[int],
           racks_code: array[int]) -> list[pa.Array]:
    """The np_* columns when every partition has outcome ``code``: each request lists all
    its partitions."""
    n = len(counts)
    if n and _same(counts, counts[0]):  # k partitions each: 0..k-1, n times
        position = _column(array("i", range(counts[0])) * n, pa.int32(), total)
    else:
        position = _positions(offsets, _parents(offsets, total), total)
    indices = _repeat(code, total, pa.int8())
    error = OUTCOMES[code][2]
    if error is None:
        codes = pa.nulls(total, pa.int16())
    elif error != RACKS_CODE:
        codes = _repeat(error, total, pa.int16())
    elif n and _same(racks_code, racks_code[0]):
        codes = _repeat(racks_code[0], total, pa.int16())
    else:  # each request's own code, for each of its partitions
        codes = pc.take(_column(racks_code, pa.int32(), n),
                        _parents(offsets, total)).cast(pa.int16())
    none = pc.equal(_column(counts, pa.int32(), n), 0) if 0 in counts else None
    values = (position, pa.DictionaryArray.from_arrays(indices, _DECISION),
              pa.DictionaryArray.from_arrays(indices, _REASON), codes)
    return [pa.ListArray.from_arrays(offsets, v, mask=none) for v in values]


def _parents(offsets: pa.Array, total: int) -> pa.Array:
    """For each of ``total`` partitions, the number of its request."""
    return pc.list_parent_indices(pa.ListArray.from_arrays(offsets, _arange(total)))


def _positions(offsets: pa.Array, parent: pa.Array, total: int) -> pa.Array:
    """For each of ``total`` partitions, its position within its request."""
    return pc.subtract(_arange(total), pc.take(offsets, parent))


_KEPT: dict[tuple[object, pa.DataType], pa.Array] = {}


def _kept(key: object, kind: pa.DataType, length: int,
          make: Callable[[int], pa.Array]) -> pa.Array:
    """The first ``length`` values of an array ``make`` builds, kept for the next batches
    (one per key: a few, for the life of the writer); rebuilt twice as long when short."""
    have = _KEPT.get((key, kind))
    if have is None or len(have) < length:
        have = _KEPT[key, kind] = make(max(length, 2 * len(have) if have is not None else 64))
    return have.slice(0, length)


def _arange(length: int) -> pa.Array:
    """0, 1, ... length - 1 (int32)."""
    return _kept(_arange, pa.int32(), length, lambda n: pa.array(range(n), pa.int32()))


def _constant(value: object, kind: pa.DataType, length: int) -> pa.Array:
    """``length`` times ``value`` (the batch's instance and run)."""
    return _kept(value, kind, length, lambda n: pa.repeat(pa.scalar(value, kind), n))


def snapshot_batch(rows: Sequence[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(list(rows), schema=SNAPSHOT_SCHEMA)
