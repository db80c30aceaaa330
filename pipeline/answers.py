"""The broker's answers in a decisions table, read into per-partition error codes and offsets.

The proxy keeps each forwarded request's Produce response frame as it came (the
``answer`` column, with ``api_version`` and, from v13, the request's ``topic_ids``)
and leaves ``error`` and ``base_offset`` null: reading the answers is work the
reports need, so it is done here, once per file, with the project's own reader
(:func:`protocol.produce_results.produce_results`), before Spark sees the rows.

Invariants: a row whose ``answer`` is null keeps the ``error`` and ``base_offset`` it
has (rows written by other tools, or requests the proxy answered alone); a partition
missing from its answer, or an answer that cannot be read, gets nulls (and the latter
is counted); the result has no ``answer`` nor ``topic_ids`` column. Imports pyarrow and
``protocol`` only (no Spark).
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from protocol.primitives import ProtocolError
from protocol.produce_results import produce_results

DROPPED = ("answer", "topic_ids")


def _flat(table: pa.Table, name: str) -> list[Any]:
    column = table.column(name)
    if column.num_chunks != 1:
        column = column.combine_chunks()
    else:
        column = column.chunk(0)
    return column.flatten().to_pylist()


def fill_answers(table: pa.Table) -> tuple[pa.Table, int]:
    """The table with ``error`` and ``base_offset`` read from ``answer``, without the
    answer columns; and how many answers could not be read."""
    names = table.column_names
    lengths = pc.fill_null(pc.list_value_length(table.column("partition")), 0).to_pylist()
    answers = (table.column("answer").to_pylist() if "answer" in names
               else [None] * table.num_rows)
    versions = table.column("api_version").to_pylist()
    topics = table.column("topics").to_pylist()
    ids = (table.column("topic_ids").to_pylist() if "topic_ids" in names
           else [None] * table.num_rows)
    topic_no = _flat(table, "topic_no")
    partition = _flat(table, "partition")
    errors = _given(table, "error", lengths)
    bases = _given(table, "base_offset", lengths)
    unreadable = 0
    start = 0
    for row, n in enumerate(lengths):
        stop = start + n
        answer = answers[row]
        if answer is not None:
            try:
                results = produce_results(answer, versions[row])
            except ProtocolError:
                results = {}
                unreadable += 1
            keys = ids[row] or topics[row]
            get = results.get
            for j in range(start, stop):
                found = get((keys[topic_no[j]], partition[j]))
                if found is None:
                    errors[j] = bases[j] = None
                else:
                    errors[j], bases[j] = found
        start = stop
    offsets = pa.array([0, *accumulate(lengths)], pa.int32())
    out = table.drop_columns([n for n in (*DROPPED, "error", "base_offset") if n in names])
    out = out.append_column("error", pa.ListArray.from_arrays(offsets, pa.array(errors,
                                                                                  pa.int16())))
    out = out.append_column("base_offset", pa.ListArray.from_arrays(offsets, pa.array(
        bases, pa.int64())))
    return out, unreadable



def _given(table: pa.Table, name: str, lengths: list[int]) -> list[Any]:
    """A list column's values, one per partition (None for a row whose list is null)."""
    total = sum(lengths)
    if name not in table.column_names or table.column(name).null_count == table.num_rows:
        return [None] * total
    out: list[Any] = []
    for n, given in zip(lengths, table.column(name).to_pylist(), strict=True):
        out += given if given is not None and len(given) == n else [None] * n
    return out
