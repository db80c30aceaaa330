"""The rack rule (docs/enforcement.md, "The rule") as a pure function.

``decide`` takes what a Produce request asks for, a frozen cluster view, the
rack settings and the current time, and returns one decision per partition.
It does no I/O, reads no clock of its own and keeps no state, so it is tested
with plain values.

The rule, per partition of an acks=-1 request, in this order:
1. topic or partition unknown to the view, although the view was just
   refreshed: forward (the broker answers UNKNOWN_TOPIC_OR_PARTITION); if the
   refresh failed, the partition is unverifiable and is treated as in step 3;
2. required racks 1: forward, nothing checked;
3. view older than the bound: reject METADATA_STALE (fail closed) or forward
   (fail open);
4. ISR smaller than the topic's min.insync.replicas: forward (the broker
   answers NOT_ENOUGH_REPLICAS itself: replica count is checked first);
5. distinct racks of the ISR members (a rackless broker counts as the rack
   "", a node the proxy has never seen counts as no rack at all) fewer than
   required: reject NOT_ENOUGH_RACKS;
6. where racks have dimensions (``rack_dimensions``, e.g. region/zone) and the topic
   a minimum per dimension: the ISR's distinct values of a dimension fewer than its
   minimum: reject NOT_ENOUGH_RACKS naming the dimension (:mod:`.dimensions`); else
   forward. Without dimensions (the default) this step does not exist.

``decide_known`` is the same rule in the one pass the Produce hook makes: it
gives up (None) at the first topic or partition the view lacks, exactly when
``unknown_partitions`` is True, so the caller refreshes and calls ``decide``.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from protocol.produce_request import ProduceRequest, TopicKey
from proxy.cluster.view import ClusterView
from proxy.enforce.dimensions import RackDimensions, shortfall

NOT_ENOUGH_REPLICAS = 19
UNKNOWN_TOPIC_OR_PARTITION = 3


class Verdict(Enum):
    PASS = "pass"
    UNKNOWN = "unknown"  # forwarded; the broker decides
    BELOW_MIN_ISR = "below_min_isr"  # forwarded; the broker answers NOT_ENOUGH_REPLICAS
    STALE_FAIL_OPEN = "stale_fail_open"  # forwarded although the view is too old
    NOT_ENOUGH_RACKS = "NOT_ENOUGH_RACKS"
    METADATA_STALE = "METADATA_STALE"

    # Members are singletons compared by identity, so the identity hash is consistent
    # with equality; Enum's own __hash__ is a Python call, paid per partition in the
    # dicts the hot path keys by verdict.
    __hash__ = object.__hash__

    @property
    def rejects(self) -> bool:
        return self in REJECTING


REJECTING = (Verdict.NOT_ENOUGH_RACKS, Verdict.METADATA_STALE)
"""The verdicts that reject a partition (``Verdict.rejects``), for hot loops: a tuple,
since ``in`` on it compares identities in C, where a set would call Enum's Python-level
``__hash__``."""


@dataclass(frozen=True, slots=True)
class RackRule:
    """The rack settings the rule needs, resolved once per settings change."""

    default_min_racks: int = 1
    topic_min_racks: Mapping[str, int] | None = None
    prefix_min_racks: tuple[tuple[str, int], ...] = ()  # longest prefix first
    max_metadata_age_s: float = 10.0
    fail_open: bool = False
    # the rule over several dimensions (None: racks are one dimension, the default)
    dimensions: RackDimensions | None = None
    dimension_minimums: Mapping[str, int] | None = None  # for every topic
    topic_dimension_minimums: Mapping[str, Mapping[str, int]] | None = None  # by topic

    @property
    def enabled(self) -> bool:
        """False when no topic can require more than one rack: the check never runs."""
        return (
            self.default_min_racks > 1
            or any(v > 1 for v in (self.topic_min_racks or {}).values())
            or any(v > 1 for _, v in self.prefix_min_racks)
            or self.dimensions is not None and (
                any(v > 1 for v in (self.dimension_minimums or {}).values())
                or any(v > 1 for m in (self.topic_dimension_minimums or {}).values()
                       for v in m.values()))
        )

    def minimums(self, topic: str | None) -> Mapping[str, int] | None:
        """The topic's distinct in-sync values per dimension, where some dimension needs
        more than one; None (the default, and always without dimensions): none."""
        if self.dimensions is None:
            return None
        own = (self.topic_dimension_minimums or {}).get(topic) if topic is not None else None
        found = own if own is not None else self.dimension_minimums
        return found if found and any(v > 1 for v in found.values()) else None

    def required_racks(self, topic: str) -> int:
        if self.topic_min_racks:
            exact = self.topic_min_racks.get(topic)
            if exact is not None:
                return exact
        for prefix, value in self.prefix_min_racks:
            if topic.startswith(prefix):
                return value
        return self.default_min_racks

    def all_values(self) -> list[int]:
        return [self.default_min_racks, *(self.topic_min_racks or {}).values(),
                *(v for _, v in self.prefix_min_racks)]


class Decision(NamedTuple):
    """One partition's decision (a named tuple: built once per partition on the hot path)."""

    topic_key: TopicKey
    topic: str | None  # the name, when the view knows it
    partition: int
    verdict: Verdict
    required_racks: int
    isr: tuple[int, ...] = ()
    isr_racks: tuple[str, ...] = ()
    leader: int = -1
    min_insync_replicas: int | None = None
    metadata_age_s: float = 0.0
    dimensions: RackDimensions | None = None  # set when a dimension's minimum refused it
    minimums: Mapping[str, int] | None = None

    def message(self) -> str:
        """The partition's error_message on the wire for a rejection."""
        name = self.topic if self.topic is not None else "?"
        if self.verdict is Verdict.METADATA_STALE:
            return (
                f"METADATA_STALE: {name}-{self.partition}: rackguard's cluster metadata is "
                f"{self.metadata_age_s:.1f}s old; cannot verify min.insync.racks="
                f"{self.required_racks}"
            )
        if self.dimensions is not None and self.minimums is not None:
            miss = shortfall(self.isr_racks, self.dimensions, self.minimums)
            if miss is not None:
                return miss.message(name, self.partition, self.isr)
        seen = ",".join(repr(r) if r == "" else r for r in self.isr_racks) or "none"
        return (
            f"NOT_ENOUGH_RACKS: {name}-{self.partition}: in-sync replicas "
            f"{list(self.isr)} span {len(self.isr_racks)} rack(s) [{seen}], "
            f"min.insync.racks={self.required_racks}"
        )


def decide(
    request: ProduceRequest,
    view: ClusterView,
    rule: RackRule,
    now: float,
    unknown_verified: bool = True,
) -> list[Decision]:
    """One decision per partition, in request order. Callers skip acks != -1.

    ``unknown_verified`` is False when a refresh meant to find unknown partitions
    failed: those are then unverifiable and fail closed like stale metadata.
    """
    unknown = Verdict.UNKNOWN
    if not unknown_verified:
        unknown = Verdict.STALE_FAIL_OPEN if rule.fail_open else Verdict.METADATA_STALE
    decisions = _decide(request, view, rule, now, unknown)
    assert decisions is not None  # only a None ``unknown`` gives up
    return decisions


def decide_known(
    request: ProduceRequest, view: ClusterView, rule: RackRule, now: float
) -> list[Decision] | None:
    """``decide(request, view, rule, now)``, or None when the view lacks a topic or
    partition the request names (exactly when :func:`unknown_partitions` is True):
    the hot path's one pass instead of two."""
    return _decide(request, view, rule, now, None)


def _decide(
    request: ProduceRequest,
    view: ClusterView,
    rule: RackRule,
    now: float,
    unknown: Verdict | None,
) -> list[Decision] | None:
    """The rule; ``unknown`` None: return None at the first unknown topic or partition."""
    decisions: list[Decision] = []
    append = decisions.append
    make = Decision
    passed = Verdict.PASS
    isr_racks = view.isr_racks
    stale_verdict = Verdict.STALE_FAIL_OPEN if rule.fail_open else Verdict.METADATA_STALE
    for topic_data in request.topics:
        key = topic_data.key
        topic = view.topic(key)
        if topic is None:
            if unknown is None:
                return None
            name = topic_data.name if isinstance(key, str) else None
            required = rule.required_racks(name) if name is not None else rule.default_min_racks
            verdict = unknown if required > 1 else Verdict.UNKNOWN
            age = view.age(now)
            for p in topic_data.partitions:
                append(make(key, name, p.index, verdict, required, metadata_age_s=age))
            continue
        name = topic.name
        required = rule.required_racks(name)
        minimums = rule.minimums(name)
        dims = rule.dimensions if minimums is not None else None
        age = view.age(now, topic)
        stale = age > rule.max_metadata_age_s
        min_isr = topic.min_insync_replicas
        rows = topic.partitions.rows
        for p in topic_data.partitions:
            index = p.index
            row = rows.get(index)
            if row is None:
                if unknown is None:
                    return None
                verdict = unknown if required > 1 else Verdict.UNKNOWN
                append(make(key, name, index, verdict, required, metadata_age_s=age))
                continue
            _index, _error, leader, _epoch, _replicas, isr, _offline = row
            if required <= 1 and minimums is None:
                racks: tuple[str, ...] = ()
                verdict = passed
            else:
                racks = isr_racks(isr)
                if stale:
                    verdict = stale_verdict
                elif min_isr is not None and len(isr) < min_isr:
                    verdict = Verdict.BELOW_MIN_ISR
                elif len(racks) < required:
                    verdict = Verdict.NOT_ENOUGH_RACKS
                elif dims is not None and shortfall(racks, dims, minimums or {}) is not None:
                    append(make(key, name, index, Verdict.NOT_ENOUGH_RACKS, required, isr,
                                racks, leader, min_isr, age, dims, minimums))
                    continue
                else:
                    verdict = passed
            append(make(key, name, index, verdict, required, isr, racks, leader, min_isr, age))
    return decisions


def distrust(decisions: list[Decision], keys: Container[tuple[TopicKey, int]],
             rule: RackRule) -> list[Decision]:
    """``decisions`` with each one of ``keys`` that the rule applies to and would forward
    made the stale-metadata verdict (METADATA_STALE, or STALE_FAIL_OPEN with
    ``fail_open``): the view is known to be older than what these partitions need (a
    lookup for them failed), so it proves nothing for them."""
    stale = Verdict.STALE_FAIL_OPEN if rule.fail_open else Verdict.METADATA_STALE
    out = []
    for d in decisions:
        if (d.verdict in (Verdict.PASS, Verdict.BELOW_MIN_ISR)
                and (d.topic_key, d.partition) in keys
                and (d.required_racks > 1 or rule.minimums(d.topic) is not None)):
            d = d._replace(verdict=stale)
        out.append(d)
    return out


def unknown_partitions(request: ProduceRequest, view: ClusterView) -> bool:
    """True when the view lacks a topic or partition the request names."""
    for topic_data in request.topics:
        topic = view.topic(topic_data.key)
        if topic is None:
            return True
        for p in topic_data.partitions:
            if p.index not in topic.partitions.rows:
                return True
    return False
