"""What the event loop records per rack-checked produce, but for the broker's answer.

Per request, not per partition: when the request is decided, its numbers (time,
request number, the view's and the rule's sequence numbers, API version, counts)
are packed into one ``bytes`` (:data:`proxy.ledger.buffer.HEAD`) and the outcome of
each partition into another (one byte each: 0 it passed, else an index into
:data:`OUTCOMES`, which says its decision, reason and the proxy's error code); its
partitions are the rows the rule's caller packed once for every reader of the
request's record counts (:func:`protocol.produce_partitions.partition_rows`: four
int32 each, topic number, partition, records from the batch header, bytes), kept as
they are. The strings are kept by reference (client id, address, topic names).
Together they are the request's :data:`~proxy.ledger.buffer.Fields`. Nothing the
view already holds is copied: the writer thread writes the view and the rule when
they change (:mod:`proxy.ledger.versions`), and the pipeline joins the two by
sequence number. When the broker answers, the answer's bytes are queued with them
as they are, read by the pipeline (:mod:`pipeline.answers`).

Invariant: a request's fields hold no reference to the request, its frame or the view
(only bytes, strings and ints).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import countOf, itemgetter

from protocol.produce import ProduceRequest
from proxy.cluster.view import ClusterView
from proxy.enforce.policy import NOT_ENOUGH_REPLICAS, Decision, Verdict
from proxy.ledger.schema import FORWARDED, OBSERVED, REJECTED

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
ONE_CODE = {observe: {v: bytes((c,)) for v, c in codes.items()}
            for observe, codes in _CODES.items()}
"""ONE_CODE[observe][verdict]: the codes of a one-partition request (the recorder looks it up
itself: most requests of many clients have one partition)."""
_VERDICT = itemgetter(Decision._fields.index("verdict"))  # a tuple's item: no descriptor


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
