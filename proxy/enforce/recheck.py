"""Withdraw an acks=all acknowledgement the rule would now refuse, and never decide on a
view known to be stale (docs/enforcement.md, "The honest limit").

The rule is checked before the append. A produce forwarded while a partition's ISR spans
enough racks can wait on the leader for replicas that stopped fetching and be
acknowledged once the ISR has shrunk to fewer racks. Such an answer is slow (it waited up
to ``replica.lag.time.max.ms``), and the answers released with it on the same shrink
follow it within milliseconds. So, in enforcing mode:

- an answer slower than ``after_s`` since the decision makes its partitions *suspect*
  (:mod:`.suspects`), at once, before the next answer of the same read is looked at; a
  lookup (:mod:`.fresh_view`) starts at once;
- every answer of a suspect or held partition is copied and held until a view fetched
  after the suspicion began is in the store; the partitions it acknowledged are decided
  again by the same pure policy on that view, and each one the rule now refuses gets
  NOT_ENOUGH_REPLICAS_AFTER_APPEND (code 20: "written to the log, but with fewer in-sync
  replicas than required", retriable in every client) instead of its success; if no
  such view could be had (the lookup failed or timed out), the rule cannot be verified
  and the success is withdrawn as on stale metadata (unless ``fail_open``);
- before deciding a produce (:meth:`AckRecheck.before_deciding`), the view is known
  stale for a partition that is suspect and not yet settled, or whose leader in the view
  is not the broker the client sent the request to (the client learnt of a leader
  change the view has not seen: the new leader may have an ISR of one rack). The
  request then waits for a lookup and is decided on the fresh view; if the lookup fails,
  those partitions are refused as on stale metadata (METADATA_STALE, code 19, retriable).

Invariants: only a success (error 0) is ever changed, only to code 20, so nothing here
turns a failed produce into a successful one; an answer that is not suspect goes through
the next transform unchanged, at the cost of one clock reading, a comparison and an
empty-dict test; a request pays one integer comparison per partition (its leader
against the connection's broker); a partition stays held until an answer of it is found
acceptable on a view from after its suspicion, or ``hold_max_s`` passes, so the held set
is empty on a healthy cluster and bounded by the partitions written during an outage.
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
    ProduceResponse,
    merge_produce_responses,
    parse_produce_response,
    walk_produce_request,
)
from proxy.cluster.view import ClusterView, ClusterViewStore
from proxy.enforce.fresh_view import FreshView
from proxy.enforce.policy import REJECTING, Decision, RackRule, Verdict, decide, distrust
from proxy.enforce.suspects import Key, Row, SuspectPartitions, unchanged
from proxy.relay.response_queue import AnswerReader, ResponseTransform

log = logging.getLogger("rackguard.enforcement")

NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
WITHDRAWN = "rackguard_acknowledgements_withdrawn"
LOOKUPS = "rackguard_stale_view_lookups"
MISMATCH_MEMO_S = 1.0
"""A (partition, broker) whose leader mismatch was looked up is not looked up again for
this long once the lookup is in: the view is then as fresh as it gets, the client is the
stale one (the broker answers NOT_LEADER_OR_FOLLOWER)."""
_MEMO_MAX = 4096
_FORWARDED = (Verdict.PASS, Verdict.BELOW_MIN_ISR)


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
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.after_s = after_s
        self._store = store
        self._clock = clock
        self.fresh = FreshView(refresh, clock, wait_s, sleep)
        self.suspects = SuspectPartitions(self.fresh, store, clock, hold_max_s)
        self._nodes: dict[str, int | None] = {}  # listener name -> its broker
        self._mismatch: dict[tuple[Key, int], float] = {}  # (partition, broker) -> looked up
        self._logged_at = float("-inf")
        self._kept_logged_at = float("-inf")
        self._unlogged = 0
        self.withdrawn = Counter(
            WITHDRAWN, "acks=all successes replaced by NOT_ENOUGH_REPLICAS_AFTER_APPEND "
            "because the partition's ISR no longer spanned enough racks when the answer "
            "arrived (or could not be checked on fresh metadata)", ["topic"],
            registry=registry)
        self.lookups = Counter(
            LOOKUPS, "Produce requests that waited for a metadata lookup before being "
            "decided: the view was known stale for a partition (reason leader_moved: the "
            "client sent it to a broker the view does not show as its leader; suspect: a "
            "slow answer of the partition was not yet checked on a fresh view)",
            ["reason"], registry=registry)

    @property
    def held(self) -> int:
        return len(self.suspects)

    # ----- before deciding a produce

    def before_deciding(self, listener: str, decisions: list[Decision]
                        ) -> Awaitable[frozenset[Key]] | None:
        """None on the normal path; else an awaitable that resolves once a fresh view is
        in the store, to the partitions no fresh view could be had for (to be refused as
        on stale metadata)."""
        node = self._nodes.get(listener, -2)
        if node == -2:
            node = self._nodes[listener] = _node_of(listener)
        moved: list[Decision] | None = None
        if node is not None:
            for d in decisions:
                if d.leader != node and d.verdict in _FORWARDED and (
                        d.required_racks > 1 or d.isr_racks):
                    if moved is None:
                        moved = []
                    moved.append(d)
        unsure = None
        held_keys: list[Key] = []
        if self.suspects.held:
            held = self.suspects.held
            held_keys = [k for d in decisions if (k := (d.topic_key, d.partition)) in held]
            if held_keys:
                unsure = self.suspects.unsure(held_keys)
        moved_keys: list[Key] = []
        since = float("-inf")
        before: dict[Key, Row | None] = {}
        if moved is not None:
            assert node is not None
            now = self._clock()
            memo = self._mismatch
            for d in moved:
                key = (d.topic_key, d.partition)
                began = memo.get((key, node))
                if began is not None and now - began < MISMATCH_MEMO_S:
                    if self.fresh.since(began):
                        continue  # looked up already: the client is the stale one
                else:
                    if len(memo) >= _MEMO_MAX:
                        self._prune(now)
                    began = memo[(key, node)] = now
                since = max(since, began)
                moved_keys.append(key)
                before[key] = (d.leader, d.isr)
        if not moved_keys and unsure is None:
            return None
        if moved_keys:
            self.lookups.labels("leader_moved").inc()
        if unsure is not None:
            self.lookups.labels("suspect").inc()
        return self._lookups(moved_keys, since, before, unsure, held_keys)

    async def _lookups(self, moved: list[Key], since: float, before: dict[Key, Row | None],
                       unsure: Awaitable[bool] | None, held: list[Key]) -> frozenset[Key]:
        failed: set[Key] = set()
        if moved:
            store = self._store
            if not await self.fresh.confirm(since, lambda: unchanged(store.view, before, moved)):
                failed.update(moved)
        if unsure is not None and not await unsure:
            failed.update(held)
        if failed:
            log.info("no fresh metadata for %d partition(s) the view is known stale for: "
                     "refused as on stale metadata", len(failed))
        return frozenset(failed)

    def _prune(self, now: float) -> None:
        memo = self._mismatch
        for k in [k for k, at in memo.items() if now - at >= MISMATCH_MEMO_S]:
            del memo[k]

    # ----- the answers

    def wrap(
        self,
        transform: ResponseTransform,
        rule: RackRule,
        correlation_id: int,
        keys: tuple[Key, ...],
        forwarded: Callable[[], ProduceRequest],
        decided_at: float,
        view: ClusterView,
        read: AnswerReader | None = None,
    ) -> ResponseTransform:
        """``transform`` preceded by the check; ``keys`` are the forwarded partitions,
        ``forwarded()`` the walk of the request actually sent (made only when held),
        ``view`` the view it was decided on; ``read`` (the loss watch's reader) is handed
        the answer as the client gets it, so that a withdrawn acknowledgement is not
        taken for one given."""
        after = decided_at + self.after_s
        held = self.suspects.held

        def checked(frame: memoryview, version: int) -> object:
            slow = self._clock() > after
            if not slow and (not held or not any(k in held for k in keys)):
                if read is not None:
                    read(frame, version)
                return transform(frame, version)
            return self._suspect(bytes(frame), version, slow, transform, rule,
                                 correlation_id, forwarded, view, read)

        return checked

    def _suspect(
        self,
        frame: bytes,
        version: int,
        slow: bool,
        transform: ResponseTransform,
        rule: RackRule,
        correlation_id: int,
        forwarded: Callable[[], ProduceRequest],
        view: ClusterView,
        read: AnswerReader | None,
    ) -> object:
        """Marks at once (synchronously) what a slow answer acknowledged, then holds the
        answer until its partitions are settled."""
        upstream = parse_produce_response(memoryview(frame), version)
        acknowledged = [(t.key, p.index) for t in upstream.topics for p in t.partitions
                        if p.error_code == 0]
        if not acknowledged:  # errors are never changed
            if read is not None:
                read(memoryview(frame), version)
            return transform(memoryview(frame), version)
        if slow:
            self.suspects.suspect(acknowledged, view)
        unsure = self.suspects.unsure(acknowledged)
        return self._recheck(frame, version, upstream, acknowledged, unsure, transform,
                             rule, correlation_id, forwarded, read)

    async def _recheck(
        self,
        frame: bytes,
        version: int,
        upstream: ProduceResponse,
        acknowledged: list[Key],
        unsure: Awaitable[bool] | None,
        transform: ResponseTransform,
        rule: RackRule,
        correlation_id: int,
        forwarded: Callable[[], ProduceRequest],
        read: AnswerReader | None,
    ) -> bytes:
        fresh = True if unsure is None else await unsure
        frame = self._withdraw(frame, version, upstream, set(acknowledged), rule,
                               correlation_id, forwarded(), fresh)
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
        upstream: ProduceResponse,
        acknowledged: set[Key],
        rule: RackRule,
        correlation_id: int,
        request: ProduceRequest,
        fresh: bool,
    ) -> bytes:
        now = self._clock()
        decisions = decide(request, self._store.view, rule, now)
        if not fresh:  # no view from after the suspicion: the rule cannot be verified
            decisions = distrust(decisions, acknowledged, rule)
        withdrawn: dict[Key, PartitionResult] = {}
        for d in decisions:
            key = (d.topic_key, d.partition)
            if key not in acknowledged:
                continue
            if d.verdict not in REJECTING:
                if fresh:
                    self.suspects.release(key)  # whole again: its answers pass unchecked
                if now - self._kept_logged_at >= 10.0:
                    log.info("acks=all answer kept after a recheck: topic %s partition %d: "
                             "in-sync replicas %s (racks %s), min.insync.racks=%d, on the "
                             "view from after the suspicion", d.topic or "?", d.partition,
                             list(d.isr), ",".join(d.isr_racks) or "not counted",
                             d.required_racks)
                    self._kept_logged_at = now
                continue
            self.suspects.keep(key)
            why = ("acknowledged after the in-sync replicas shrank"
                   if d.verdict is Verdict.NOT_ENOUGH_RACKS else
                   "its acknowledgement could not be checked on fresh metadata")
            withdrawn[key] = PartitionResult(
                index=d.partition, error_code=NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                error_message=f"written, but {why}: {d.message()}")
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
                                       upstream, withdrawn)


def _node_of(listener: str) -> int | None:
    """The broker a listener stands for ("node-5" -> 5); None for the bootstrap one."""
    if listener.startswith("node-"):
        try:
            return int(listener[5:])
        except ValueError:
            return None
    return None


def forwarded_walk(frame: bytes | memoryview) -> Callable[[], ProduceRequest]:
    """The walk of a rewritten request, made only when asked (the held path)."""

    def walk() -> ProduceRequest:
        view = memoryview(frame)
        return walk_produce_request(view, parse_request_header(view))

    return walk
