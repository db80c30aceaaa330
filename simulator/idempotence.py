"""Per-partition idempotent-producer state for the simulator (a TEST DOUBLE).

Invariant: for every producer id seen on a partition the table holds the
current epoch, the last appended sequence and the metadata of up to five most
recent batches. A batch is appended only if `check` said APPEND, and then
`record` is called with its base offset; a retried batch (same epoch and
sequence range as a cached one) is reported as a duplicate with its original
base offset, so it is never appended twice. The rules follow Kafka's
ProducerStateManager in simplified form.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from simulator.errors import INVALID_PRODUCER_EPOCH, NONE, OUT_OF_ORDER_SEQUENCE_NUMBER
from simulator.records import BatchHeader

CACHED_BATCHES = 5


@dataclass(frozen=True)
class Verdict:
    """APPEND (error 0, duplicate_of None), duplicate (error 0, original offset) or error."""

    error: int = NONE
    duplicate_of: int | None = None

    @property
    def append(self) -> bool:
        return self.error == NONE and self.duplicate_of is None


@dataclass
class _ProducerEntry:
    epoch: int
    last_sequence: int = -1
    recent: deque[tuple[int, int, int]] = field(
        default_factory=lambda: deque(maxlen=CACHED_BATCHES)
    )  # (first sequence, last sequence, base offset)


def _in_sequence(last: int, first: int) -> bool:
    return first == (last + 1) % (2**31)


class ProducerStateTable:
    """Sequence/epoch bookkeeping of one partition."""

    def __init__(self) -> None:
        self._entries: dict[int, _ProducerEntry] = {}

    def check(self, header: BatchHeader) -> Verdict:
        if not header.has_producer_id or header.base_sequence < 0:
            return Verdict()
        entry = self._entries.get(header.producer_id)
        if entry is None:
            return Verdict()
        if header.producer_epoch < entry.epoch:
            return Verdict(error=INVALID_PRODUCER_EPOCH)
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                return Verdict(error=OUT_OF_ORDER_SEQUENCE_NUMBER)
            return Verdict()
        for first, last, base_offset in entry.recent:
            if first == header.base_sequence and last == header.last_sequence:
                return Verdict(duplicate_of=base_offset)
        if not _in_sequence(entry.last_sequence, header.base_sequence):
            return Verdict(error=OUT_OF_ORDER_SEQUENCE_NUMBER)
        return Verdict()

    def record(self, header: BatchHeader, base_offset: int) -> None:
        if not header.has_producer_id or header.base_sequence < 0:
            return
        entry = self._entries.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = _ProducerEntry(epoch=header.producer_epoch)
            self._entries[header.producer_id] = entry
        entry.last_sequence = header.last_sequence
        entry.recent.append((header.base_sequence, header.last_sequence, base_offset))

    def epoch_of(self, producer_id: int) -> int | None:
        entry = self._entries.get(producer_id)
        return None if entry is None else entry.epoch
