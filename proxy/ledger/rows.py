"""Ledger rows: what the event loop records per produce, and the JSON lines made of it.

The event loop records one :class:`ProduceEntry` per rack-checked request
(references only: the walked request, its frame, the decisions, the view they
were made on, and later the broker's answer). :class:`RowFormatter` turns an
entry into one JSON line (schema v2): the entry's fields (time, request
number, client, upstream latency) once, and one array per partition, its
elements named by :data:`PARTITION_FIELDS` (``pipeline/`` reads each array
as a row of its own). The C encoder ``proxy.ledger._ledger_native`` does the usual
entry, on the event loop, and :meth:`RowFormatter.python_lines`, the
reference it must equal byte for byte, does the rest, on the writer thread.
Schema v1 wrote every field on every partition's line: four to five times the
bytes per partition on disk (the CPU it costs the proxy was not measurably
different).

Invariants:
- a line is exactly ``json.loads``-equal to the dict of schema v2 fields; it is
  assembled from pre-encoded fragments because one ``json.dumps`` per row cost
  more than the whole Produce hook. The fragments: the entry's head (time,
  request number, client, latency), each partition's context (topic, leader,
  ISR, racks, rule, decision) cached per (view, partition, verdict), and its
  tail (codes, offset, records, bytes, metadata age);
- an entry without partitions writes nothing;
- the frames an entry refers to are immutable (``bytes``-backed memoryviews),
  so reading them on the writer thread is safe;
- numbers are written from integers (:func:`fixed`), so both encoders write
  the same digits;
- partitions that went upstream carry the broker's code and base offset from
  its answer, or nulls when the answer could not be read (the caller counts that);
- an entry the C completion prepared (``proxy.ledger._ledger_native.Pending`` with
  ``prepared``: its line but for the answer, the request let go) is finished
  from that line, in C or by :meth:`RowFormatter.python_lines`, to the same
  bytes the whole entry would have given.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from protocol.primitives import Buffer, ProtocolError
from protocol.produce import ProduceRequest, Span, TopicData, TopicKey, record_count
from protocol.produce_results import produce_results
from proxy.cluster.view import ClusterView
from proxy.enforce.policy import NOT_ENOUGH_REPLICAS, Decision, RackRule, Verdict
from proxy.ledger.schema import (
    DECISION_SCHEMA_VERSION,
    FORWARDED,
    OBSERVED,
    REJECTED,
    SNAPSHOT_SCHEMA_VERSION,
)

_MAX_CACHED_CONTEXTS = 200_000
_MAX_CACHED_CLIENTS = 10_000
_dumps = json.JSONEncoder(separators=(",", ":")).encode

Results = dict[tuple[TopicKey, int], tuple[int, int]]
Context = tuple[Verdict, int, bytes, int | None]
"""(verdict, required racks, the row fragment from topic to reason, synthetic error code)."""
Contexts = dict[TopicKey, dict[int, Context]]
NativeRows = Callable[..., int | None]
"""``proxy.ledger._ledger_native.rows``: see :meth:`RowFormatter.native_into`
for its arguments."""

try:
    from proxy.ledger._ledger_native import rows as _native_rows
except ImportError:  # built without a C compiler: the Python encoder does every entry
    NATIVE_ROWS: NativeRows | None = None
else:
    NATIVE_ROWS = _native_rows


class ProduceEntry:
    """One rack-checked produce request, as recorded: encoded when complete (the
    broker's answer, if any, arrived), or queued for the writer thread.

    ``decisions`` are the partitions this entry records (all of the request's,
    or the rejected or forwarded part of a mixed one). ``answer`` is the broker's
    response frame for forwarded partitions (None for rejected ones).
    """

    __slots__ = ("wall", "req", "client_id", "peer", "request", "frame", "decisions", "view",
                 "observe", "dedicated_code", "answer", "version", "latency_ms")
    prepared: bytes | None = None  # (the C Pending's line made when recorded)

    def __init__(
        self,
        wall: float,
        req: int,
        client_id: str | None,
        peer: str,
        request: ProduceRequest,
        frame: Buffer,
        decisions: Sequence[Decision],
        view: ClusterView,
        observe: bool,
        dedicated_code: int | None,
    ) -> None:
        self.wall = wall
        self.req = req
        self.client_id = client_id
        self.peer = peer
        self.request = request
        self.frame = frame
        self.decisions = decisions
        self.view = view
        self.observe = observe
        self.dedicated_code = dedicated_code
        self.answer: Buffer | None = None
        self.version = 0
        self.latency_ms: float | None = None

    @property
    def rows(self) -> int:
        return len(self.decisions)


class RowFormatter:
    """Entries to JSON lines (ASCII bytes). Each is used by one thread (its caches are
    unlocked): the ledger has one for the event loop and one for the writer thread.

    The usual entry is encoded by the C module ``proxy.ledger._ledger_native`` when it was
    built; :meth:`python_lines` is the reference it must equal byte for byte, and
    does every entry the C code declines (an answer that is malformed, reordered or
    does not match the entry's partitions).
    """

    def __init__(self, instance: str, native: NativeRows | None = NATIVE_ROWS) -> None:
        self._head = (f'{{"v":{DECISION_SCHEMA_VERSION},"kind":"produce",'
                      f'"instance":{_dumps(instance)},"ts":').encode()
        self._native = native
        self._clients: dict[tuple[str | None, str], bytes] = {}
        self._caches_view: ClusterView | None = None
        self._caches: dict[tuple[bool, int | None], ContextCache] = {}
        self._cache: ContextCache | None = None  # the last one used
        self._sink: Any = None

    def attach(self, sink: Any) -> None:
        """Share this formatter's line head, client cache and current context cache with
        a ``proxy.ledger._ledger_native.Sink`` (the C completion path):
        :meth:`native_into` publishes the context cache it uses to it (the event loop's
        formatter only)."""
        sink.head = self._head
        sink.clients = self._clients
        self._sink = sink

    def lines(self, entry: ProduceEntry, out: list[bytes]) -> bool:
        """Append the entry's rows to ``out``; False when the broker's answer was unreadable."""
        buf = bytearray(1 << 16)
        end = self.native_into(entry, buf, 0)
        while end == -1:
            buf = bytearray(len(buf) * 4)
            end = self.native_into(entry, buf, 0)
        if end is not None:
            out.append(bytes(buf[:end]))
            return True
        return self.python_lines(entry, out)

    def native_into(self, entry: ProduceEntry, out: bytearray, pos: int) -> int | None:
        """Write the entry's rows into ``out`` from ``pos`` with the C encoder: the new end,
        -1 when they do not fit, None when it declines or was not built."""
        native = self._native
        if native is None:
            return None
        if entry.prepared is not None:  # a C Pending encoded when recorded: the answer only
            return entry.finish_into(out, pos)  # type: ignore[attr-defined]
        cache = self._cache
        if (cache is None or entry.view is not cache.view or entry.observe is not cache.observe
                or entry.dedicated_code is not cache.dedicated
                or cache.made >= _MAX_CACHED_CONTEXTS):
            cache = self._cache = self._contexts_for(entry.view, entry.observe,
                                                     entry.dedicated_code)
        client = self._clients.get((entry.client_id, entry.peer)) or self._client(entry)
        decisions = entry.decisions
        topics = entry.request.topics
        if (len(topics[0].partitions) == len(decisions) if len(topics) == 1
                else sum(len(t.partitions) for t in topics) == len(decisions)):
            spans: tuple[TopicData, ...] | list[Span | None] = topics  # C reads them in order
        else:
            spans = self._spans(entry)
        end: int | None = native(out, pos, self._head, entry.wall, entry.req, client,
                                 entry.latency_ms, decisions, spans, entry.frame, entry.answer,
                                 entry.version, cache.table, cache.make)
        sink = self._sink
        if sink is not None:
            sink.view, sink.observe, sink.dedicated = cache.view, cache.observe, cache.dedicated
            sink.table, sink.make = cache.table, cache.make
            sink.made_left = _MAX_CACHED_CONTEXTS - cache.made
        return end

    def python_lines(self, entry: ProduceEntry, out: list[bytes] | list[bytes | memoryview]
                     ) -> bool:
        """:meth:`lines` in Python, for every entry."""
        if entry.prepared is not None:
            return self._finish_prepared(entry, out)
        decisions = entry.decisions
        if not decisions:
            return True
        results, readable, latency = _answer(entry)
        cache = self._contexts_for(entry.view, entry.observe, entry.dedicated_code)
        contexts = cache.table
        frame = entry.frame
        last_age, age_text = math.nan, b"null"  # NaN: the first row formats its age
        parts = [b'%s%s,"req":%d,%s"latency_ms":%s,"partitions":[' % (
            self._head, fixed(entry.wall, 1_000_000, 6), entry.req, self._client(entry),
            latency)]
        for d, span in zip(decisions, self._spans(entry), strict=True):
            partitions = contexts.get(d.topic_key)
            if partitions is None:
                partitions = contexts[d.topic_key] = {}
            context = partitions.get(d.partition)
            if (context is None or context[0] is not d.verdict
                    or context[1] != d.required_racks):
                context = partitions[d.partition] = cache.make(d)
            text, synthetic_code = context[2], context[3]
            records, size = _records_and_size(frame, span)
            if d.metadata_age_s != last_age:
                last_age = d.metadata_age_s
                age_text = fixed(last_age, 1_000_000, 3)  # milliseconds
            if synthetic_code is not None:
                codes = b"%d,null,null" % synthetic_code
            else:
                codes = _codes(results.get((d.topic_key, d.partition)))
            parts.append(b"%s%s,%d,%d,%s]," % (text, codes, records, size, age_text))
        parts[-1] = parts[-1][:-1]  # no comma after the last partition
        parts.append(b"]}\n")
        out.append(b"".join(parts))
        return readable

    @staticmethod
    def _finish_prepared(entry: ProduceEntry, out: list[bytes] | list[bytes | memoryview]
                         ) -> bool:
        """A C Pending's prepared line (encoded when recorded, its request let go) with
        the broker's answer, as :meth:`python_lines` would write it from the request."""
        prepared = entry.prepared
        assert prepared is not None
        results, readable, latency = _answer(entry)
        at: int = entry.latency_at  # type: ignore[attr-defined]
        parts = [prepared[:at], latency]
        start = at + 4  # after the prepared "null"
        for hole, key, partition in entry.holes():  # type: ignore[attr-defined]
            parts.append(prepared[start:hole])
            parts.append(_codes(results.get((key, partition))))
            start = hole + 14  # after the prepared "null,null,null"
        parts.append(prepared[start:])
        out.append(b"".join(parts))
        return readable

    def _client(self, entry: ProduceEntry) -> bytes:
        key = (entry.client_id, entry.peer)
        text = self._clients.get(key)
        if text is None:
            if len(self._clients) >= _MAX_CACHED_CLIENTS:
                self._clients.clear()
            text = self._clients[key] = (
                f'"client_id":{_dumps(entry.client_id)},"client_addr":{_dumps(entry.peer)},'
            ).encode()
        return text

    def _contexts_for(self, view: ClusterView, observe: bool, dedicated: int | None
                      ) -> ContextCache:
        if view is not self._caches_view:
            self._caches_view = view
            self._caches = {}
        cache = self._caches.get((observe, dedicated))
        if cache is None or cache.made >= _MAX_CACHED_CONTEXTS:
            cache = self._caches[(observe, dedicated)] = ContextCache(view, observe, dedicated)
        return cache

    @staticmethod
    def _spans(entry: ProduceEntry) -> list[Span | None]:
        """Each decision's record-set span (decisions are in request order; the C encoder
        reads them from the request itself when the decisions are all its partitions)."""
        decisions = entry.decisions
        topics = entry.request.topics
        spans = [p.records for t in topics for p in t.partitions]
        if len(spans) == len(decisions):
            return spans
        by_partition = {(t.key, p.index): p.records for t in topics for p in t.partitions}
        return [by_partition.get((d.topic_key, d.partition)) for d in decisions]


class ContextCache:
    """The row fragments (topic to reason) of one view and mode, as
    ``table[topic key][partition]``, each valid for the verdict and required racks
    it holds (leader, ISR and racks come from the view)."""

    __slots__ = ("view", "observe", "dedicated", "table", "made")

    def __init__(self, view: ClusterView, observe: bool, dedicated: int | None) -> None:
        self.view = view
        self.observe = observe
        self.dedicated = dedicated
        self.table: Contexts = {}
        self.made = 0

    def make(self, d: Decision) -> Context:
        self.made += 1
        text, code = _context(d, self.view, self.observe, self.dedicated)
        return d.verdict, d.required_racks, text, code


def _answer(entry: ProduceEntry) -> tuple[Results, bool, bytes]:
    """The broker's codes and offsets by partition, whether its answer was readable, and
    the latency as written."""
    results: Results = {}
    readable = True
    if entry.answer is not None:
        try:
            results = produce_results(entry.answer, entry.version)
        except ProtocolError:
            readable = False
    latency = b"null" if entry.latency_ms is None else fixed(entry.latency_ms, 1000, 3)
    return results, readable, latency


def _codes(result: tuple[int, int] | None) -> bytes:
    """A forwarded partition's wire error, broker error (the same code) and base offset,
    or nulls when the broker's answer has none for it."""
    if result is None:
        return b"null,null,null"
    return b"%d,%d,%d" % (result[0], result[0], result[1])


def _context(
    d: Decision, view: ClusterView, observe: bool, dedicated_code: int | None
) -> tuple[bytes, int | None]:
    """The partition array's opening from topic to reason (with a trailing comma), and the synthetic
    error code when the proxy answered the partition itself (None when forwarded)."""
    racks = d.isr_racks if d.required_racks > 1 or not d.isr else view.isr_racks(d.isr)
    rejects = d.verdict.rejects
    code: int | None = None
    if rejects and not observe:
        decision, code = REJECTED, NOT_ENOUGH_REPLICAS
        if d.verdict is Verdict.NOT_ENOUGH_RACKS and dedicated_code is not None:
            code = dedicated_code
    else:
        decision = OBSERVED if rejects else FORWARDED
    fields = [topic_name(d), d.partition, d.leader, list(d.isr), list(racks), d.required_racks,
              d.min_insync_replicas, decision, "" if d.verdict is Verdict.PASS else d.verdict.value]
    return (_dumps(fields)[:-1] + ",").encode(), code


def fixed(x: float, scale: int, digits: int) -> bytes:
    """``x * scale`` rounded half up, written with ``digits`` decimals after dividing by
    ``10**digits`` (seconds with ``1_000_000, 6`` for microseconds; milliseconds from
    seconds with ``1_000_000, 3``); ``null`` when not finite. Integer arithmetic, so
    the C encoder writes the same digits (``repr`` of a float is slow, and C's
    ``printf`` and Python's formatting need not round alike)."""
    if not math.isfinite(x):
        return b"null"
    n = math.floor(abs(x) * scale + 0.5)
    whole, frac = divmod(n, 10**digits)
    return b"%s%d.%0*d" % (b"-" if x < 0 and n else b"", whole, digits, frac)


def _records_and_size(frame: Buffer, span: tuple[int, int] | None) -> tuple[int, int]:
    """Records (from batch headers; -1 when they cannot be read) and bytes of a record set."""
    if span is None:
        return 0, 0
    size = span[1] - span[0]
    try:
        return record_count(frame, span), size
    except ProtocolError:
        return -1, size  # the broker judges the batch; the ledger does not


def topic_name(d: Decision) -> str:
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
) -> Iterator[str]:
    """One line per broker and one per partition of ``view`` (lazily: the caller paces it)."""
    base = {"v": SNAPSHOT_SCHEMA_VERSION, "ts": wall, "instance": instance, "snapshot": seq,
            "interval_s": interval_s}
    for node_id, rack in sorted(view.racks.items()):
        yield _dumps({**base, "kind": "broker", "node_id": node_id, "rack": rack,
                      "live": node_id in view.brokers}) + "\n"
    for name in sorted(view.topics):
        topic = view.topics[name]
        age = view.age(now, topic)
        for index in sorted(topic.partitions):
            state = topic.partitions[index]
            yield _dumps({
                **base, "kind": "partition", "topic": name, "partition": index,
                "leader": state.leader, "replicas": list(state.replicas),
                "replica_racks": list(view.isr_racks(state.replicas)),
                "isr": list(state.isr), "isr_racks": list(view.isr_racks(state.isr)),
                "min_isr": topic.min_insync_replicas,
                "required_racks": rule.required_racks(name),
                "metadata_age_ms": round(age * 1000, 3) if age != float("inf") else None,
            }) + "\n"
