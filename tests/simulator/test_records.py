"""Unit tests: batch byte helpers, the partition log and idempotent-producer state."""

from __future__ import annotations

import pytest
from kafka.record import MemoryRecords

from simulator import errors
from simulator.log import PartitionLog
from simulator.records import (
    CorruptBatchError,
    parse_header,
    split_batches,
)
from tests.simulator.helpers import batch


def append(log: PartitionLog, raw: bytes) -> int:
    [(header, data)] = split_batches(raw)
    verdict = log.producers.check(header)
    if verdict.error:
        return -verdict.error
    if verdict.duplicate_of is not None:
        return verdict.duplicate_of
    return log.append(header, data, leader_epoch=5)


def test_header_fields() -> None:
    h = parse_header(batch([b"a", b"b", b"c"], producer_id=7, epoch=1, base_sequence=10))
    assert (h.records_count, h.last_offset_delta, h.producer_id) == (3, 2, 7)
    assert (h.base_sequence, h.last_sequence) == (10, 12)


def test_append_assigns_offsets_and_keeps_crc_valid() -> None:
    log = PartitionLog()
    assert append(log, batch([b"a", b"b"])) == 0
    assert append(log, batch([b"c"])) == 2
    assert log.log_end_offset == 3 == log.high_watermark
    assert [r.value for r in log.records()] == [b"a", b"b", b"c"]
    assert [r.offset for r in log.records()] == [0, 1, 2]
    for b in MemoryRecords(log.read(0, 1 << 20, 3)):
        assert b.validate_crc()
    assert log.read(2, 1, 3) == log.batches()[1]  # at least one batch, even past max bytes


def test_garbage_is_rejected() -> None:
    with pytest.raises(CorruptBatchError):
        split_batches(b"\x00" * 30)
    raw = bytearray(batch([b"x"]))
    raw[16] = 1  # magic 1
    with pytest.raises(CorruptBatchError):
        split_batches(bytes(raw))


def test_idempotent_dedup_and_out_of_order() -> None:
    log = PartitionLog()
    assert append(log, batch([b"a", b"b"], 9, 0, 0)) == 0
    assert append(log, batch([b"a", b"b"], 9, 0, 0)) == 0  # retry: same offset, not appended
    assert log.log_end_offset == 2
    assert append(log, batch([b"x"], 9, 0, 5)) == -errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, batch([b"c"], 9, 0, 2)) == 2
    assert append(log, batch([b"d"], 9, 1, 0)) == 3  # new epoch restarts at 0
    assert append(log, batch([b"e"], 9, 0, 3)) == -errors.INVALID_PRODUCER_EPOCH
    assert len(log.records()) == 4
