"""Reporting a confirmed loss: the metrics, one log line per partition, an optional sink.

``rackguard_acknowledged_records_lost_total{topic,acks}`` counts the acknowledged records
found lost; ``rackguard_partitions_with_confirmed_loss`` is the number of partitions with
a confirmed loss among those the watch tracks; a few more series show the watch's own
work (partitions tracked, checks by outcome). The log line is ERROR when acks=all records
were lost, WARNING for acks=1 alone, and names the topic, the partition, each lost offset
range with its acks level, the election that caused it and the client ids that wrote the
partition.

Invariant: reporting never raises into the watch (a failing sink is logged and ignored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge

from proxy.losswatch.rule import LostRange
from proxy.losswatch.state import ACKS_ALL, ACKS_LABELS

log = logging.getLogger("rackguard.losswatch")


@dataclass(frozen=True, slots=True)
class ConfirmedLoss:
    topic: str
    partition: int
    ranges: tuple[LostRange, ...]
    leader: int
    epoch: int
    epoch_start: int
    cause: str
    clients: tuple[str, ...]

    def spans(self) -> tuple[tuple[int, int, str], ...]:
        """Each lost range as (first offset, last offset, acks level)."""
        return tuple((r.first, r.last, ACKS_LABELS[r.level]) for r in self.ranges)

    def line(self) -> str:
        spans = ", ".join(f"offsets {r.first}..{r.last} ({r.count} record(s), "
                          f"acks={ACKS_LABELS[r.level]})" for r in self.ranges)
        return (f"acknowledged records lost: topic {self.topic} partition {self.partition}: "
                f"{spans}; leader {self.leader} (epoch {self.epoch}) starts its epoch at "
                f"offset {self.epoch_start}; cause: {self.cause}; written by client ids "
                f"{', '.join(self.clients) or 'unknown'}")


LossSink = Callable[[ConfirmedLoss], None]


def ledger_sink(record_loss: Callable[[str, int, int, int, tuple[tuple[int, int, str], ...],
                                       str, tuple[str, ...]], None]) -> LossSink:
    """A sink that hands each confirmed loss to the decision ledger's ``record_loss``
    (topic, partition, leader, epoch, ranges, cause, clients), so the ledger holds it."""
    return lambda loss: record_loss(loss.topic, loss.partition, loss.leader, loss.epoch,
                                    loss.spans(), loss.cause, loss.clients)


class LossReporter:
    def __init__(self, registry: CollectorRegistry | None,
                 sinks: Sequence[LossSink] = ()) -> None:
        self.lost = Counter(
            "rackguard_acknowledged_records_lost",
            "Records the proxy saw acknowledged that the partition's current leader no "
            "longer has (confirmed by the loss watch), by topic and acks level",
            ["topic", "acks"], registry=registry)
        self.partitions = Gauge(
            "rackguard_partitions_with_confirmed_loss",
            "Tracked partitions with a confirmed loss of acknowledged records",
            registry=registry)
        self.tracked = Gauge(
            "rackguard_loss_watch_tracked_partitions",
            "Partitions whose acknowledged offsets the loss watch holds", registry=registry)
        self.checks = Counter(
            "rackguard_loss_watch_checks",
            "Partition checks of the loss watch by outcome (loss, no_loss, inconclusive, "
            "failed)", ["outcome"], registry=registry)
        self._sinks = list(sinks)
        self._with_loss: set[tuple[str | bytes, int]] = set()

    def add_sink(self, sink: LossSink) -> None:
        self._sinks.append(sink)

    def confirmed(self, key: tuple[str | bytes, int], loss: ConfirmedLoss) -> None:
        for r in loss.ranges:
            self.lost.labels(loss.topic, ACKS_LABELS[r.level]).inc(r.count)
        self._with_loss.add(key)
        self.partitions.set(len(self._with_loss))
        level = (logging.ERROR if any(r.level == ACKS_ALL for r in loss.ranges)
                 else logging.WARNING)
        log.log(level, "%s", loss.line())
        for sink in self._sinks:
            try:
                sink(loss)
            except Exception as exc:  # noqa: BLE001 - a sink never stops the watch
                log.warning("loss watch: recording a confirmed loss failed: %s", exc)

    def forget(self, keys: Sequence[tuple[str | bytes, int]]) -> None:
        """Partitions the watch stopped tracking leave the gauge."""
        before = len(self._with_loss)
        self._with_loss.difference_update(keys)
        if len(self._with_loss) != before:
            self.partitions.set(len(self._with_loss))
