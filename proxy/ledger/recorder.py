"""The decision ledger: a row per partition of every rack-checked produce, in JSON Lines.

What is recorded: for every ``acks=all`` Produce that the rack check ran on
(the rule enabled; observe mode included), one row per partition (one JSON
line per request carries its rows: :mod:`proxy.ledger.rows`) with the
decision, the cluster state it was made on, the record count and bytes of the
partition's record set (batch headers only, nothing decompressed) and, for
partitions that went upstream, the broker's error code, base offset and the
upstream latency. Every ``snapshot_interval_s`` the writer thread also writes
the cluster view (brokers, racks, partitions, replicas, ISR) to snapshot files
in the same directory. ``pipeline/`` reads both; the proxy never imports it.

Invariants:
- the event loop never blocks on the ledger. Per request it builds one
  :class:`~proxy.ledger.rows.ProduceEntry` (references to the walked request,
  its frame, the decisions and the view), completed with the broker's answer
  for forwarded partitions, and has it encoded at once by the C row encoder
  (about 0.1 us a row) into a reusable chunk (:mod:`proxy.ledger.chunks`),
  which the writer gets when it is full or a flush interval old. Holding
  entries for a writer thread instead kept hundreds of objects per request
  alive and made the garbage collector run on the loop often enough to cost
  more than encoding. Where the C module was built, a forwarded entry is its
  C twin (``proxy.ledger._ledger_native.Pending``): made once the view's contexts
  and the client are known, it encodes the line at once but for the broker's
  answer and lets go of the request, its frame and its decisions (held for a
  round trip they cost about 5 % of the proxy's CPU at 50 partitions per
  request, measured; most likely warm memory not reused); on the answer it
  fills the line into the open chunk without running Python (its ``Sink``
  holds the queue's counters and what it needs of the encoder's caches).
  Anything else it hands to :meth:`DecisionLedger.offer`, the path every
  entry took before;
- an entry the C encoder declines (an unusual answer) or that finds it not
  built is queued as it is and encoded in Python on the writer thread. File
  I/O, rotation and snapshots happen on the writer thread, in batches;
- the queue is bounded in rows (``queue_size``) and in the bytes it holds
  (``queue_bytes``: encoded text, or the frames of entries not yet encoded);
  beyond either, rows are dropped and counted in
  ``rackguard_ledger_rows_dropped_total{reason="queue_full"}``, never waited for;
- a ledger failure (disk full, an unparsable broker answer) is counted and
  logged, never raised into the data path;
- dependencies (settings, clocks, metrics registry, the view) are injected.
"""

from __future__ import annotations

import collections
import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge

from protocol.headers import RequestHeader
from protocol.produce import ProduceRequest
from proxy.cluster.pacing import Pacer
from proxy.cluster.view import ClusterView
from proxy.enforce.policy import REJECTING, Decision, RackRule
from proxy.ledger.chunks import Chunk, RowChunks
from proxy.ledger.files import RotatingJsonl
from proxy.ledger.rows import (
    FORWARDED,
    NATIVE_ROWS,
    OBSERVED,
    REJECTED,
    ProduceEntry,
    RowFormatter,
    snapshot_lines,
)
from proxy.ledger.schema import DECISION_FILE_PREFIX, SNAPSHOT_FILE_PREFIX
from proxy.relay.actions import ClientInfo
from proxy.relay.response_queue import ResponseTransform
from proxy.settings import Settings

try:
    from proxy.ledger._ledger_native import Pending, Sink
except ImportError:  # built without a C compiler: PendingProduce, in Python
    Pending = Sink = None

__all__ = ["FORWARDED", "OBSERVED", "REJECTED", "DecisionLedger", "LedgerConfig",
           "PendingProduce", "ledger_from_settings"]

log = logging.getLogger("rackguard.ledger")

_CHUNK_ROWS = 2_000  # rows per file write (one join of them holds the GIL)



@dataclass(frozen=True, slots=True)
class LedgerConfig:
    directory: Path
    instance_id: str
    rotate_bytes: int = 64 * 1024 * 1024
    rotate_seconds: float = 3600.0
    queue_size: int = 100_000  # rows
    queue_bytes: int = 64 * 1024 * 1024  # held by queued rows (text, or frames to encode)
    snapshot_interval_s: float = 30.0
    flush_interval_s: float = 0.2


class LedgerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.rows_dropped = Counter(
            "rackguard_ledger_rows_dropped",
            "Ledger rows dropped, by reason (queue_full: the writer fell behind; "
            "write_error: the file could not be written; encode_error: a bug, logged)",
            ["reason"], registry=registry)
        self.dropped_queue_full = self.rows_dropped.labels("queue_full")
        self.dropped_write_error = self.rows_dropped.labels("write_error")
        self.dropped_encode_error = self.rows_dropped.labels("encode_error")
        self.rows_written = Counter(
            "rackguard_ledger_rows_written", "Ledger rows written to files", registry=registry)
        self.snapshots = Counter(
            "rackguard_ledger_snapshots", "Cluster snapshots written to the ledger directory",
            registry=registry)
        self.response_parse_errors = Counter(
            "rackguard_ledger_response_parse_errors",
            "Broker Produce responses the ledger could not parse (rows written without "
            "the broker's code and offset)", registry=registry)
        self.queue_depth = Gauge(
            "rackguard_ledger_queue_depth", "Ledger rows waiting for the writer thread",
            registry=registry)


class DecisionLedger:
    """The bounded queue, the writer thread and the recording entry point.

    ``clock`` is the monotonic clock the enforcer uses (latency, metadata age);
    ``wall_clock`` stamps rows and names files. ``view_source`` and
    ``rule_source`` feed the periodic snapshot (read from the writer thread:
    both return immutable values).
    """

    def __init__(
        self,
        config: LedgerConfig,
        registry: CollectorRegistry,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        view_source: Callable[[], ClusterView] | None = None,
        rule_source: Callable[[], RackRule] | None = None,
    ) -> None:
        self.config = config
        self.metrics = LedgerMetrics(registry)
        self.clock = clock
        self.wall_clock = wall_clock
        self._view_source = view_source
        self._rule_source = rule_source
        # sealed chunks of encoded rows, or entries the writer encodes in Python
        self._queue: collections.deque[Chunk | ProduceEntry] = collections.deque()
        self._encoder = RowFormatter(config.instance_id)  # the event loop's (C only)
        # the C completion path's state; its counters are the queue's (see QueueCounts)
        self._sink = (Sink(self.offer, clock, config.flush_interval_s, config.queue_size,
                           config.queue_bytes)
                      if Sink is not None and NATIVE_ROWS is not None else None)
        self._counts = self._sink if self._sink is not None else QueueCounts()
        if self._sink is not None:
            self._encoder.attach(self._sink)
        self._requests = itertools.count(1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._chunks = (RowChunks(self._encoder.native_into, self._queue.append,
                                  config.flush_interval_s, clock, sink=self._sink)
                        if NATIVE_ROWS is not None else None)
        self._formatter = RowFormatter(config.instance_id)  # the writer thread's
        self._decisions = RotatingJsonl(config.directory, DECISION_FILE_PREFIX,
                                        config.instance_id, config.rotate_bytes,
                                        config.rotate_seconds, wall_clock)
        self._snapshots = RotatingJsonl(config.directory, SNAPSHOT_FILE_PREFIX,
                                        config.instance_id, config.rotate_bytes,
                                        config.rotate_seconds, wall_clock)
        self._snapshot_seq = itertools.count(1)
        self._next_snapshot = 0.0
        self._last_error_log = -1e9
        counts = self._counts
        self.metrics.queue_depth.set_function(lambda: counts.rows_in - counts.rows_out)

    # ----- event-loop side (cheap, never blocks)
    def offer(self, entry: ProduceEntry) -> None:
        """Queue an entry's rows; drop and count them when the queue is full.

        The usual entry is encoded here, on the event loop, by the C encoder (about
        0.1 us a row), into a reusable chunk (proxy.ledger.chunks): an entry held
        until the writer thread runs would keep its frames and a few hundred small
        objects alive, and the garbage collector, seeing them pile up, would run far
        more often on the loop than encoding costs. Entries the C encoder declines
        go to the writer.
        """
        rows = entry.rows
        config = self.config
        counts = self._counts
        if (counts.rows_in - counts.rows_out + rows > config.queue_size
                or counts.bytes_in - counts.bytes_out > config.queue_bytes):
            self.metrics.dropped_queue_full.inc(rows)
            return
        added = None
        if self._chunks is not None:
            try:
                added = self._chunks.add(entry, rows)
            except Exception:  # noqa: BLE001 - never into the data path; Python retries it
                self._log_error("ledger: the C encoder failed; the entry is encoded in Python",
                                exc_info=True)
        counts.rows_in += rows
        if added is not None:
            counts.bytes_in += added
            return
        answer = entry.answer
        if isinstance(answer, memoryview) and not answer.readonly:
            entry.answer = memoryview(bytes(answer))  # the writer reads it later
        counts.bytes_in += _held_bytes(entry)
        self._queue.append(entry)

    def seal(self) -> None:
        """Hand the rows encoded so far to the writer (from the event loop's thread)."""
        if self._chunks is not None:
            self._chunks.seal()

    def record(
        self,
        client: ClientInfo,
        header: RequestHeader,
        request: ProduceRequest,
        frame: memoryview,
        decisions: Sequence[Decision],
        view: ClusterView,
        observe: bool,
        dedicated_code: int | None,
        now: float,
    ) -> PendingProduce | None:  # (or its C twin, proxy.ledger._ledger_native.Pending)
        """Queue the rows of partitions the proxy answers itself; hold the rest.

        Returns the pending rows of the partitions that go upstream (None when
        none do): their transform wrapper completes them from the broker's answer.
        """
        held = frame if frame.readonly else memoryview(bytes(frame))
        req = next(self._requests)
        wall = self.wall_clock()
        rejected = () if observe else [d for d in decisions if d.verdict in REJECTING]
        if rejected:
            self.offer(ProduceEntry(wall, req, header.client_id, client.peer, request, held,
                                    rejected, view, observe, dedicated_code))
            if len(rejected) == len(decisions):
                return None
            decisions = [d for d in decisions if d.verdict not in REJECTING]
        if self._sink is not None:
            return Pending(wall, req, header.client_id, client.peer, request, held,
                           decisions, view, observe, dedicated_code, self._sink, now)
        pending = PendingProduce(wall, req, header.client_id, client.peer, request, held,
                                 decisions, view, observe, dedicated_code)
        pending.ledger = self  # set here, not by an __init__ of its own: one call less
        pending.sent_at = now
        return pending

    # ----- lifecycle
    def start(self) -> None:
        self.config.directory.mkdir(parents=True, exist_ok=True)
        if NATIVE_ROWS is None:
            log.warning("ledger: the C row encoder (proxy.ledger._ledger_native) "
                        "was not built, "
                        "rows are encoded in Python at several times the CPU; reinstall "
                        "rackguard where a C compiler is available")
        self._stop.clear()
        self._next_snapshot = self.clock()
        self._thread = threading.Thread(target=self._run, name="rackguard-ledger", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the writer after it has written what is queued (bounded by ``timeout``).
        Rows encoded since the last seal are written only if :meth:`seal` ran first."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def queued_bytes(self) -> int:
        """Bytes held by queued rows: their text, or the frames of entries not yet encoded."""
        return self._counts.bytes_in - self._counts.bytes_out

    @property
    def decision_files(self) -> list[Path]:
        return list(self._decisions.paths)

    @property
    def snapshot_files(self) -> list[Path]:
        return list(self._snapshots.paths)

    # ----- writer thread
    def _run(self) -> None:
        try:
            while True:
                stopping = self._stop.is_set()
                self._write_queued()
                # a snapshot at start, every interval, and at stop (closing the last interval)
                if self._view_source is not None and (
                        stopping or self.clock() >= self._next_snapshot):
                    if self.snapshot():
                        self._next_snapshot = self.clock() + self.config.snapshot_interval_s
                if stopping:
                    break
                wait = self.config.flush_interval_s
                if self._view_source is not None:
                    wait = max(0.0, min(wait, self._next_snapshot - self.clock()))
                self._stop.wait(wait)
        except Exception:  # noqa: BLE001 - the ledger must never take the proxy down
            log.exception("ledger writer thread failed; no further rows are written")
        finally:
            self._decisions.close()
            self._snapshots.close()

    def flush(self) -> int:
        """Seal and write everything, in the calling thread (tests; no writer running)."""
        self.seal()
        return self._write_queued()

    def _write_queued(self, batch_rows: int = _CHUNK_ROWS) -> int:
        """Write what is queued (the writer thread); returns the rows written."""
        written = 0
        queue = self._queue
        counts = self._counts
        lines_of = self._formatter.python_lines
        pause = Pacer()  # the event loop gets the GIL (and the CPU) every millisecond
        while queue:
            lines: list[bytes | memoryview] = []  # whole lines; an item may hold several
            chunks: list[Chunk] = []
            rows = unreadable = 0
            while queue and rows < batch_rows:
                item = queue.popleft()
                if isinstance(item, Chunk):
                    lines.append(memoryview(item.buf)[:item.end])
                    chunks.append(item)
                    n = item.rows
                    counts.bytes_out += item.end
                else:  # a ProduceEntry, or a C Pending (the same fields)
                    n = item.rows
                    counts.bytes_out += _held_bytes(item)
                    entry_lines: list[bytes] = []
                    try:
                        if not lines_of(item, entry_lines):
                            unreadable += 1
                    except Exception:  # noqa: BLE001 - one entry's rows, not the writer
                        self.metrics.dropped_encode_error.inc(n)
                        self._log_error("ledger: %d row(s) could not be encoded", n,
                                        exc_info=True)
                        counts.rows_out += n
                        continue
                    lines.extend(entry_lines)
                rows += n
                counts.rows_out += n
                pause()
            if unreadable:
                self.metrics.response_parse_errors.inc(unreadable)
            try:
                self._decisions.write(lines)
            except OSError as exc:
                self.metrics.dropped_write_error.inc(rows)
                self._log_error("ledger write failed, %d row(s) dropped: %s", rows, exc)
                continue
            finally:
                del lines
                if self._chunks is not None:
                    for chunk in chunks:
                        self._chunks.release(chunk)
            self.metrics.rows_written.inc(rows)
            written += rows
        return written

    def snapshot(self) -> int:
        """Write the current cluster view; returns the number of lines written."""
        if self._view_source is None:
            return 0
        view = self._view_source()
        if view.refreshed_at is None:
            return 0  # nothing confirmed yet
        rule = self._rule_source() if self._rule_source is not None else RackRule()
        written = 0
        chunk: list[bytes] = []
        lines = snapshot_lines(view, rule, self.config.instance_id, next(self._snapshot_seq),
                               self.wall_clock(), self.clock(), self.config.snapshot_interval_s)
        try:
            # in chunks, with pauses: a 100,000-partition view takes most of a second
            # to encode, and one join of it would hold the GIL for tens of milliseconds
            pause = Pacer()
            for line in lines:
                chunk.append(line.encode())
                pause()
                if len(chunk) >= _CHUNK_ROWS:
                    self._snapshots.write(chunk)
                    written += len(chunk)
                    chunk = []
            self._snapshots.write(chunk)
            written += len(chunk)
        except OSError as exc:
            self._log_error("ledger snapshot write failed: %s", exc)
            return 0
        self.metrics.snapshots.inc()
        return written

    def _log_error(self, text: str, *args: object, exc_info: bool = False) -> None:
        """One line a minute at most (with the traceback of the exception being handled
        when ``exc_info``)."""
        now = self.clock()
        if now - self._last_error_log >= 60:
            self._last_error_log = now
            log.error(text, *args, exc_info=exc_info)


class PendingProduce(ProduceEntry):
    """An entry of forwarded partitions, completed from the broker's Produce response.

    It is its own response transform (``wrap`` returns it): one object per
    request, not an entry, a holder and a closure. Made by
    :meth:`DecisionLedger.record`, which sets ``ledger`` and ``sent_at``.
    """

    __slots__ = ("ledger", "sent_at", "_transform")
    ledger: DecisionLedger
    sent_at: float  # the ledger's clock when the request went upstream
    _transform: ResponseTransform

    def wrap(self, transform: ResponseTransform) -> ResponseTransform:
        """``transform`` preceded by recording the broker's answer (same frame, same version)."""
        self._transform = transform
        return self

    def __call__(self, frame: memoryview, version: int) -> object:
        """Encode and queue the entry's rows with the broker's answer (``frame`` is only
        read during the call, unless the entry goes to the writer: see ``offer``), then
        the wrapped transform. One frame for both, on every forwarded request."""
        ledger = self.ledger
        self.answer = frame
        self.version = version
        self.latency_ms = (ledger.clock() - self.sent_at) * 1000
        ledger.offer(self)
        return self._transform(frame, version)


class QueueCounts:
    """The queue's counters where the C module was not built (its Sink holds them
    otherwise). Each is written by one thread only: ``*_in`` by the event loop,
    ``*_out`` by the writer."""

    __slots__ = ("rows_in", "rows_out", "bytes_in", "bytes_out")

    def __init__(self) -> None:
        self.rows_in = self.rows_out = self.bytes_in = self.bytes_out = 0


def _held_bytes(entry: ProduceEntry) -> int:
    answer = entry.answer
    held = entry.frame if entry.prepared is None else entry.prepared
    return len(held) + (0 if answer is None else len(answer))


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
    )
    return DecisionLedger(config, registry, clock, time.time, view_source, rule_source)
