"""What the event loop records per rack-checked produce: one small :class:`Entry`.

Per request, not per partition: when the request is decided, its numbers (time,
request number, the view's and the rule's sequence numbers, API version, counts)
are packed into one ``bytes`` (:data:`proxy.ledger.buffer.HEAD`) and the outcome of
each partition into another (one byte each: 0 it passed, else an index into
:data:`OUTCOMES`, which says its decision, reason and the proxy's error code); its
partitions are the rows the rule's caller packed once for every reader of the
request's record counts (:func:`protocol.produce_partitions.partition_rows`: four
int32 each, topic number, partition, records from the batch header, bytes), kept as
they are. The strings are kept by reference (client id, address,
topic names). Nothing the view already holds is copied: the writer thread writes
the view and the rule when they change (:mod:`proxy.ledger.versions`), and the
pipeline joins the two by sequence number. When the broker answers, the answer's
bytes are appended as they are, read by the pipeline (:mod:`pipeline.answers`).

Invariants: an entry holds no reference to the request, its frame or the view
(only bytes, strings and ints); :meth:`Entry.__call__` calls the wrapped transform
whatever the ledger does, so a ledger failure never reaches the client's connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import countOf, itemgetter
from typing import TYPE_CHECKING

from protocol.produce import ProduceRequest
from proxy.cluster.view import ClusterView
from proxy.enforce.policy import NOT_ENOUGH_REPLICAS, Decision, Verdict
from proxy.ledger.schema import FORWARDED, OBSERVED, REJECTED
from proxy.relay.response_queue import ResponseTransform

if TYPE_CHECKING:
    from proxy.ledger.recorder import DecisionLedger

RACKS_CODE = -1
"""In :data:`OUTCOMES`: the error code is the request's (the dedicated code, or 19)."""


def _outcomes() -> tuple[tuple[tuple[str, str, int | None], ...],
                         dict[bool, dict[Verdict, int]]]:
    outcomes: list[tuple[str, str, int | None]] = [("", "", None)]  # 0: passed
    codes: dict[bool, dict[Verdict, int]] = {False: {Verdict.PASS: 0},
                                             True: {Verdict.PASS: 0}}
    for verdict in Verdict:
        if verdict is Verdict.PASS:
            continue
        if not verdict.rejects:
            outcomes.append((FORWARDED, verdict.value, None))
            codes[False][verdict] = codes[True][verdict] = len(outcomes) - 1
            continue
        outcomes.append((OBSERVED, verdict.value, None))
        codes[True][verdict] = len(outcomes) - 1
        outcomes.append((REJECTED, verdict.value, RACKS_CODE
                         if verdict is Verdict.NOT_ENOUGH_RACKS else NOT_ENOUGH_REPLICAS))
        codes[False][verdict] = len(outcomes) - 1
    return tuple(outcomes), codes


OUTCOMES, _CODES = _outcomes()
"""Outcome code -> (decision, reason, the proxy's error code: None, a code, or
:data:`RACKS_CODE`); code 0 is a partition that simply passed (no decision written)."""
REJECTED_CODES = tuple(i for i, o in enumerate(OUTCOMES) if o[0] == REJECTED)
ONE_CODE = {observe: {v: bytes((c,)) for v, c in codes.items()}
            for observe, codes in _CODES.items()}
"""ONE_CODE[observe][verdict]: the codes of a one-partition request (the recorder looks it up
itself: most requests of many clients have one partition)."""
_VERDICT = itemgetter(Decision._fields.index("verdict"))  # a tuple's item: no descriptor


class Entry:
    """One recorded request, complete but for the broker's answer.

    It is also the response transform of a recorded request that went upstream
    (:meth:`wrap`): called with the broker's answer, it hands the answer to the
    ledger's :meth:`~proxy.ledger.recorder.DecisionLedger.complete` (which never
    raises), then runs the wrapped transform, always. One object per request: the
    hook costs no second allocation on the loop."""

    __slots__ = ("ledger", "head", "who", "topics", "topic_ids", "parts", "codes", "rows",
                 "sent_at", "_transform")

    def __init__(self, ledger: DecisionLedger, head: bytes, who: tuple[str | None, str],
                 topics: tuple[str, ...], topic_ids: tuple[bytes, ...] | None, parts: bytes,
                 codes: bytes, rows: int, sent_at: float) -> None:
        self.ledger = ledger
        self.head = head  # buffer.HEAD
        self.who = who  # (client id, client address)
        self.topics = topics
        self.topic_ids = topic_ids  # the request's keys, when it names topics by id (v13+)
        self.parts = parts  # buffer.PART per partition
        self.codes = codes  # an OUTCOMES code per partition
        self.rows = rows
        """Partition-writes recorded (the unit of the queue bound and the drop counter)."""
        self.sent_at = sent_at
        self._transform: ResponseTransform | None = None

    def wrap(self, transform: ResponseTransform) -> ResponseTransform:
        self._transform = transform
        return self

    def __call__(self, frame: memoryview, version: int) -> object:
        self.ledger.complete(self, frame)  # never raises
        transform = self._transform
        assert transform is not None
        return transform(frame, version)


def outcome_codes(decisions: Sequence[Decision], observe: bool) -> bytes:
    """One :data:`OUTCOMES` code per partition. A request's partitions usually share one
    verdict (their topic's rule and racks): then no per-partition work."""
    one = ONE_CODE[observe]
    n = len(decisions)
    if n == 0:
        return b""
    first = decisions[0].verdict
    if countOf(map(_VERDICT, decisions), first) == n:
        return one[first] * n
    return bytes(map(_CODES[observe].__getitem__, map(_VERDICT, decisions)))


def all_rejected(codes: bytes) -> bool:
    """True when the proxy refused every partition (it answers itself: no broker answer)."""
    return bool(codes) and sum(map(codes.count, REJECTED_CODES)) == len(codes)


def request_topics(request: ProduceRequest, view: ClusterView
                   ) -> tuple[tuple[str, ...], tuple[bytes, ...] | None]:
    """The request's topic names and its topic ids (v13+, named by the view where it
    knows them; else None): its partitions' rows number them in this order."""
    names: list[str] = []
    ids: list[bytes] | None = None
    for topic in request.topics:
        name = topic.name
        if name is None:  # v13+: by id
            tid = topic.topic_id or b""
            name = view.topic_ids.get(tid) or tid.hex()
            ids = [] if ids is None else ids
            ids.append(tid)
        names.append(name)
    return tuple(names), tuple(ids) if ids is not None else None
