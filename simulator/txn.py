"""Producer ids and transactions for the simulator (a TEST DOUBLE).

Invariants: runs on the event-loop thread only. Producer ids are unique and
increasing. A transactional id maps to one (producer id, epoch); a new
InitProducerId for it bumps the epoch, aborting any open transaction, which
fences the previous producer. Partitions and group offsets join a transaction
until EndTxn, which writes COMMIT/ABORT markers (through `markers`) and, on
commit, makes the transaction's offsets visible in the group coordinator.
Transaction timeouts and two-phase commit are not simulated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from simulator import errors
from simulator.groups import CommittedOffset, GroupCoordinator

TopicPartition = tuple[str, int]
# (producer id, epoch, commit, partitions) -> None
MarkerWriter = Callable[[int, int, bool, set[TopicPartition]], None]
MAX_EPOCH = 32767


@dataclass
class Transaction:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    partitions: set[TopicPartition] = field(default_factory=set)
    pending_offsets: dict[str, dict[TopicPartition, CommittedOffset]] = field(
        default_factory=dict
    )

    @property
    def ongoing(self) -> bool:
        return bool(self.partitions or self.pending_offsets)


class TransactionCoordinator:
    def __init__(self, groups: GroupCoordinator, markers: MarkerWriter) -> None:
        self._groups = groups
        self._markers = markers
        self._next_producer_id = 1000
        self.transactions: dict[str, Transaction] = {}

    def _new_producer_id(self) -> int:
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid

    def init_producer_id(
        self, transactional_id: str | None, timeout_ms: int
    ) -> tuple[int, int, int]:
        """(error, producer id, epoch)."""
        if transactional_id is None or transactional_id == "":
            return errors.NONE, self._new_producer_id(), 0
        txn = self.transactions.get(transactional_id)
        if txn is None:
            txn = Transaction(transactional_id, self._new_producer_id(), 0, timeout_ms)
            self.transactions[transactional_id] = txn
            return errors.NONE, txn.producer_id, txn.producer_epoch
        if txn.ongoing:
            self._finish(txn, commit=False)
        txn.timeout_ms = timeout_ms
        if txn.producer_epoch + 1 >= MAX_EPOCH:
            txn.producer_id, txn.producer_epoch = self._new_producer_id(), 0
        else:
            txn.producer_epoch += 1
        return errors.NONE, txn.producer_id, txn.producer_epoch

    def _check(self, transactional_id: str, producer_id: int, epoch: int) -> Transaction | int:
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return errors.INVALID_PRODUCER_ID_MAPPING
        if epoch != txn.producer_epoch:
            return errors.PRODUCER_FENCED
        return txn

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[TopicPartition]
    ) -> int:
        txn = self._check(transactional_id, producer_id, epoch)
        if isinstance(txn, int):
            return txn
        txn.partitions.update(partitions)
        return errors.NONE

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> int:
        txn = self._check(transactional_id, producer_id, epoch)
        if isinstance(txn, int):
            return txn
        txn.pending_offsets.setdefault(group, {})
        return errors.NONE

    def commit_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group: str,
        offsets: dict[TopicPartition, CommittedOffset],
    ) -> int:
        txn = self._check(transactional_id, producer_id, epoch)
        if isinstance(txn, int):
            return txn
        if group not in txn.pending_offsets:
            return errors.INVALID_TXN_STATE
        txn.pending_offsets[group].update(offsets)
        return errors.NONE

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> int:
        txn = self._check(transactional_id, producer_id, epoch)
        if isinstance(txn, int):
            return txn
        self._finish(txn, commit)
        return errors.NONE

    def _finish(self, txn: Transaction, commit: bool) -> None:
        if txn.partitions:
            self._markers(txn.producer_id, txn.producer_epoch, commit, set(txn.partitions))
        if commit:
            for group, offsets in txn.pending_offsets.items():
                self._groups.store_offsets(group, offsets)
        txn.partitions.clear()
        txn.pending_offsets.clear()
