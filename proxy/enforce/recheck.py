"""Withdraw an acks=all acknowledgement the rule would now refuse (docs/enforcement.md,
"The honest limit").

The rule is checked before the append. A produce forwarded while a partition's ISR spans
enough racks can wait on the leader for replicas that stopped fetching and be
acknowledged once the ISR has shrunk to fewer racks. Such an answer is slow (it waited up
to ``replica.lag.time.max.ms``), and the answers released with it on the same shrink
follow it. So, in enforcing mode, a forwarded acks=all request's answer is *suspect*
when it took longer than ``after_s`` since the decision, or when its partition is
*held* (a suspect answer of it was seen and the partition not yet found whole again).
A suspect answer is copied and held until a Metadata poll that starts after it has
arrived (shared by every held answer); the partitions it acknowledged are decided again
by the same pure policy on the new view, and each one the rule now refuses gets
NOT_ENOUGH_REPLICAS_AFTER_APPEND (code 20: "written to the log, but with fewer in-sync
replicas than required", retriable in every client) instead of its success.

Invariants: only a success (error 0) is ever changed, only to code 20, so nothing here
turns a failed produce into a successful one; an answer that is not suspect goes through
the next transform unchanged, at the cost of one clock reading and a comparison; a
partition stays held until an answer of it is found acceptable (the ISR spans enough
racks again) or ``hold_max_s`` passes without one, so the held set is empty on a healthy
cluster and bounded by the partitions written during an outage.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry, Counter

from protocol.headers import parse_request_header
from protocol.produce import (
    PartitionResult,
    ProduceRequest,
    TopicKey,
    merge_produce_responses,
    parse_produce_response,
    walk_produce_request,
)
from proxy.cluster.view import ClusterViewStore
from proxy.enforce.policy import REJECTING, RackRule, decide
from proxy.relay.response_queue import AnswerReader, ResponseTransform

log = logging.getLogger("rackguard.enforcement")

NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
WITHDRAWN = "rackguard_acknowledgements_withdrawn"

Key = tuple[TopicKey, int]


class AckRecheck:
    def __init__(
        self,
        after_s: float,
        store: ClusterViewStore,
        refresh: Callable[[], Awaitable[bool]],
        clock: Callable[[], float],
        wait_s: float,
        registry: CollectorRegistry | None = None,
        hold_max_s: float = 300.0,
    ) -> None:
        self.after_s = after_s
        self._store = store
        self._refresh = refresh
        self._clock = clock
        self._wait_s = wait_s
        self._hold_max_s = hold_max_s
        self._held: dict[Key, float] = {}  # partition -> when it was last held
        self._logged_at = float("-inf")
        self._unlogged = 0
        self.withdrawn = Counter(
            WITHDRAWN, "acks=all successes replaced by NOT_ENOUGH_REPLICAS_AFTER_APPEND "
            "because the partition's ISR no longer spanned enough racks when the answer "
            "arrived", ["topic"], registry=registry)

    @property
    def held(self) -> int:
        return len(self._held)

    def wrap(
        self,
        transform: ResponseTransform,
        rule: RackRule,
        correlation_id: int,
        keys: tuple[Key, ...],
        forwarded: Callable[[], ProduceRequest],
        decided_at: float,
        read: AnswerReader | None = None,
    ) -> ResponseTransform:
        """``transform`` preceded by the check; ``keys`` are the forwarded partitions,
        ``forwarded()`` the walk of the request actually sent (made only when held);
        ``read`` (the loss watch's reader) is handed the answer as the client gets it,
        so that a withdrawn acknowledgement is not taken for one given."""
        after = decided_at + self.after_s
        held = self._held

        def checked(frame: memoryview, version: int) -> object:
            if self._clock() <= after and (not held or not any(k in held for k in keys)):
                if read is not None:
                    read(frame, version)
                return transform(frame, version)
            return self._recheck(bytes(frame), version, transform, rule, correlation_id,
                                 forwarded, read)

        return checked

    async def _recheck(
        self,
        frame: bytes,
        version: int,
        transform: ResponseTransform,
        rule: RackRule,
        correlation_id: int,
        forwarded: Callable[[], ProduceRequest],
        read: AnswerReader | None,
    ) -> bytes:
        upstream = parse_produce_response(memoryview(frame), version)
        acknowledged = [(t.key, p.index) for t in upstream.topics for p in t.partitions
                        if p.error_code == 0]
        if acknowledged:
            now = self._clock()
            for key in acknowledged:
                self._held.setdefault(key, now)
            try:
                async with asyncio.timeout(self._wait_s):
                    await asyncio.shield(self._refresh())
            except TimeoutError:
                log.info("metadata refresh for a slow acks=all answer took longer than "
                         "%.1fs: deciding again on the view as it is", self._wait_s)
            frame = self._withdraw(frame, version, upstream, set(acknowledged), rule,
                                   correlation_id, forwarded())
        if read is not None:
            read(memoryview(frame), version)
        result = transform(memoryview(frame), version)
        if not isinstance(result, (bytes, bytearray, memoryview)) and inspect.isawaitable(
                result):
            result = await result
        return result  # type: ignore[return-value]

    def _withdraw(
        self,
        frame: bytes,
        version: int,
        upstream: object,
        acknowledged: set[Key],
        rule: RackRule,
        correlation_id: int,
        request: ProduceRequest,
    ) -> bytes:
        now = self._clock()
        self._expire(now)
        withdrawn: dict[Key, PartitionResult] = {}
        for d in decide(request, self._store.view, rule, now):
            key = (d.topic_key, d.partition)
            if key not in acknowledged:
                continue
            if d.verdict not in REJECTING:
                self._held.pop(key, None)  # whole again: its answers pass unchecked
                continue
            self._held[key] = now
            withdrawn[key] = PartitionResult(
                index=d.partition, error_code=NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                error_message="written, but acknowledged after the in-sync replicas "
                f"shrank: {d.message()}")
            topic = d.topic or "?"
            self.withdrawn.labels(topic).inc()
            if now - self._logged_at >= 10.0:
                log.warning("acks=all acknowledgement withdrawn (code 20): topic %s "
                            "partition %d: %s (%d more withdrawn since the last line)",
                            topic, d.partition, d.message(), self._unlogged)
                self._logged_at, self._unlogged = now, 0
            else:
                self._unlogged += 1
        if not withdrawn:
            return frame
        return merge_produce_responses(version, correlation_id, request,
                                       upstream, withdrawn)  # type: ignore[arg-type]

    def _expire(self, now: float) -> None:
        held = self._held
        if held:
            for key in [k for k, since in held.items() if now - since > self._hold_max_s]:
                del held[key]


def forwarded_walk(frame: bytes | memoryview) -> Callable[[], ProduceRequest]:
    """The walk of a rewritten request, made only when asked (the held path)."""

    def walk() -> ProduceRequest:
        view = memoryview(frame)
        return walk_produce_request(view, parse_request_header(view))

    return walk
