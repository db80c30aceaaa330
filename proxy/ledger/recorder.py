"""The decision ledger: a record per rack-checked produce request, Parquet files Spark reads.

What is recorded: for every ``acks=all`` Produce the rack check ran on (the rule
enabled; observe mode included), one record (:mod:`proxy.ledger.entry`): the request's
time, number, client, the sequence numbers of the view and the rule it was decided on
(:mod:`proxy.ledger.versions`), each partition's record count and bytes, the decision
of partitions that did not simply pass, and, for a request that went upstream, the
broker's answer (its bytes: the pipeline reads the error codes and base offsets
from them) and the upstream latency. The writer thread writes the view and the rule
when they change (snapshot rows) and a tick every ``snapshot_interval_s``. File layout and columns:
:mod:`proxy.ledger.schema`; files: :mod:`proxy.ledger.files`. ``pipeline/`` reads
them; the proxy never imports it.

Invariants:
- the event loop never blocks on the ledger: per request it packs a few numbers and
  its partitions (O(partitions) integer work, no encoding, no I/O, no per-view copy)
  and appends them to the queue's buffers (:mod:`proxy.ledger.buffer`: no lock, no
  queue operation per request); the writer thread (pyarrow, imported there) does the
  rest every ``flush_interval_s`` (sooner when half the queue bound is used: large
  batches, since a flush's cost is mostly fixed), reinterpreting the bytes as Arrow
  columns (:mod:`proxy.ledger.tables`);
- the queue is bounded in partition-writes (``queue_size``) and in the bytes it
  holds (``queue_bytes``); beyond either, rows are dropped, never waited for;
- nothing the ledger does can fail a client's request: :meth:`DecisionLedger.record`
  and the response transform it names (which always runs the transform it wraps)
  catch every exception; a failure (a clock, a full disk, a
  write error, a bug) drops the rows concerned, counts them in
  ``rackguard_ledger_dropped_rows_total{reason}`` and logs once a minute at most;
- dependencies (settings, clocks, metrics registry, the view and rule) are injected.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from protocol.headers import RequestHeader
from protocol.produce import ProduceRequest
from proxy.cluster.view import ClusterView
from proxy.enforce.policy import NOT_ENOUGH_REPLICAS, Decision, RackRule
from proxy.ledger.buffer import HEAD, PART, TAIL, Fields, RowBuffer
from proxy.ledger.entry import ONE_CODE, outcome_codes, request_topics
from proxy.ledger.schema import DECISION_FILE_PREFIX, LOSS, SNAPSHOT_FILE_PREFIX, TICK
from proxy.ledger.versions import SnapshotDiffer, Versions
from proxy.relay.actions import ClientInfo
from proxy.relay.response_queue import ResponseTransform
from proxy.settings import Settings

if TYPE_CHECKING:
    from proxy.ledger.files import Retention, StreamFiles

__all__ = ["DecisionLedger", "LedgerConfig", "ledger_from_settings"]

log = logging.getLogger("rackguard.ledger")

_BATCH_ENTRIES = 5_000  # requests per record batch
_NO_ANSWER = TAIL.pack(float("nan"), 0)
# the disk bound and the rackguard_ledger_bytes gauge: a scan of the directory (a stat per
# file, about 0.25 ms in a busy proxy) every 10 s; every second it was 0.8 us a request
# at 300 requests/s
_RETENTION_EVERY_S = 10.0
_LOG_EVERY_S = 60.0


_SETTING = {name: field.default for name, field in Settings.model_fields.items()}


def _no_broker_answer(frame: memoryview, version: int) -> object:
    """:attr:`DecisionLedger.answered_alone`; never called."""
    raise AssertionError("a request the proxy answered alone has no broker answer")


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    """What the ledger is given (:func:`ledger_from_settings` fills it from the settings,
    whose defaults are these, but for the disk bounds: none here)."""

    directory: Path
    instance_id: str
    rotate_bytes: int = _SETTING["ledger_rotate_bytes"]
    rotate_seconds: float = float(_SETTING["ledger_rotate_seconds"])
    queue_size: int = _SETTING["ledger_queue_size"]  # partition-writes
    queue_bytes: int = 64 * 1024 * 1024  # held by queued entries (mostly broker answers)
    snapshot_interval_s: float = _SETTING["ledger_snapshot_interval_ms"] / 1000
    flush_interval_s: float = _SETTING["ledger_flush_interval_ms"] / 1000
    max_bytes: int | None = None  # this instance's files in the directory, in total
    max_age_s: float | None = None


class LedgerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.dropped = Counter(
            "rackguard_ledger_dropped_rows",
            "Ledger rows (partition-writes) dropped, by reason (queue_full: the writer fell "
            "behind; write_error: a file could not be written, e.g. a full disk; "
            "record_error: recording failed on the serving path, e.g. a clock; "
            "writer_down: the writer thread is not running)",
            ["reason"], registry=registry)
        self.rows_written = Counter(
            "rackguard_ledger_rows_written",
            "Ledger rows (partition-writes) written to files", registry=registry)
        self.snapshot_rows = Counter(
            "rackguard_ledger_snapshot_rows_written",
            "Snapshot rows (a changed topic, the brokers, the rule, a tick) written",
            registry=registry)
        self.deleted_files = Counter(
            "rackguard_ledger_deleted_files",
            "Closed ledger files deleted to keep within ledger_max_bytes and ledger_max_age",
            registry=registry)
        self.queue_depth = Gauge(
            "rackguard_ledger_queue_depth",
            "Ledger rows waiting for the writer thread", registry=registry)
        self.disk_bytes = Gauge(
            "rackguard_ledger_bytes",
            "Bytes of this instance's ledger files in ledger_dir", registry=registry)


class DecisionLedger:
    """The recording entry point (event loop), the bounded queue and the writer thread.

    ``clock`` is the monotonic clock the enforcer uses (latency, intervals);
    ``wall_clock`` stamps rows and names files. ``view_source`` and ``rule_source``
    are polled by the writer (both return immutable values), so a view that changes
    without traffic is written too.
    """

    def __init__(
        self,
        config: LedgerConfig,
        registry: CollectorRegistry,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        view_source: Callable[[], ClusterView] | None = None,
        rule_source: Callable[[], RackRule] | None = None,
        observe: bool = False,
        dedicated_code: int | None = None,
    ) -> None:
        self.config = config
        self.metrics = LedgerMetrics(registry)
        self.clock = clock
        self.wall_clock = wall_clock
        self._view_source = view_source
        self._default_rule = RackRule()
        self._rule_source = rule_source or (lambda: self._default_rule)
        self._mode = (observe, dedicated_code)  # for a rule polled before any request
        self.run = time.time_ns() // 1000 ^ os.getpid()
        self._versions = Versions()
        self._differ = SnapshotDiffer(config.instance_id, self.run)
        self._buffer = RowBuffer(config.queue_size, config.queue_bytes)
        self._half = config.queue_size // 2  # queued beyond it: the writer flushes early
        self._requests = itertools.count(1)
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by the loop when half the queue bound is used
        self._thread: threading.Thread | None = None
        self._writer_up = True
        self._decisions: StreamFiles | None = None
        self._snapshots: StreamFiles | None = None
        self._retention: Retention | None = None
        self._events: collections.deque[dict[str, Any]] = collections.deque(maxlen=10_000)
        self._next_tick = 0.0
        self._next_retention = 0.0
        self._last_log: dict[str, float] = {}
        self.metrics.queue_depth.set_function(self._buffer.depth)
        self.answered_alone: ResponseTransform = _no_broker_answer
        """The transform to give :meth:`record` for a request no partition of which goes
        upstream (the proxy refused them all): it is queued at once, without an answer."""

    # ----- event-loop side (cheap, never raises, never blocks)
    def record(
        self,
        client: ClientInfo,
        header: RequestHeader,
        request: ProduceRequest,
        partitions: bytes,
        decisions: Sequence[Decision],
        view: ClusterView,
        rule: RackRule,
        observe: bool,
        dedicated_code: int | None,
        now: float,
        transform: ResponseTransform,
    ) -> ResponseTransform:
        """Record one request decided on ``view`` and ``rule`` (``partitions``: its
        :func:`~protocol.produce_partitions.partition_rows`) that goes upstream with the
        response transform ``transform`` (or that the proxy answers alone:
        :attr:`answered_alone`). Returns the transform to name instead: it queues the
        record with the broker's answer, then runs ``transform`` (which is returned
        itself when recording fails)."""
        try:
            if not self._writer_up:
                self._drop("writer_down", len(decisions))
                return transform
            wall = self.wall_clock()
            view_seq, rule_seq = self._versions.seqs(view, rule, observe, dedicated_code, wall)
            # the usual request (one topic, by name; for many clients one partition) is
            # recorded without a call for its topics or its codes
            named = request.topics
            if len(named) == 1 and named[0].name is not None:
                topics: tuple[str, ...] = (named[0].name,)
                ids = None
            else:
                topics, ids = request_topics(request, view)
            rows = len(partitions) // PART.size
            codes = (ONE_CODE[observe][decisions[0].verdict] if len(decisions) == 1
                     else outcome_codes(decisions, observe))
            head = HEAD.pack(wall, next(self._requests), view_seq, rule_seq,
                             header.api_version, rows, len(topics),
                             len(ids) if ids is not None else 0,
                             NOT_ENOUGH_REPLICAS if dedicated_code is None else dedicated_code)
            fields = (head, partitions, codes, (header.client_id, client.peer), topics, ids)
            if transform is _no_broker_answer:
                queued = self._buffer.add(fields, _NO_ANSWER, None, rows)
                if queued > self._half or queued < 0:
                    self._bounded(queued, rows)
                return transform
            # one C object per request, one call when answered
            return partial(self._answered, fields, rows, now, transform)
        except Exception:  # noqa: BLE001 - never into the data path
            self._drop("record_error", len(decisions), exc_info=True)
            return transform

    def _answered(self, fields: Fields, rows: int, sent_at: float,
                  transform: ResponseTransform, frame: memoryview, version: int) -> object:
        """The response transform :meth:`record` names, given the broker's answer to the
        request's forwarded partitions: queues the record (never raises), then runs
        ``transform``, always."""
        try:
            queued = self._buffer.add(
                fields, TAIL.pack((self.clock() - sent_at) * 1000, len(frame)), frame, rows)
            if queued > self._half or queued < 0:
                self._bounded(queued, rows)
        except Exception:  # noqa: BLE001 - never into the data path
            self._drop("record_error", rows, exc_info=True)
        return transform(frame, version)

    def _bounded(self, queued: int, rows: int) -> None:
        """A request the queue refused (``queued`` -1: its bounds, or torn: an append
        failed half way and the writer empties the buffer first), or one that fills
        more than half its bound: then the writer flushes now rather than drop rows."""
        if queued >= 0:
            self._wake_early()
        else:
            self._drop("record_error" if self._buffer.torn else "queue_full", rows)

    def _wake_early(self) -> None:
        """The writer flushes now, not at its next interval."""
        if not self._wake.is_set():
            self._wake.set()

    def record_loss(self, topic: str, partition: int, leader: int, epoch: int,
                    ranges: Sequence[tuple[int, int, str]], cause: str,
                    clients: Sequence[str]) -> None:
        """A loss the loss watch confirmed: a ``loss`` snapshot row, written with the next
        flush (``ranges``: first offset, last offset, acks level). Rare; never raises."""
        try:
            self._events.append({
                "kind": LOSS, "ts": self.wall_clock(), "instance": self.config.instance_id,
                "run": self.run, "seq": self._versions.current[0], "topic": topic,
                "partitions": [partition], "leaders": [leader], "epoch": epoch,
                "lost_first": [r[0] for r in ranges], "lost_last": [r[1] for r in ranges],
                "lost_acks": [r[2] for r in ranges], "cause": cause,
                "clients": list(clients)})
            self._wake_early()
        except Exception:  # noqa: BLE001 - never into the loss watch
            self._drop("record_error", 1, exc_info=True)

    # ----- lifecycle
    def start(self) -> None:
        self.config.directory.mkdir(parents=True, exist_ok=True)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="rackguard-ledger", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued, a last tick, and close the files into Parquet (in the
        writer thread if it runs, else here)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        elif self._decisions is not None:
            self._iteration(final=True)
            self._close_files()

    def flush(self) -> int:
        """One writer iteration in the calling thread (tests; no writer running); returns
        the rows written."""
        if self._decisions is None:
            self.config.directory.mkdir(parents=True, exist_ok=True)
            self._open_files()
        return self._iteration(final=False)

    @property
    def decision_files(self) -> list[Path]:
        return self._files_of(DECISION_FILE_PREFIX)

    @property
    def snapshot_files(self) -> list[Path]:
        return self._files_of(SNAPSHOT_FILE_PREFIX)

    def _files_of(self, prefix: str) -> list[Path]:
        from proxy.ledger.files import safe_instance

        own = f"{prefix}-{safe_instance(self.config.instance_id)}-"
        return sorted(p for p in self.config.directory.glob(f"{own}*")
                      if not p.name.endswith(".tmp"))

    # ----- writer thread
    def _open_files(self) -> None:
        from proxy.ledger.files import Retention, StreamFiles, recover
        from proxy.ledger.tables import DECISION_SCHEMA, SNAPSHOT_SCHEMA

        config = self.config
        recovered = recover(config.directory, config.instance_id)
        if recovered:
            log.warning("ledger: %d file(s) left open by a previous run closed into Parquet",
                        len(recovered))
        self._decisions = StreamFiles(config.directory, DECISION_FILE_PREFIX,
                                      config.instance_id, DECISION_SCHEMA, config.rotate_bytes,
                                      config.rotate_seconds, self.wall_clock)
        self._snapshots = StreamFiles(config.directory, SNAPSHOT_FILE_PREFIX,
                                      config.instance_id, SNAPSHOT_SCHEMA, config.rotate_bytes,
                                      config.rotate_seconds, self.wall_clock)
        self._retention = Retention(config.directory, config.instance_id, config.max_bytes,
                                    config.max_age_s, self.wall_clock)
        self._next_tick = self.clock()

    def _close_files(self) -> None:
        for files in (self._decisions, self._snapshots):
            if files is not None:
                try:
                    files.close()
                except Exception:  # noqa: BLE001 - the stream stays for the next start
                    self._log("close", "ledger: closing %s failed", files.path, exc_info=True)
        self._decisions = self._snapshots = None

    def _run(self) -> None:
        try:
            self._open_files()
        except Exception:  # noqa: BLE001 - pyarrow missing, a directory not writable
            self._writer_up = False
            log.exception("ledger: the writer thread could not start; rows are dropped "
                          "(rackguard_ledger_dropped_rows_total{reason=\"writer_down\"})")
            return
        try:
            while True:
                stopping = self._stop.is_set()
                self._iteration(final=stopping)
                if stopping:
                    break
                # the next flush, or the next tick when sooner (ticks keep their interval).
                # A tick already due (the iteration outlasted the interval, or no view to
                # tick on yet) is looked at one interval on, never a whole flush later:
                # a view that lasts a few ticks must be seen by one
                until_tick = self._next_tick - self.clock()
                if until_tick <= 0:
                    until_tick = self.config.snapshot_interval_s
                self._wake.wait(min(self.config.flush_interval_s, until_tick))
                self._wake.clear()
        except Exception:  # noqa: BLE001 - the ledger must never take the proxy down
            self._writer_up = False
            log.exception("ledger writer thread failed; no further rows are written")
        finally:
            self._close_files()

    def _iteration(self, final: bool) -> int:
        """Snapshots of what changed (and a tick when due), then the queued entries, then
        the disk bound. Each part's failure is counted and does not stop the others."""
        # the entries queued now name views numbered before the snapshots below are taken:
        # those are written first, so no row is ever on disk before the view it names
        ready = self._buffer.done
        try:
            self._write_snapshots(final)
        except Exception:  # noqa: BLE001
            self._log("snapshot", "ledger: snapshot write failed", exc_info=True)
        written = self._write_queued(self._buffer.done if final else ready)
        now = self.clock()
        if self._retention is not None and (final or now >= self._next_retention):
            self._next_retention = now + _RETENTION_EVERY_S
            try:
                total, deleted = self._retention.enforce()
                self.metrics.disk_bytes.set(total)
                self.metrics.deleted_files.inc(deleted)
            except Exception:  # noqa: BLE001
                self._log("retention", "ledger: enforcing the disk bound failed",
                          exc_info=True)
        return written

    def _write_snapshots(self, final: bool) -> None:
        from proxy.ledger.tables import snapshot_batch

        snapshots = self._snapshots
        if snapshots is None:
            return
        wall = self.wall_clock()
        if self._view_source is not None:
            view = self._view_source()
            if view.refreshed_at is not None:  # nothing confirmed yet: nothing to record
                self._versions.view_seq(view, wall)
        rule = self._rule_source()
        current = self._versions.current_rule()
        if current is None or current[0] is not rule:
            observe, dedicated = current[1:] if current is not None else self._mode
            self._versions.rule_seq(rule, observe, dedicated, wall)
        pending = self._versions.take()
        full = snapshots.roll()
        view_seq, rule_seq = self._versions.current
        now = self.clock()
        tick = bool(view_seq) and (final or now >= self._next_tick)
        if not pending and not tick and not self._events:
            return  # a file that is due opens when there is something to write
        rows = self._differ.rows(pending, full)
        while self._events:
            rows.append(self._events.popleft())
        if tick:
            self._next_tick = now + self.config.snapshot_interval_s
            rows.append({"kind": TICK, "ts": wall, "instance": self.config.instance_id,
                         "run": self.run, "seq": view_seq, "rule_seq": rule_seq,
                         "interval_s": self.config.snapshot_interval_s})
        if rows:
            snapshots.write(snapshot_batch(rows))
            self.metrics.snapshot_rows.inc(len(rows))

    def _write_queued(self, upto: int) -> int:
        """Write the requests appended before the ``upto``-th; returns the rows written."""
        from proxy.ledger.tables import decision_batch

        buffer = self._buffer
        if buffer.torn:
            lost = buffer.reset()  # the loop adds nothing while it is torn
            self._drop("record_error", lost, text=f"ledger: a request could not be queued; "
                                                  f"{lost} queued row(s) dropped")
        written = 0
        while self._decisions is not None:
            chunk = buffer.take(min(upto - buffer.taken, _BATCH_ENTRIES))
            if chunk is None:
                break
            rows = chunk.partitions
            try:
                self._decisions.write(decision_batch(chunk, self.config.instance_id,
                                                     self.run))
            except Exception as exc:  # noqa: BLE001 - a full disk, a write error, a bug
                self._drop("write_error", rows, text=f"ledger write failed, rows dropped: "
                                                      f"{exc!r}")
            else:
                self.metrics.rows_written.inc(rows)
                written += rows
            finally:
                buffer.release(rows, chunk.held)
        return written

    # ----- failures
    def _drop(self, reason: str, rows: int, exc_info: bool = False,
              text: str | None = None) -> None:
        try:
            self.metrics.dropped.labels(reason).inc(rows)
            self._log(reason, text or f"ledger: {rows} row(s) dropped ({reason})",
                      exc_info=exc_info)
        except Exception:  # noqa: BLE001, S110 - counting must not fail the caller either
            pass

    def _log(self, key: str, text: str, *args: Any, exc_info: bool = False) -> None:
        """One line per kind of failure a minute at most (its own clock: the injected ones
        may be what failed)."""
        now = time.monotonic()
        if now - self._last_log.get(key, -1e9) >= _LOG_EVERY_S:
            self._last_log[key] = now
            log.error(text, *args, exc_info=exc_info)


def ledger_from_settings(
    settings: Settings,
    registry: CollectorRegistry,
    clock: Callable[[], float],
    view_source: Callable[[], ClusterView],
    rule_source: Callable[[], RackRule],
) -> DecisionLedger | None:
    """The ledger the settings ask for, or None when ``ledger_dir`` is unset."""
    if settings.ledger_dir is None:
        return None
    instance = settings.instance_id or f"{socket.gethostname()}-{settings.bootstrap_port}"
    config = LedgerConfig(
        directory=Path(settings.ledger_dir),
        instance_id=instance,
        rotate_bytes=settings.ledger_rotate_bytes,
        rotate_seconds=float(settings.ledger_rotate_seconds),
        queue_size=settings.ledger_queue_size,
        snapshot_interval_s=settings.ledger_snapshot_interval_ms / 1000,
        flush_interval_s=settings.ledger_flush_interval_ms / 1000,
        max_bytes=settings.ledger_max_bytes,
        max_age_s=(float(settings.ledger_max_age_seconds)
                   if settings.ledger_max_age_seconds is not None else None),
    )
    return DecisionLedger(config, registry, clock, time.time, view_source, rule_source,
                          observe=settings.observe)
