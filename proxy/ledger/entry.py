"""What the event loop records per rack-checked produce: one small :class:`Entry`.

Per request, not per partition: the time, the request's number, the client, the
sequence numbers of the view and the rule it was decided on, the topic names once,
and per partition four integers in parallel tuples (topic number, partition,
records, bytes); the decision only for partitions that did not simply pass. Nothing
the view already holds is copied: the writer thread writes the view and the rule
when they change (:mod:`proxy.ledger.versions`), and the pipeline joins the two by
sequence number. The broker's answer is kept as its bytes (one copy), written as
they are, and read by the pipeline (:mod:`pipeline.answers`).

Invariants: an entry holds no reference to the request, its frame or the view
(only ints, strings and bytes: nothing the garbage collector tracks for long);
:meth:`Entry.__call__` calls the wrapped transform whatever the ledger does, so a
ledger failure never reaches the client's connection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from protocol.primitives import Buffer
from protocol.produce import ProduceRequest, record_counts
from proxy.cluster.view import ClusterView
from proxy.enforce.policy import NOT_ENOUGH_REPLICAS, Decision, Verdict
from proxy.ledger.schema import FORWARDED, OBSERVED, REJECTED
from proxy.relay.response_queue import ResponseTransform

Parts = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]
"""Per partition, in parallel tuples: topic number, partition, records, bytes."""
NotPassed = tuple[int, str, str, int | None]
"""(position among the request's partitions, decision, reason, the proxy's error code)."""
Row = tuple[Any, ...]
"""An entry as the writer reads it (:meth:`Entry.row`), by the positions below."""
(WALL, REQ, CLIENT_ID, PEER, API_VERSION, VIEW_SEQ, RULE_SEQ, TOPICS, TOPIC_IDS, TOPIC_NO,
 PARTITION, RECORDS, BYTES, NOT_PASSED, ANSWER, LATENCY_MS, ROWS, HELD) = range(18)


class Entry:
    """One recorded request. ``answer`` and ``latency_ms`` are set when the broker answers
    (left None when the proxy answered every partition itself).

    It is also the response transform of a recorded request that went upstream
    (:meth:`wrap`): called with the broker's answer, it hands the answer to ``complete``
    (the ledger's, which never raises), then runs the wrapped transform, always. One
    object per request: the hook costs no second allocation on the loop."""

    __slots__ = ("wall", "req", "client_id", "peer", "api_version", "view_seq", "rule_seq",
                 "topics", "topic_ids", "parts", "not_passed", "answer", "latency_ms", "rows",
                 "sent_at", "complete", "_transform")

    def __init__(self, wall: float, req: int, client_id: str | None, peer: str,
                 api_version: int, view_seq: int, rule_seq: int, topics: tuple[str, ...],
                 topic_ids: tuple[bytes, ...] | None, parts: Parts,
                 not_passed: list[NotPassed] | None, sent_at: float = 0.0,
                 complete: Callable[[Entry, memoryview], None] | None = None) -> None:
        self.wall = wall
        self.req = req
        self.client_id = client_id
        self.peer = peer
        self.api_version = api_version
        self.view_seq = view_seq
        self.rule_seq = rule_seq
        self.topics = topics
        self.topic_ids = topic_ids  # the request's keys, when it names topics by id (v13+)
        self.parts = parts
        self.not_passed = not_passed
        self.answer: bytes | None = None
        self.latency_ms: float | None = None
        self.rows = len(parts[1])
        """Partition-writes recorded (the unit of the queue bound and the drop counter)."""
        self.sent_at = sent_at
        self.complete = complete
        self._transform: ResponseTransform | None = None

    def row(self) -> Row:
        """What the writer needs, as one tuple of ints, floats, strings, bytes and tuples of
        those: the garbage collector stops tracking such a tuple the first time it sees it,
        so a queue of thousands of them costs no collection time (entries would be
        promoted to the oldest generation and make full collections more frequent)."""
        parts = self.parts
        np = self.not_passed
        answer = self.answer
        rows = self.rows
        return (self.wall, self.req, self.client_id, self.peer, self.api_version,
                self.view_seq, self.rule_seq, self.topics, self.topic_ids, *parts,
                tuple(np) if np is not None else None, answer, self.latency_ms, rows,
                32 * rows + (len(answer) if answer is not None else 0) + 200)

    def wrap(self, transform: ResponseTransform) -> ResponseTransform:
        self._transform = transform
        return self

    def __call__(self, frame: memoryview, version: int) -> object:
        complete = self.complete
        if complete is not None:
            complete(self, frame)  # never raises (DecisionLedger.complete)
        transform = self._transform
        assert transform is not None
        return transform(frame, version)


def partitions_of(request: ProduceRequest, frame: Buffer, view: ClusterView
                  ) -> tuple[tuple[str, ...], tuple[bytes, ...] | None, Parts]:
    """The request's topic names, its topic ids (v13+; else None) and its partitions as
    four parallel tuples (a few comprehensions per topic, no per-partition call)."""
    topics = request.topics
    if len(topics) == 1 and topics[0].name is not None and len(topics[0].partitions) == 1:
        # one partition of one topic (librdkafka's usual request): no lists to build
        part = topics[0].partitions[0]
        span = part.records
        return ((topics[0].name,), None, ((0,), (part.index,), tuple(record_counts(frame, (
            span,))), (span[1] - span[0] if span is not None else 0,)))
    names: list[str] = []
    ids: list[bytes] | None = None
    topic_no: list[int] = []
    partition: list[int] = []
    records: list[int] = []
    nbytes: list[int] = []
    for number, topic in enumerate(topics):
        name = topic.name
        if name is None:  # v13+: by id
            tid = topic.topic_id or b""
            name = view.topic_ids.get(tid) or tid.hex()
            ids = [] if ids is None else ids
            ids.append(tid)
        names.append(name)
        ps = topic.partitions
        if len(ps) == 1:  # (no comprehension to set up)
            span = ps[0].records
            topic_no.append(number)
            partition.append(ps[0].index)
            records += record_counts(frame, (span,))
            nbytes.append(span[1] - span[0] if span is not None else 0)
            continue
        spans = [p.records for p in ps]
        topic_no += [number] * len(ps)
        partition += [p.index for p in ps]
        records += record_counts(frame, spans)  # -1: unreadable (the broker judges it)
        nbytes += [s[1] - s[0] if s is not None else 0 for s in spans]
    return (tuple(names), tuple(ids) if ids is not None else None,
            (tuple(topic_no), tuple(partition), tuple(records), tuple(nbytes)))


def not_passed(decisions: Sequence[Decision], observe: bool, dedicated_code: int | None
               ) -> list[NotPassed] | None:
    """The decisions of partitions that did not simply pass (None when all did)."""
    out: list[NotPassed] | None = None
    passed = Verdict.PASS
    for i, d in enumerate(decisions):
        verdict = d.verdict
        if verdict is passed:
            continue
        if out is None:
            out = []
        if verdict.rejects:
            if observe:
                out.append((i, OBSERVED, verdict.value, None))
            else:
                code = NOT_ENOUGH_REPLICAS
                if verdict is Verdict.NOT_ENOUGH_RACKS and dedicated_code is not None:
                    code = dedicated_code
                out.append((i, REJECTED, verdict.value, code))
        else:
            out.append((i, FORWARDED, verdict.value, None))
    return out
