"""The Produce hook that applies the rack rule to acks=all requests.

acks=0 and acks=1, and every request while no topic needs more than one rack,
are forwarded after reading only the acks field. Otherwise the request is
walked (no record bytes copied), the pure policy decides per partition, and:
- all partitions pass (or observe mode): the original bytes go upstream;
- all are rejected: the proxy answers itself, nothing goes upstream;
- mixed: a rewritten request without the rejected partitions goes upstream
  and the broker's answer is merged with the synthetic errors.
A request naming a partition the view does not know waits (bounded) for one
metadata refresh, then is decided on whatever the view holds. With a watched set
(``view_scope = "watched"``) every decided request's topics join it first, so that
refresh asks for a topic seen for the first time: one Metadata round trip. A
rack rejection on a topic whose ``min.insync.replicas`` the view does not know yet
(new to it) waits for one more refresh that reads it, and is decided again: the
replica count is checked first, by the broker (DESIGN.md section 1, step 1).
With a decision ledger (proxy.ledger.recorder), every decision is also recorded, and
the broker's answer to forwarded partitions is read for it; the ledger never
changes an action. With an answer watch (the loss watch, proxy.losswatch), the
answer of every forwarded acks=1/all request is also handed to the reader it
gives, in every mode; it never changes an action either. In enforcing mode with an
acknowledgement recheck (proxy.enforce.recheck), the answer of a request the rule let
through is checked again when it is slow or its partition is held: a success the rule
would now refuse becomes NOT_ENOUGH_REPLICAS_AFTER_APPEND; and a request whose view is
known stale (a partition suspect since a slow answer, or sent to a broker the view does
not show as its leader) waits for a lookup and is decided on the fresh view (refused as
on stale metadata when the lookup fails).

Invariant: nothing here turns a failed produce into a successful one; a
rejection is always an error code the client sees for that partition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.headers import RequestHeader, parse_request_header
from protocol.produce import (
    PartitionResult,
    ProduceRequest,
    TopicKey,
    drop_partitions,
    merge_produce_responses,
    parse_produce_response,
    partition_rows,
    peek_acks,
    walk_produce_request,
)
from proxy.cluster.view import ClusterView, ClusterViewStore
from proxy.cluster.watch import WatchedTopics
from proxy.enforce.metrics import EnforcementMetrics
from proxy.enforce.policy import (
    NOT_ENOUGH_REPLICAS,
    REJECTING,
    Decision,
    RackRule,
    Verdict,
    decide,
    decide_known,
    distrust,
)
from proxy.enforce.recheck import forwarded_walk
from proxy.relay.actions import Action, ClientInfo, Forward, Reply
from proxy.relay.response_queue import AnswerReader, ResponseTransform

if TYPE_CHECKING:
    from proxy.enforce.recheck import AckRecheck
    from proxy.ledger.recorder import DecisionLedger

log = logging.getLogger("rackguard.enforcement")
_ABSENT_MEMORY = 10_000  # topics remembered without a min.insync.replicas (then forgotten)

# (client, request frame, acks, header, walk and partition_rows if made) -> the reader of
# the answer
AnswerWatch = Callable[[ClientInfo, memoryview, int, RequestHeader | None,
                        ProduceRequest | None, bytes | None], AnswerReader | None]


@dataclass(frozen=True, slots=True)
class EnforcementSettings:
    rule: RackRule
    dedicated_code: int | None  # None: compat mode (code 19)
    observe: bool
    unknown_wait_s: float


class RackEnforcer:
    def __init__(
        self,
        settings: EnforcementSettings,
        store: ClusterViewStore,
        refresh: Callable[[], Awaitable[bool]],
        response_transform: ResponseTransform,
        metrics: EnforcementMetrics,
        clock: Callable[[], float],
        ledger: DecisionLedger | None = None,
        watched: WatchedTopics | None = None,
        refresh_configs: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.settings = settings
        self._watched = watched  # None: the view covers the whole cluster
        self._ledger = ledger  # None: off, and nothing below costs anything
        self._store = store
        self._refresh = refresh
        # None: a rejection is never held for min.insync.replicas (the view has them all)
        self._refresh_configs = refresh_configs
        self._transform = response_transform
        self._metrics = metrics
        self._clock = clock
        self._rule_seen: RackRule | None = None
        self._rule_enabled = False
        self._watch: AnswerWatch | None = None
        self._recheck: AckRecheck | None = None
        # topics a completed refresh brought no min.insync.replicas for (a broker that has
        # none, or may not describe it): their rack rejections are not held for it again
        self._min_isr_absent: set[TopicKey] = set()

    def recheck_answers(self, recheck: AckRecheck) -> None:
        """In enforcing mode, check forwarded acks=all answers again with ``recheck``."""
        self._recheck = recheck

    def watch_answers(self, watch: AnswerWatch) -> None:
        """Hand the answers of forwarded acks=1/all requests to ``watch``'s readers."""
        self._watch = watch

    def _enabled(self, rule: RackRule) -> bool:
        """``rule.enabled``, worked out once per rule object (it is frozen)."""
        if rule is not self._rule_seen:
            self._rule_enabled = rule.enabled
            self._rule_seen = rule
        return self._rule_enabled

    def replace_settings(self, settings: EnforcementSettings) -> None:
        """Swap the settings whole (config reload); requests in flight keep theirs."""
        self.settings = settings

    def __call__(
        self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int, corr: int
    ) -> Action | Awaitable[Action]:
        settings = self.settings
        rule = settings.rule
        acks = peek_acks(frame)  # Produce v0-v2 raise: they cannot be checked
        if acks != -1 or not (
                self._rule_enabled if rule is self._rule_seen else self._enabled(rule)):
            if acks == 0 or self._watch is None:
                return Forward(frame, acks != 0, self._transform)
            return Forward(frame, True, self._transform,
                           read=self._watch(client, frame, acks, None, None, None))
        header = parse_request_header(frame)
        request = walk_produce_request(frame, header)
        if self._watched is not None:
            self._watched.use([t.key for t in request.topics])
        now = self._clock()
        view = self._store.view
        decisions = decide_known(request, view, rule, now)
        if decisions is None:  # the view lacks a partition the request names
            return self._after_refresh(settings, client, frame, header, request)
        if self._refresh_configs is not None and self._held_for_min_isr(decisions):
            return self._after_configs(self._refresh_configs, settings, client, frame, header,
                                       request)
        if self._recheck is not None and not settings.observe:
            lookup = self._recheck.before_deciding(client.listener, decisions)
            if lookup is not None:  # the view is known stale for some partition
                return self._after_lookup(lookup, settings, client, frame, header, request)
        return self._act(settings, client, frame, header, request, now, view, decisions)

    async def _after_lookup(
        self,
        lookup: Awaitable[frozenset[tuple[TopicKey, int]]],
        settings: EnforcementSettings,
        client: ClientInfo,
        frame: memoryview,
        header: RequestHeader,
        request: ProduceRequest,
    ) -> Action:
        """Decide on the view a lookup brought; the partitions it could not bring one for
        are refused as on stale metadata (or forwarded with ``fail_open``)."""
        failed = await lookup
        now = self._clock()
        view = self._store.view
        decisions = decide(request, view, settings.rule, now)
        if failed:
            decisions = distrust(decisions, failed, settings.rule)
        return self._act(settings, client, frame, header, request, now, view, decisions)

    async def _after_refresh(
        self,
        settings: EnforcementSettings,
        client: ClientInfo,
        frame: memoryview,
        header: RequestHeader,
        request: ProduceRequest,
    ) -> Action:
        self._metrics.unknown_partition_refreshes.inc()
        try:
            async with asyncio.timeout(settings.unknown_wait_s):
                refreshed = await asyncio.shield(self._refresh())
        except TimeoutError:
            refreshed = False
        if not refreshed:
            log.info("metadata refresh for an unknown partition failed or took longer than "
                     "%.1fs: deciding as on stale metadata", settings.unknown_wait_s)
        now = self._clock()
        view = self._store.view
        decisions = decide(request, view, settings.rule, now, unknown_verified=refreshed)
        if (refreshed and self._refresh_configs is not None
                and self._held_for_min_isr(decisions)):
            return await self._after_configs(self._refresh_configs, settings, client, frame,
                                             header, request)
        return self._act(settings, client, frame, header, request, now, view, decisions)

    async def _after_configs(
        self,
        refresh_configs: Callable[[], Awaitable[bool]],
        settings: EnforcementSettings,
        client: ClientInfo,
        frame: memoryview,
        header: RequestHeader,
        request: ProduceRequest,
    ) -> Action:
        """Decide again once the topics' min.insync.replicas are read (bounded like a
        refresh; on failure or timeout, decided on what the view holds, as before)."""
        try:
            async with asyncio.timeout(settings.unknown_wait_s):
                refreshed = await asyncio.shield(refresh_configs())
        except TimeoutError:
            refreshed = False
        now = self._clock()
        view = self._store.view
        decisions = decide(request, view, settings.rule, now, unknown_verified=refreshed)
        if refreshed:
            if len(self._min_isr_absent) >= _ABSENT_MEMORY:
                self._min_isr_absent.clear()
            self._min_isr_absent.update(_without_min_isr(decisions))
        return self._act(settings, client, frame, header, request, now, view, decisions)

    def _held_for_min_isr(self, decisions: list[Decision]) -> bool:
        """A rack rejection of a partition whose topic's min.insync.replicas is unknown
        and was not asked for yet: the broker's replica count, checked first, might
        refuse it instead."""
        absent = self._min_isr_absent
        return any(key not in absent for key in _without_min_isr(decisions))

    def _act(
        self,
        settings: EnforcementSettings,
        client: ClientInfo,
        frame: memoryview,
        header: RequestHeader,
        request: ProduceRequest,
        now: float,
        view: ClusterView,
        decisions: list[Decision],
    ) -> Action:
        observe = settings.observe
        self._metrics.record(decisions, observe, client)
        read = None
        partitions = b""
        if self._ledger is not None or self._watch is not None:
            # the record counts, read once for the ledger and the loss watch
            partitions = partition_rows(frame, request)
            if self._watch is not None:
                read = self._watch(client, frame, -1, header, request, partitions)
        forwarded: bytes | memoryview = frame
        transform = self._transform
        if not observe and (rejected := [d for d in decisions if d.verdict in REJECTING]):
            synthetic = {(d.topic_key, d.partition): self._result(d, settings)
                         for d in rejected}
            if len(rejected) == len(decisions):
                if self._ledger is not None:
                    self._ledger.record(client, header, request, partitions, decisions, view,
                                        settings.rule, observe, settings.dedicated_code, now,
                                        self._ledger.answered_alone)
                return Reply(merge_produce_responses(
                    header.api_version, header.correlation_id, request, None, synthetic))
            keys: set[tuple[TopicKey, int]] = set(synthetic)
            forwarded = drop_partitions(frame, header, request, keys)
            transform = self._merger(header, request, synthetic)
        if self._ledger is not None:
            transform = self._ledger.record(client, header, request, partitions, decisions,
                                            view, settings.rule, observe,
                                            settings.dedicated_code, now, transform)
        if self._recheck is not None and not observe:
            # the forwarded partitions; the request as sent, walked only when held
            transform = self._recheck.wrap(
                transform, settings.rule, header.correlation_id,
                tuple((d.topic_key, d.partition) for d in decisions
                      if d.verdict not in REJECTING),
                (lambda: request) if forwarded is frame else forwarded_walk(forwarded),
                now, view, read)
            read = None
        return Forward(forwarded, True, transform, read=read)

    def _merger(
        self,
        header: RequestHeader,
        request: ProduceRequest,
        synthetic: dict[tuple[TopicKey, int], PartitionResult],
    ) -> ResponseTransform:
        transform = self._transform

        def merge(frame: memoryview, version: int) -> object:
            upstream = parse_produce_response(frame, version)
            merged = merge_produce_responses(
                version, header.correlation_id, request, upstream, synthetic)
            return transform(memoryview(merged), version)

        return merge

    @staticmethod
    def _result(decision: Decision, settings: EnforcementSettings) -> PartitionResult:
        code = NOT_ENOUGH_REPLICAS
        if decision.verdict is Verdict.NOT_ENOUGH_RACKS and settings.dedicated_code is not None:
            code = settings.dedicated_code
        return PartitionResult(index=decision.partition, error_code=code,
                               error_message=decision.message())


def _without_min_isr(decisions: list[Decision]) -> Iterator[TopicKey]:
    """The topics of the rack rejections whose min.insync.replicas is unknown (lazily:
    every decided request asks, and most have none)."""
    return (d.topic_key for d in decisions
            if d.verdict is Verdict.NOT_ENOUGH_RACKS and d.min_insync_replicas is None)
