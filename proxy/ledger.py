"""The decision ledger: one JSON Lines row per partition of every rack-checked produce.

What is recorded: for every ``acks=all`` Produce that the rack check ran on
(the rule enabled; observe mode included), one row per partition with the
decision, the cluster state it was made on, the record count and bytes of the
partition's record set (batch headers only, nothing decompressed) and, for
partitions that went upstream, the broker's error code, base offset and the
upstream latency. Every ``snapshot_interval_s`` the writer thread also writes
the cluster view (brokers, racks, partitions, replicas, ISR) to snapshot files
in the same directory. ``pipeline/`` reads both; the proxy never imports it.

Invariants:
- the event loop never blocks on the ledger: it builds one small tuple per
  partition (and, for forwarded partitions, keeps a copy of the broker's
  response frame) and appends it to a bounded queue; when the queue is full
  the rows are dropped and ``rackguard_ledger_rows_dropped_total{reason=
  "queue_full"}`` counts them. Parsing the broker's response, JSON encoding,
  file I/O, rotation and snapshots happen on one writer thread, in batches;
- a row is a complete line or nothing: a batch is written as whole lines, so a
  reader sees at most one torn line (the last, after a crash);
- files rotate by size and by age; names carry the instance id, so several
  proxies can share one directory;
- a ledger failure (disk full, an unparsable broker answer) is counted and
  logged, never raised into the data path;
- dependencies (settings, clocks, metrics registry, the view) are injected.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from config.settings import Settings
from protocol.headers import RequestHeader
from protocol.primitives import ProtocolError
from protocol.produce import (
    ProduceRequest,
    TopicKey,
    parse_produce_response,
    record_count,
)
from proxy.cluster_view import ClusterView
from proxy.connection import ClientInfo
from proxy.policy import NOT_ENOUGH_REPLICAS, Decision, RackRule, Verdict
from proxy.response_queue import ResponseTransform

log = logging.getLogger("rackguard.ledger")

SCHEMA_VERSION = 1
DECISION_FILE_PREFIX = "decisions"
SNAPSHOT_FILE_PREFIX = "snapshots"

FORWARDED = "forwarded"
REJECTED = "rejected"
OBSERVED = "observed-would-reject"

# The order of the values in a queued row tuple; the writer names them.
ROW_FIELDS: tuple[str, ...] = (
    "ts", "req", "client_id", "client_addr", "topic", "partition", "leader", "isr",
    "isr_racks", "required_racks", "min_isr", "decision", "reason", "wire_error",
    "broker_error", "base_offset", "records", "bytes", "latency_ms", "metadata_age_ms",
)

Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    directory: Path
    instance_id: str
    rotate_bytes: int = 64 * 1024 * 1024
    rotate_seconds: float = 3600.0
    queue_size: int = 100_000
    snapshot_interval_s: float = 30.0
    flush_interval_s: float = 0.2


class RotatingJsonl:
    """Whole-line appends to ``<prefix>-<instance>-<utc time>-<seq>.jsonl``, rotated.

    A new file starts when the current one has reached ``rotate_bytes`` or is
    ``rotate_seconds`` old (checked before each batch, so a file exceeds the
    size by at most one batch). Used by the writer thread only.
    """

    def __init__(
        self,
        directory: Path,
        prefix: str,
        instance_id: str,
        rotate_bytes: int,
        rotate_seconds: float,
        wall_clock: Callable[[], float],
    ) -> None:
        self._directory = directory
        self._prefix = prefix
        self._instance = re.sub(r"[^A-Za-z0-9_.-]", "_", instance_id)
        self._rotate_bytes = rotate_bytes
        self._rotate_seconds = rotate_seconds
        self._wall = wall_clock
        self._file: IO[str] | None = None
        self._opened_at = 0.0
        self._size = 0
        self._seq = itertools.count()
        self.paths: list[Path] = []

    def write(self, lines: Sequence[str]) -> None:
        if not lines:
            return
        now = self._wall()
        if (self._file is None or self._size >= self._rotate_bytes
                or now - self._opened_at >= self._rotate_seconds):
            self._open(now)
        assert self._file is not None
        text = "".join(lines)
        self._file.write(text)
        self._file.flush()
        self._size += len(text.encode()) if not text.isascii() else len(text)

    def _open(self, now: float) -> None:
        self.close()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
        name = f"{self._prefix}-{self._instance}-{stamp}-{os.getpid()}-{next(self._seq):06d}.jsonl"
        path = self._directory / name
        self._file = path.open("a", encoding="utf-8")
        self._opened_at = now
        self._size = 0
        self.paths.append(path)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class LedgerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.rows_dropped = Counter(
            "rackguard_ledger_rows_dropped",
            "Ledger rows dropped, by reason (queue_full: the writer fell behind; "
            "write_error: the file could not be written)",
            ["reason"], registry=registry)
        self.dropped_queue_full = self.rows_dropped.labels("queue_full")
        self.dropped_write_error = self.rows_dropped.labels("write_error")
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
        self._queue: collections.deque[Row | Answered] = collections.deque()
        self._max = config.queue_size
        self._requests = itertools.count(1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._decisions = RotatingJsonl(config.directory, DECISION_FILE_PREFIX,
                                        config.instance_id, config.rotate_bytes,
                                        config.rotate_seconds, wall_clock)
        self._snapshots = RotatingJsonl(config.directory, SNAPSHOT_FILE_PREFIX,
                                        config.instance_id, config.rotate_bytes,
                                        config.rotate_seconds, wall_clock)
        self._snapshot_seq = itertools.count(1)
        self._next_snapshot = 0.0
        self._last_error_log = -1e9
        self.metrics.queue_depth.set_function(lambda: len(self._queue))

    # ----- event-loop side (cheap, never blocks)
    def offer(self, row: Row) -> None:
        """Queue one row; drop and count it when the queue is full."""
        if len(self._queue) >= self._max:
            self.metrics.dropped_queue_full.inc()
            return
        self._queue.append(row)

    def offer_answer(self, answered: Answered) -> None:
        """Queue forwarded rows with the broker's answer, parsed later by the writer thread."""
        if len(self._queue) >= self._max:
            self.metrics.dropped_queue_full.inc(len(answered.rows))
            return
        self._queue.append(answered)

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
    ) -> PendingProduce | None:
        """Write the rows of partitions that stay at the proxy; hold the rest.

        Returns the pending rows of the partitions that go upstream (None when
        none do): their transform wrapper completes them from the broker's answer.
        """
        wall = self.wall_clock()
        req = next(self._requests)
        spans = {(t.key, p.index): p.records for t in request.topics for p in t.partitions}
        pending: dict[tuple[TopicKey, int], Row] = {}
        for d in decisions:
            span = spans.get((d.topic_key, d.partition))
            try:
                records = record_count(frame, span)
            except ProtocolError:
                records = -1  # the broker will judge the batch; the ledger does not
            size = 0 if span is None else span[1] - span[0]
            racks = d.isr_racks if d.required_racks > 1 or not d.isr else view.isr_racks(d.isr)
            rejects = d.verdict.rejects
            if rejects and not observe:
                decision, code = REJECTED, NOT_ENOUGH_REPLICAS
                if d.verdict is Verdict.NOT_ENOUGH_RACKS and dedicated_code is not None:
                    code = dedicated_code
            else:
                decision, code = (OBSERVED if rejects else FORWARDED), None
            reason = "" if d.verdict is Verdict.PASS else d.verdict.value
            age = d.metadata_age_s
            row = (
                wall, req, header.client_id, client.peer, _topic_name(d), d.partition,
                d.leader, d.isr, racks, d.required_racks, d.min_insync_replicas,
                decision, reason, code, None, None, records, size, None,
                round(age * 1000, 3) if age != float("inf") else None,
            )
            if decision == REJECTED:
                self.offer(row)
            else:
                pending[(d.topic_key, d.partition)] = row
        if not pending:
            return None
        return PendingProduce(self, pending, now)

    # ----- lifecycle
    def start(self) -> None:
        self.config.directory.mkdir(parents=True, exist_ok=True)
        self._stop.clear()
        self._next_snapshot = self.clock()
        self._thread = threading.Thread(target=self._run, name="rackguard-ledger", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the writer after it has written what is queued (bounded by ``timeout``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

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
                self.flush()
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

    def flush(self, batch: int = 10_000) -> int:
        """Write what is queued (called by the writer thread, or by tests directly)."""
        written = 0
        queue = self._queue
        instance = self.config.instance_id
        while queue:
            lines = []
            for _ in range(min(batch, len(queue))):
                item = queue.popleft()
                rows = (item.completed_rows(self.metrics) if isinstance(item, Answered)
                        else (item,))
                for values in rows:
                    row: dict[str, Any] = {"v": SCHEMA_VERSION, "kind": "produce",
                                           "instance": instance}
                    row.update(zip(ROW_FIELDS, values, strict=True))
                    lines.append(json.dumps(row, separators=(",", ":")) + "\n")
            try:
                self._decisions.write(lines)
            except OSError as exc:
                self.metrics.dropped_write_error.inc(len(lines))
                self._log_error("ledger write failed, %d row(s) dropped: %s", len(lines), exc)
                continue
            self.metrics.rows_written.inc(len(lines))
            written += len(lines)
        return written

    def snapshot(self) -> int:
        """Write the current cluster view; returns the number of lines written."""
        if self._view_source is None:
            return 0
        view = self._view_source()
        if view.refreshed_at is None:
            return 0  # nothing confirmed yet
        rule = self._rule_source() if self._rule_source is not None else RackRule()
        lines = snapshot_lines(view, rule, self.config.instance_id, next(self._snapshot_seq),
                               self.wall_clock(), self.clock(), self.config.snapshot_interval_s)
        try:
            self._snapshots.write(lines)
        except OSError as exc:
            self._log_error("ledger snapshot write failed: %s", exc)
            return 0
        self.metrics.snapshots.inc()
        return len(lines)

    def _log_error(self, text: str, *args: object) -> None:
        now = self.clock()
        if now - self._last_error_log >= 60:
            self._last_error_log = now
            log.error(text, *args)


class PendingProduce:
    """Rows of forwarded partitions, completed from the broker's Produce response."""

    __slots__ = ("_ledger", "_rows", "_sent_at")

    def __init__(
        self, ledger: DecisionLedger, rows: dict[tuple[TopicKey, int], Row], sent_at: float
    ) -> None:
        self._ledger = ledger
        self._rows = rows
        self._sent_at = sent_at

    def wrap(self, transform: ResponseTransform) -> ResponseTransform:
        """``transform`` preceded by recording the broker's answer (same frame, same version)."""

        def record_then_transform(frame: memoryview, version: int) -> object:
            self.complete(frame, version)
            return transform(frame, version)

        return record_then_transform

    def complete(self, frame: memoryview, version: int) -> None:
        """Queue the rows with a copy of the response; the writer thread parses it."""
        ledger = self._ledger
        latency = round((ledger.clock() - self._sent_at) * 1000, 3)
        ledger.offer_answer(Answered(self._rows, bytes(frame), version, latency))


class Answered:
    """Rows of forwarded partitions and the broker's response frame (a copy), queued."""

    __slots__ = ("rows", "frame", "version", "latency_ms")

    def __init__(self, rows: dict[tuple[TopicKey, int], Row], frame: bytes, version: int,
                 latency_ms: float) -> None:
        self.rows = rows
        self.frame = frame
        self.version = version
        self.latency_ms = latency_ms

    def completed_rows(self, metrics: LedgerMetrics) -> list[Row]:
        """The rows with the broker's code and base offset (None where unreadable)."""
        results: dict[tuple[TopicKey, int], tuple[int, int]] = {}
        try:
            response = parse_produce_response(self.frame, self.version)
        except ProtocolError:
            metrics.response_parse_errors.inc()
        else:
            for t in response.topics:
                for p in t.partitions:
                    results[(t.key, p.index)] = (p.error_code, p.base_offset)
        latency = self.latency_ms
        out = []
        for key, row in self.rows.items():
            code, offset = results.get(key, (None, None))
            # wire_error (13), broker_error (14), base_offset (15), latency_ms (18)
            out.append(row[:13] + (code, code, offset) + row[16:18] + (latency,) + row[19:])
        return out


def _topic_name(d: Decision) -> str:
    if d.topic is not None:
        return d.topic
    key = d.topic_key
    return key.hex() if isinstance(key, bytes) else key


def snapshot_lines(
    view: ClusterView,
    rule: RackRule,
    instance: str,
    seq: int,
    wall: float,
    now: float,
    interval_s: float,
) -> list[str]:
    """One line per broker and one per partition of ``view``."""
    base = {"v": SCHEMA_VERSION, "ts": wall, "instance": instance, "snapshot": seq,
            "interval_s": interval_s}
    lines = []
    for node_id, rack in sorted(view.racks.items()):
        lines.append(json.dumps({**base, "kind": "broker", "node_id": node_id, "rack": rack,
                                 "live": node_id in view.brokers},
                                separators=(",", ":")) + "\n")
    for name in sorted(view.topics):
        topic = view.topics[name]
        age = view.age(now, topic)
        for index in sorted(topic.partitions):
            state = topic.partitions[index]
            lines.append(json.dumps({
                **base, "kind": "partition", "topic": name, "partition": index,
                "leader": state.leader, "replicas": list(state.replicas),
                "replica_racks": list(view.isr_racks(state.replicas)),
                "isr": list(state.isr), "isr_racks": list(view.isr_racks(state.isr)),
                "min_isr": topic.min_insync_replicas,
                "required_racks": rule.required_racks(name),
                "metadata_age_ms": round(age * 1000, 3) if age != float("inf") else None,
            }, separators=(",", ":")) + "\n")
    return lines


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
