"""Suspicion: which written partitions' leadership changed between two cluster views (pure).

A partition the proxy acknowledged writes for is suspect when the view shows
- an unclean election: a new leader that was not in the last ISR the proxy saw;
- any other leader change (a clean election loses acks=1 writes its new leader had not
  copied yet; acks=all writes it cannot lose, and the check proves that cheaply);
- a partition coming back after having no leader;
- a leader epoch that jumps by more than one (an election the proxy did not see).
Only topics whose state object changed between the views are read (the view keeps the
very same object for an unchanged topic), and only partitions the proxy wrote.

Invariant: pure; ``last_isr`` (the last non-empty ISR seen per written partition) is
the only thing it updates, and only for written partitions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from proxy.cluster.view import ClusterView
from proxy.losswatch.state import PartitionKey, TopicKey

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class Suspicion:
    key: PartitionKey
    leader: int  # the new leader (-1: none yet)
    epoch: int
    moved: bool  # leadership moved to another broker (or to none)
    cause: str  # for the loss report, e.g. "unclean election: leader 2 (epoch 7) ..."

    @property
    def leaderless(self) -> bool:
        return self.leader == NO_LEADER


def suspicions(old: ClusterView, new: ClusterView,
               written: Iterable[tuple[TopicKey, Iterable[int]]],
               last_isr: dict[PartitionKey, tuple[int, ...]]) -> list[Suspicion]:
    """The written partitions whose leadership ``new`` shows changed since ``old``."""
    out: list[Suspicion] = []
    for topic_key, indexes in written:
        before = old.topic(topic_key)
        after = new.topic(topic_key)
        if after is None or before is after:
            continue
        old_rows = before.partitions.rows if before is not None else {}
        new_rows = after.partitions.rows
        for index in indexes:
            row = new_rows.get(index)
            if row is None:
                continue
            key = (topic_key, index)
            leader, epoch, isr = row[2], row[3], row[5]
            prior = old_rows.get(index)
            if prior is None:
                if isr:
                    last_isr[key] = tuple(isr)
                continue
            seen_isr = last_isr.get(key) or (tuple(prior[5]) if prior[5] else None)
            if isr:
                last_isr[key] = tuple(isr)
            was, was_epoch = prior[2], prior[3]
            cause = _cause(was, was_epoch, leader, epoch, seen_isr)
            if cause is not None:
                out.append(Suspicion(key, leader, epoch, leader != was, cause))
    return out


def _cause(was: int, was_epoch: int, leader: int, epoch: int,
           seen_isr: tuple[int, ...] | None) -> str | None:
    if leader == was:
        if leader != NO_LEADER and epoch > was_epoch + 1 >= 1:
            return f"leader epoch jump {was_epoch} -> {epoch} (leader {leader})"
        return None
    if leader == NO_LEADER:
        return f"no leader (was {was}, epoch {was_epoch})"
    isr_text = "[" + ", ".join(map(str, seen_isr)) + "]" if seen_isr else "none"
    if seen_isr is not None and leader not in seen_isr:
        return (f"unclean election: leader {leader} (epoch {epoch}) was not in the last "
                f"ISR seen {isr_text}")
    if was == NO_LEADER:
        return f"back from no leader: leader {leader} (epoch {epoch}), last ISR seen {isr_text}"
    return f"leader change {was} -> {leader} (epoch {was_epoch} -> {epoch})"
