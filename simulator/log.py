"""One partition's log in the simulator (a TEST DOUBLE: one shared copy, no replicas).

Invariant: batches are stored as raw bytes in offset order, contiguous:
each stored batch's baseOffset equals the previous batch's next offset, and
`log_end_offset` is the next offset to assign. Every replica in the ISR is
assumed to hold the whole log, so the high watermark equals the log end
offset. Transactions are not simulated (the simulator refuses them), so the last
stable offset is the high watermark too.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from kafka.record import MemoryRecords

from simulator.idempotence import ProducerStateTable
from simulator.records import BatchHeader, with_base_offset


@dataclass(frozen=True)
class StoredRecord:
    """One decoded record, for tests that count what was appended."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes | None]]


class PartitionLog:
    """Append-only batch store with idempotent-producer state."""

    def __init__(self) -> None:
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.producers = ProducerStateTable()
        self._bases: list[int] = []
        self._batches: list[bytes] = []
        self.appended_records = 0

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log_end_offset

    def append(self, header: BatchHeader, batch: bytes, leader_epoch: int) -> int:
        """Store one batch at the log end; returns its base offset."""
        base = self.log_end_offset
        self._bases.append(base)
        self._batches.append(with_base_offset(batch, base, leader_epoch))
        self.log_end_offset = base + header.offset_count
        self.appended_records += header.records_count
        self.producers.record(header, base)
        return base

    def read(self, offset: int, max_bytes: int, upper: int) -> bytes:
        """Whole batches from the one containing `offset`, below `upper`.

        At least one batch is returned when any is available (KIP-74), then
        batches are added while the total stays within `max_bytes`.
        """
        if offset >= upper or not self._batches:
            return b""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        out: list[bytes] = []
        size = 0
        while i < len(self._batches) and self._bases[i] < upper:
            batch = self._batches[i]
            if out and size + len(batch) > max_bytes:
                break
            out.append(batch)
            size += len(batch)
            i += 1
        return b"".join(out)

    def records(self) -> list[StoredRecord]:
        """Every record in the log, decoded."""
        out: list[StoredRecord] = []
        mem = MemoryRecords(b"".join(self._batches))
        while True:
            batch = mem.next_batch()
            if batch is None:
                break
            for rec in batch:
                out.append(
                    StoredRecord(rec.offset, rec.key, rec.value, rec.timestamp, list(rec.headers))
                )
        return out

    def batches(self) -> list[bytes]:
        """The stored batches (with their assigned base offsets), oldest first."""
        return list(self._batches)
