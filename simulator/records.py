"""Record-batch (magic v2) byte helpers for the simulator (a TEST DOUBLE).

Invariant: functions here only look at or build bytes; they never decompress
or re-encode records. Offsets are assigned by rewriting a batch's first 8
bytes (baseOffset) and its partitionLeaderEpoch (bytes 12..16); neither is
covered by the batch CRC, so stored batches stay valid for every client.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# Layout of the v2 batch header (offsets in bytes).
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class CorruptBatchError(ValueError):
    """The bytes are not a sequence of whole magic-v2 record batches."""


@dataclass(frozen=True)
class BatchHeader:
    """The fixed fields of a magic-v2 record batch."""

    base_offset: int
    length: int  # batchLength: bytes after the length field
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)

    @property
    def offset_count(self) -> int:
        """How many offsets the batch occupies."""
        return self.last_offset_delta + 1


def parse_header(batch: bytes | memoryview) -> BatchHeader:
    if len(batch) < HEADER_SIZE:
        raise CorruptBatchError(f"batch of {len(batch)} bytes is shorter than a v2 header")
    header = BatchHeader(*_HEADER.unpack_from(batch, 0))
    if header.magic != 2:
        raise CorruptBatchError(f"unsupported record batch magic {header.magic}")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptBatchError("negative record count in batch header")
    return header


def split_batches(data: bytes) -> list[tuple[BatchHeader, bytes]]:
    """Cut a records field into whole batches, each parsed; garbage raises."""
    out: list[tuple[BatchHeader, bytes]] = []
    pos = 0
    total = len(data)
    while pos < total:
        if total - pos < LOG_OVERHEAD:
            raise CorruptBatchError("trailing bytes after the last record batch")
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or end > total:
            raise CorruptBatchError(f"bad batch length {length}")
        batch = bytes(data[pos:end])
        out.append((parse_header(batch), batch))
        pos = end
    return out


def with_base_offset(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """The same batch with baseOffset and partitionLeaderEpoch rewritten."""
    epoch = struct.pack(">i", leader_epoch)
    return struct.pack(">q", base_offset) + batch[8:12] + epoch + batch[16:]
