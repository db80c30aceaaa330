"""The live loss watch: acknowledged offsets in, confirmed losses out.

- Produce answers (acks 1 and all, every mode: enforcing, observe, no rule): the Produce
  hook calls :meth:`LossWatch.expect` for a forwarded request; the relay hands the answer
  to the returned callable, which records each acknowledged partition in the
  :class:`~proxy.losswatch.state.AckState` (base offset from the answer, record count from
  the request, the broker that answered from the listener).
- View changes (:meth:`LossWatch.view_changed`, subscribed to the cluster view store):
  :func:`~proxy.losswatch.suspicion.suspicions` of written partitions become pending
  checks; a periodic check (``check_interval_s``, 0: off) adds the partitions written
  within it that have acknowledgements of an earlier leader.
- :meth:`LossWatch.check_round` (run by :meth:`LossWatch.run`): reads each pending
  partition's leader twice, ``confirm_delay_s`` apart, and applies
  :mod:`proxy.losswatch.rule`; a loss goes to the :class:`LossReporter`.

Invariant: nothing here touches a client's connection: the answer callable swallows
every error (counted), and the hot path reads a coarse clock (``now``, refreshed by the
loop) and the view only when a new segment starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from protocol.headers import RequestHeader, parse_request_header
from protocol.produce import (
    PARTITION_ROW,
    ProduceRequest,
    partition_rows,
    walk_produce_request,
)
from protocol.produce_results import produce_results
from protocol.produce_single import single_partition_request, single_partition_result
from proxy.cluster.view import ClusterView
from proxy.losswatch.confirm import BrokerAsk, Target, read_leader
from proxy.losswatch.report import ConfirmedLoss, LossReporter
from proxy.losswatch.rule import Reading, lost_ranges, stable
from proxy.losswatch.state import ACKS_ALL, ACKS_ONE, AckState, PartitionKey, TopicKey
from proxy.losswatch.suspicion import suspicions
from proxy.relay.actions import ClientInfo
from proxy.settings import Settings

log = logging.getLogger("rackguard.losswatch")

AnswerSeen = Callable[[memoryview, int], None]
_CLIENT_ID_MEMORY = 1024  # decoded client ids kept (a dict of a few distinct values)
MAX_ATTEMPTS = 30  # readings of a partition with a leader before a check gives up
TICK_S = 1.0  # how often the coarse clock moves and the loop looks for due work
EXPIRE_EVERY_S = 60.0  # how often idle entries are looked for


@dataclass(frozen=True, slots=True)
class LossWatchSettings:
    idle_s: float  # an entry not written for this long is dropped
    check_interval_s: float  # periodic check of recently written partitions; 0: off
    confirm_delay_s: float  # between the two readings of a check


@dataclass(slots=True)
class PendingCheck:
    cause: str
    first: Reading | None = None
    attempts: int = 0
    since: float = 0.0


_FIRST_FLEXIBLE = 9


class _Expected:
    """One forwarded Produce: what its answer is read against."""

    __slots__ = ("watch", "node", "client", "level", "parts")

    def __init__(self, watch: LossWatch, node: int, client: str | None, level: int,
                 parts: list[tuple[TopicKey, int, int, TopicKey]]) -> None:
        self.watch = watch
        self.node = node
        self.client = client
        self.level = level
        self.parts = parts

    def answered(self, frame: memoryview, version: int) -> None:
        watch = self.watch
        try:
            parts = self.parts
            if len(parts) == 1 and version >= _FIRST_FLEXIBLE:  # the usual answer
                _, index, count, topic = parts[0]
                base = single_partition_result(frame, version, index)
                if base is not None:
                    watch.state.acknowledged(
                        topic, index, self.node if self.node >= 0 else
                        watch.leader_of(topic, index), self.level, base, count, self.client,
                        watch.now)
                    if watch._dormant:  # the first entry after a quiet spell: ticks again
                        watch.rouse()
                return
            results = produce_results(frame, version)
            state = watch.state
            now = watch.now
            node = self.node
            for key, index, count, topic in parts:
                result = results.get((key, index))
                if result is not None and result[0] == 0 and result[1] >= 0:
                    state.acknowledged(topic, index, node if node >= 0 else
                                       watch.leader_of(topic, index), self.level, result[1],
                                       count, self.client, now)
            if watch._dormant:  # the first entry after a quiet spell: ticks again
                watch.rouse()
        except Exception as exc:  # noqa: BLE001 - never the client's connection
            watch.failures += 1
            log.debug("loss watch: answer not read: %s", exc)


class LossWatch:
    def __init__(self, settings: LossWatchSettings, view: Callable[[], ClusterView],
                 ask: BrokerAsk, reporter: LossReporter, clock: Callable[[], float]) -> None:
        self.settings = settings
        self._view = view
        self._ask = ask
        self.reporter = reporter
        self._clock = clock
        self.now = clock()  # the coarse clock of the hot path (moved by ``tick``)
        self.state = AckState(settings.idle_s, self._epoch_of)
        self.pending: dict[PartitionKey, PendingCheck] = {}
        self._last_isr: dict[PartitionKey, tuple[int, ...]] = {}
        self._nodes: dict[str, int] = {}
        self._client_ids: dict[bytes, str] = {}
        self._wake = asyncio.Event()
        self._dormant = False  # nothing tracked: the loop waits for a produce, no ticks
        self._checked_at = self._expired_at = self.now
        self.failures = 0  # answers or requests the watch could not read

    # ----- the Produce answer path
    def expect(self, client: ClientInfo, frame: memoryview, acks: int,
               header: RequestHeader | None = None, request: ProduceRequest | None = None,
               partitions: bytes | None = None) -> AnswerSeen | None:
        """For a forwarded acks=1/all Produce: the callable its answer goes to (None:
        nothing to watch, or a request the walker cannot read: it is forwarded as is).
        ``header``, ``request`` and ``partitions`` (its :func:`partition_rows`) are the
        rule's, when it walked the request; a partition whose records cannot be read is
        not watched (the broker refuses it)."""
        client_id: str | None
        try:
            single = single_partition_request(frame) if request is None else None
            if single is not None:  # the usual request: read where its fields sit
                raw, key, index, count = single
                client_id = self._client_ids.get(raw)
                if client_id is None:
                    client_id = self._client_id(raw)
                parts = [(key, index, count, self._name(key))] if count else []
            else:
                if request is None or header is None:
                    header = parse_request_header(frame)
                    request = walk_produce_request(frame, header)
                client_id = header.client_id
                if partitions is None:
                    partitions = partition_rows(frame, request)
                keys = [t.key for t in request.topics]
                names = [self._name(k) for k in keys]
                parts = [(keys[n], index, count, names[n])
                         for n, index, count, _ in PARTITION_ROW.iter_unpack(partitions)
                         if count > 0]
        except Exception:  # noqa: BLE001 - the rule or the broker decides about bad input
            return None
        if not parts:
            return None
        node = self._nodes.get(client.listener)
        if node is None:
            node = self._nodes[client.listener] = _node_of(client.listener)
        if self._dormant:
            self.rouse()
        return _Expected(self, node, client_id, ACKS_ALL if acks == -1 else ACKS_ONE,
                         parts).answered

    def _name(self, key: TopicKey) -> TopicKey:
        """A topic id (Produce v13) as its name where the view knows it: one partition is
        one entry whichever version its writers use."""
        if isinstance(key, str):
            return key
        return self._view().topic_ids.get(key, key)

    def _client_id(self, raw: bytes) -> str:
        if len(self._client_ids) >= _CLIENT_ID_MEMORY:
            self._client_ids.clear()
        text = self._client_ids[raw] = raw.decode("utf-8", "replace")
        return text

    def leader_of(self, topic: TopicKey, index: int) -> int:
        row = self._view().partition(topic, index)
        return row[2] if row is not None else -1

    def _epoch_of(self, topic: TopicKey, index: int) -> int:
        row = self._view().partition(topic, index)
        return row[3] if row is not None else -1

    def rouse(self) -> None:
        """A produce after a quiet spell (the loop slept, the coarse clock stood still):
        the clock moves now, and the loop wakes to tick while anything is tracked."""
        self._dormant = False
        self.now = self._clock()
        self._wake.set()

    # ----- suspicion
    def view_changed(self, old: ClusterView, new: ClusterView) -> None:
        topics = self.state.topics
        if not topics:
            return
        # per written topic one identity check; partitions are read only where it changed
        found = suspicions(old, new, topics.items(), self._last_isr)
        for s in found:
            if s.moved:
                self.state.close(s.key, s.leader)
            self._suspect(s.key, s.cause)

    def _suspect(self, key: PartitionKey, cause: str) -> None:
        pending = self.pending.get(key)
        if pending is None:
            self.pending[key] = PendingCheck(cause, since=self.now)
        else:
            pending.first = None  # the leadership moved again: read anew
            pending.attempts = 0
            if not pending.cause.startswith("unclean"):
                pending.cause = cause
        self._wake.set()

    # ----- confirmation
    def tick(self) -> None:
        """Move the coarse clock; schedule the periodic check; expire idle entries."""
        self.now = now = self._clock()
        interval = self.settings.check_interval_s
        if interval > 0 and now - self._checked_at >= interval:
            since, self._checked_at = self._checked_at, now
            view = self._view()
            for key, entry in self.state:  # those written since the last periodic check
                if entry.seen < since or key in self.pending:
                    continue
                row = view.partition(*key)
                if row is not None and row[2] >= 0 and entry.earlier(row[2]):
                    self._suspect(key, "periodic check")
        if now - self._expired_at >= min(EXPIRE_EVERY_S, self.state.idle_s):
            self._expired_at = now
            gone = self.state.expire(now, set(self.pending))
            for key in gone:
                self._last_isr.pop(key, None)
            if gone:
                self.reporter.forget(gone)
            self.reporter.tracked.set(len(self.state))

    async def check_round(self) -> None:
        """Read the leader of every pending partition that is due; judge those read twice."""
        now = self._clock()
        view = self._view()
        by_leader: dict[int, list[Target]] = {}
        names: dict[tuple[str, int], PartitionKey] = {}
        for key, pending in list(self.pending.items()):
            topic = view.topic(key[0])
            row = topic.partitions.rows.get(key[1]) if topic is not None else None
            entry = self.state.get(key)
            if topic is None or row is None or entry is None:
                del self.pending[key]
                continue
            leader, epoch = row[2], row[3]
            if leader < 0:
                continue  # no leader yet: wait for one
            if not entry.earlier(leader):
                del self.pending[key]  # nothing an earlier leader acknowledged
                self.reporter.checks.labels("no_loss").inc()
                continue
            if pending.first is not None and now - pending.first.at < \
                    self.settings.confirm_delay_s:
                continue
            by_leader.setdefault(leader, []).append((topic.name, key[1], epoch))
            names[(topic.name, key[1])] = key
        # every leader at once: one that hangs delays only its own partitions' verdicts
        answers = await asyncio.gather(*(read_leader(self._ask, leader, targets, self._clock)
                                         for leader, targets in by_leader.items()))
        for readings in answers:
            for (name, index), reading in readings.items():
                self._judge(names[(name, index)], name, reading)

    def _judge(self, key: PartitionKey, name: str, reading: Reading) -> None:
        pending = self.pending.get(key)
        entry = self.state.get(key)
        if pending is None or entry is None:
            return
        first = pending.first
        start = stable(first, reading, self.settings.confirm_delay_s) if first else None
        if start is None:
            pending.attempts += 1
            pending.first = reading if reading.error == 0 else None
            if reading.error:
                self.reporter.checks.labels("failed").inc()
            if pending.attempts > MAX_ATTEMPTS:
                log.info("loss watch: %s partition %d: no stable reading of leader %d after "
                         "%d attempts; not judged", name, key[1], reading.leader,
                         pending.attempts)
                self.reporter.checks.labels("inconclusive").inc()
                del self.pending[key]
            return
        ranges = lost_ranges(start, entry.earlier(reading.leader))
        if ranges:
            self.reporter.confirmed(key, ConfirmedLoss(
                name, key[1], tuple(ranges), reading.leader, reading.epoch, start,
                pending.cause, entry.clients))
        self.reporter.checks.labels("loss" if ranges else "no_loss").inc()
        self.state.checked(key, reading.leader, start)
        del self.pending[key]

    async def run(self) -> None:
        """Tick every second while anything is tracked; check pending partitions as they
        come due. With nothing tracked (an idle sidecar) it sleeps until a produce is
        forwarded (:meth:`rouse`): nothing to expire or check, no periodic wake-up."""
        while True:
            wait: float | None = None
            if self.pending:
                wait = min(TICK_S, self.settings.confirm_delay_s)
            elif len(self.state):
                wait = TICK_S
            self._dormant = wait is None
            try:
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._dormant = False
            self._wake.clear()
            self.tick()
            if self.pending:
                try:
                    await self.check_round()
                except Exception as exc:  # noqa: BLE001 - the watch keeps watching
                    self.failures += 1
                    log.warning("loss watch: a check round failed: %s", exc)


def _node_of(listener: str) -> int:
    """The broker behind a listener ("node-3" -> 3); -1 for the bootstrap listener."""
    head, _, tail = listener.rpartition("-")
    return int(tail) if head == "node" and tail.isdigit() else -1


def loss_watch_from_settings(settings: Settings, registry: CollectorRegistry,
                             clock: Callable[[], float], view: Callable[[], ClusterView],
                             ask: BrokerAsk) -> LossWatch | None:
    """The watch ``settings`` ask for (None: ``loss_watch`` is off)."""
    if settings.loss_watch == "off":
        return None
    return LossWatch(
        LossWatchSettings(idle_s=settings.loss_watch_idle_ms / 1000,
                          check_interval_s=settings.loss_watch_check_interval_ms / 1000,
                          confirm_delay_s=settings.loss_watch_confirm_delay_ms / 1000),
        view, ask, LossReporter(registry), clock)
