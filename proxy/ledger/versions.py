"""Sequence numbers for the views and rules decisions are made on, and their snapshots.

:class:`Versions` numbers each new frozen :class:`~proxy.cluster.view.ClusterView`
(and each new rule: the :class:`~proxy.enforce.policy.RackRule` with the mode and
the dedicated error code) the first time the ledger sees it, from the event loop
(a request decided on it) or from the writer thread (polling the current one). The
number is the ledger's: the view is not changed. Asking again for the view just
numbered is one identity test; a new view with the same maps (brokers, racks,
topics: a refresh that changed nothing, as the store makes it) keeps the number.
:class:`SnapshotDiffer` (writer thread) turns each numbered view into snapshot rows,
topic by topic, only for what changed since the previous one: an unchanged view
costs nothing per partition, ever.

Invariants: numbers increase by one per new view (rule) and are handed to the
writer in order; a topic's row is written when its partitions or min.insync.replicas
change, or when a file opens (``full``), so each file can be read alone; the
event loop never diffs.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from proxy.cluster.view import ClusterView, TopicState
from proxy.enforce.policy import RackRule
from proxy.ledger.schema import BROKERS, GONE, RULE, TOPIC

Row = dict[str, Any]
RuleKey = tuple[RackRule, bool, int | None]  # the rule, observe mode, dedicated error code
Pending = tuple[str, int, Any, float]  # ("view" | "rule", seq, the view or RuleKey, wall time)


class Versions:
    """The current view's and rule's sequence numbers; what the writer has yet to write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._view: tuple[ClusterView | None, int] = (None, 0)
        self._rule: tuple[RuleKey | None, int] = (None, 0)
        self._pending: list[Pending] = []
        self._last: tuple[ClusterView | None, RackRule | None, bool, int | None,
                          tuple[int, int]] = (None, None, False, None, (0, 0))

    def seqs(self, view: ClusterView, rule: RackRule, observe: bool, dedicated: int | None,
             wall: float) -> tuple[int, int]:
        """(:meth:`view_seq`, :meth:`rule_seq`): the event loop's one call per request,
        one identity test of each when neither changed since its last call (which is
        all it keeps: numbers never change, whoever handed out newer ones since)."""
        last = self._last
        if (last[0] is view and last[1] is rule and last[2] is observe
                and last[3] == dedicated):
            return last[4]
        numbers = (self.view_seq(view, wall), self.rule_seq(rule, observe, dedicated, wall))
        self._last = (view, rule, observe, dedicated, numbers)
        return numbers

    def view_seq(self, view: ClusterView, wall: float) -> int:
        current = self._view
        if current[0] is view:
            return current[1]
        with self._lock:
            current = self._view
            last = current[0]
            if last is view:
                return current[1]
            if (last is not None and last.topics is view.topics
                    and last.brokers is view.brokers and last.racks is view.racks):
                # a refresh that changed nothing (the store keeps its maps): the same
                # snapshot, so the same number, and nothing for the writer to diff
                self._view = (view, current[1])
                return current[1]
            seq = current[1] + 1
            self._view = (view, seq)
            self._pending.append(("view", seq, view, wall))
            return seq

    def rule_seq(self, rule: RackRule, observe: bool, dedicated: int | None, wall: float
                 ) -> int:
        current = self._rule
        key = current[0]
        if (key is not None and key[0] is rule and key[1] is observe
                and key[2] == dedicated):
            return current[1]
        with self._lock:
            seq = self._rule[1] + 1
            self._rule = ((rule, observe, dedicated), seq)
            self._pending.append(("rule", seq, (rule, observe, dedicated), wall))
            return seq

    def current_rule(self) -> RuleKey | None:
        return self._rule[0]

    @property
    def current(self) -> tuple[int, int]:
        """(view seq, rule seq) last handed out."""
        return self._view[1], self._rule[1]

    def take(self) -> list[Pending]:
        """What was numbered since the last call, in order (the writer thread)."""
        with self._lock:
            pending, self._pending = self._pending, []
        return pending


class SnapshotDiffer:
    """Snapshot rows for each numbered view and rule (the writer thread's)."""

    def __init__(self, instance: str, run: int) -> None:
        self._base = {"instance": instance, "run": run}
        self._topics: Mapping[str, TopicState] = {}
        self._brokers: tuple[object, ...] | None = None
        self._view: tuple[int, ClusterView, float] | None = None
        self._rule: tuple[int, RuleKey, float] | None = None

    def rows(self, pending: list[Pending], full: bool) -> list[Row]:
        """The rows of ``pending``; with ``full``, every topic, the brokers and the rule of
        the latest view and rule as well (a file that opens)."""
        out: list[Row] = []
        if full:
            self._topics = {}
            self._brokers = None
            if self._view is not None and not any(p[0] == "view" for p in pending):
                self._diff(*self._view, out)
            if self._rule is not None and not any(p[0] == "rule" for p in pending):
                out.append(self._rule_row(*self._rule))
        for kind, seq, value, wall in pending:
            if kind == "view":
                self._view = (seq, value, wall)
                self._diff(seq, value, wall, out)
            else:
                self._rule = (seq, value, wall)
                out.append(self._rule_row(seq, value, wall))
        return out

    def _diff(self, seq: int, view: ClusterView, wall: float, out: list[Row]) -> None:
        head = {**self._base, "seq": seq, "ts": wall}
        brokers = (tuple(sorted(view.racks.items(), key=lambda kv: kv[0])),
                   tuple(sorted(view.brokers)))
        if brokers != self._brokers:
            self._brokers = brokers
            nodes = [n for n, _ in brokers[0]]
            out.append({**head, "kind": BROKERS, "nodes": nodes,
                        "racks": [r or "" for _, r in brokers[0]],
                        "live": [n in view.brokers for n in nodes]})
        old = self._topics
        for name, topic in view.topics.items():
            before = old.get(name)
            if before is topic or (
                    before is not None and before.partitions.rows == topic.partitions.rows
                    and before.min_insync_replicas == topic.min_insync_replicas):
                continue
            rows = topic.partitions.rows
            indexes = sorted(rows)
            out.append({**head, "kind": TOPIC, "topic": name,
                        "min_isr": topic.min_insync_replicas, "partitions": indexes,
                        "leaders": [rows[i][2] for i in indexes],
                        "replicas": [list(rows[i][4]) for i in indexes],
                        "isr": [list(rows[i][5]) for i in indexes]})
        for name in old:
            if name not in view.topics:
                out.append({**head, "kind": GONE, "topic": name})
        self._topics = view.topics

    def _rule_row(self, seq: int, key: RuleKey, wall: float) -> Row:
        rule, observe, dedicated = key
        topics = dict(rule.topic_min_racks or {})
        return {**self._base, "kind": RULE, "seq": seq, "ts": wall,
                "default_min_racks": rule.default_min_racks,
                "rule_topics": list(topics), "rule_topic_racks": list(topics.values()),
                "rule_prefixes": [p for p, _ in rule.prefix_min_racks],
                "rule_prefix_racks": [v for _, v in rule.prefix_min_racks],
                "observe": observe, "dedicated_code": dedicated}
