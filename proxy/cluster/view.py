"""The proxy's view of the cluster: brokers and racks, partitions and ISRs, topic configs.

Invariant: a :class:`ClusterView` is immutable; :class:`ClusterViewStore` is
the only writer and replaces the view whole on every update, so a decision
made on one snapshot never sees a half-applied update. It does no I/O (the
poller and the Metadata responses that pass through feed it). Updates copy
the topic map, never the partitions of topics they do not touch, so a
passing Metadata response for one topic costs little even in a large cluster.
A full refresh keeps the very same :class:`TopicState` of every topic that did
not change (its age is the view's: ``refreshed_at``), a partial one the same
partitions object. The rack of a broker that leaves the broker list is
remembered: an ISR can still name it for a while.

What the cyclic garbage collector sees (no GC settings are touched anywhere):
a topic's partitions are held as the Metadata response's own plain tuples of
ints and int tuples, one per partition (:data:`PartitionRow`), not one object
each: CPython's collector stops tracking such a tuple the first time a (young,
cheap) collection sees it, and the dict of them the first time a full one does
(an instance of a class, frozen dataclass or named tuple, stays tracked for
life: at 100,000 partitions the collections its allocations trigger stall every
thread for tens of ms). What stays tracked is two objects per topic (its
:class:`TopicState` and :class:`Partitions`), and a refresh makes new ones only
for the topics that changed: in the steady state a refresh leaves O(1) new
long-lived objects, so it does not bring the next full collection (which scans
the whole process and stalls every thread) forward. Hot readers (the policy,
the rack metrics) read the rows (``topic.partitions.rows``); everyone else
reads :class:`PartitionState` values, built on access.

Building and installing are separate so that a large update can be built on a
worker thread: :meth:`ClusterViewStore.build` and
:meth:`ClusterViewStore.with_min_insync_replicas` are pure (they read only the
immutable view they are given, by default the current one) and take an optional
``pause`` callable, called between chunks of work (a worker thread uses it to
let the event loop run; the view built is the same with or without it).
Installing is an O(1) swap on the loop; :meth:`ClusterViewStore.install_over`
installs only if the view built on is still the current one, so an update
built on a stale base can never overwrite a newer view. A poll whose answer is
byte for byte the last one's is installed with :meth:`ClusterViewStore.confirm`:
the same maps under a new ``refreshed_at``, nothing built per topic.

What the view covers is the poller's scope: with a watched set
(:mod:`proxy.cluster.watch`) the topics the proxy's clients use, else the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import cast

from protocol.metadata import MetadataSnapshot, TopicRow
from protocol.metadata import PartitionRow as MetadataRow

log = logging.getLogger("rackguard.cluster")

NO_RACK = ""  # every rackless broker counts as this one rack (docs/enforcement.md, "The rule")
_CHUNK = 1024  # partitions built between two calls of ``pause``
_TOPIC_CHUNK = 256  # topics updated between two calls of ``pause``


@dataclass(frozen=True, slots=True)
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


PartitionRow = MetadataRow
"""A partition as the view holds it: the Metadata response's plain tuple (index, error
code, then the fields of :class:`PartitionState` in its order: leader, leader_epoch,
replicas, isr, offline)."""


@dataclass(frozen=True, slots=True, eq=False)
class Partitions(Mapping[int, PartitionState]):
    """A topic's partitions by index, read-only: :class:`PartitionState` values built
    on access from ``rows`` (index -> :data:`PartitionRow`), which hot loops (the
    policy, the rack metrics) read instead.

    ``rows`` is a plain dict typed read-only, not wrapped in a MappingProxyType: a proxy
    would be one more object per topic for every full collection to scan, while the
    dict itself is untracked by the first full collection (its values are rows).
    ``source`` is the response's tuple of the same rows, in its order: the next refresh
    compares its own with it (in C, without building anything) to find the topic unchanged.
    """

    rows: Mapping[int, PartitionRow]
    source: tuple[PartitionRow, ...] = ()

    def __getitem__(self, index: int) -> PartitionState:
        return PartitionState(*self.rows[index][2:])

    def __contains__(self, index: object) -> bool:
        return index in self.rows

    def __iter__(self) -> Iterator[int]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True, slots=True)
class TopicState:
    name: str
    topic_id: bytes | None
    partitions: Partitions
    updated_at: float
    min_insync_replicas: int | None = None  # None until DescribeConfigs answered


@dataclass(frozen=True, slots=True)
class ClusterView:
    brokers: Mapping[int, Broker] = field(default_factory=lambda: MappingProxyType({}))
    racks: Mapping[int, str | None] = field(default_factory=lambda: MappingProxyType({}))
    topics: Mapping[str, TopicState] = field(default_factory=lambda: MappingProxyType({}))
    topic_ids: Mapping[bytes, str] = field(default_factory=lambda: MappingProxyType({}))
    refreshed_at: float | None = None  # monotonic time of the last full refresh
    cluster_id: str | None = None
    # Memo of isr_racks per ISR; the view is immutable, so an answer never goes stale.
    # Kept because it shows end to end: without it a partition's decision took 0.75
    # instead of 0.33 us, the observe-mode Produce hook for 10 partitions 16.6 instead of
    # 12.2 us, and the 1-partition request+response round trip 8.25 instead of 7.66 us
    # (benchmarks/micro.py's pieces, min-of-25 timings, median of 3 runs, 2026-11-25).
    _rack_memo: dict[tuple[int, ...], tuple[str, ...]] = field(
        default_factory=dict, init=False, compare=False, repr=False)

    def topic(self, key: str | bytes) -> TopicState | None:
        name = self.topic_ids.get(key) if isinstance(key, bytes) else key
        return self.topics.get(name) if name is not None else None

    def partition(self, key: str | bytes, index: int) -> PartitionRow | None:
        """A partition's row (topic by name or id); None when the view lacks it."""
        topic = self.topic(key)
        return topic.partitions.rows.get(index) if topic is not None else None

    def rack_of(self, node_id: int) -> str:
        rack = self.racks.get(node_id)
        return NO_RACK if rack is None else rack

    def isr_racks(self, isr: tuple[int, ...]) -> tuple[str, ...]:
        """Distinct racks of the ISR, sorted. A rackless broker counts as the rack "";
        a node never seen in any broker list counts as no rack (it proves nothing)."""
        known = self._rack_memo.get(isr)
        if known is not None:
            return known
        seen: set[str] = set()
        for node_id in isr:
            if node_id in self.racks:
                rack = self.racks[node_id]
                seen.add(NO_RACK if rack is None else rack)
        racks = self._rack_memo[isr] = tuple(sorted(seen))
        return racks

    def age(self, now: float, topic: TopicState | None = None) -> float:
        """Seconds since this topic (or the whole view) was last confirmed."""
        times = [t for t in (self.refreshed_at, topic.updated_at if topic else None)
                 if t is not None]
        return now - max(times) if times else float("inf")

    def rack_names(self) -> set[str]:
        return {self.rack_of(n) for n in self.brokers}

    def rackless_brokers(self) -> list[int]:
        return sorted(n for n, b in self.brokers.items() if b.rack is None)

    @property
    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics.values())


class ClusterViewStore:
    """Holds the current view and builds each next one."""

    def __init__(
        self,
        clock: Callable[[], float],
        operator_racks: Mapping[int, str] | None = None,
        operator_racks_override: bool = False,
    ) -> None:
        self._clock = clock
        self._operator_racks = dict(operator_racks or {})
        self._override = operator_racks_override
        self._view = ClusterView()
        self._listeners: list[Callable[[ClusterView, ClusterView], None]] = []

    @property
    def view(self) -> ClusterView:
        return self._view

    def subscribe(self, listener: Callable[[ClusterView, ClusterView], None]) -> None:
        """Call ``listener(old, new)`` after every update."""
        self._listeners.append(listener)

    def _rack(self, node_id: int, reported: str | None) -> str | None:
        supplied = self._operator_racks.get(node_id)
        if supplied is not None and (reported is None or self._override):
            return supplied
        return reported

    def apply_metadata(self, snapshot: MetadataSnapshot, full: bool) -> ClusterView:
        """Merge a Metadata response. ``full``: it listed every topic (the poller's)."""
        new = self.build(snapshot, full)
        self.install(new)
        return new

    def install(self, new: ClusterView) -> ClusterView:
        """Make ``new`` (from :meth:`build`) the current view; return the one it replaced."""
        old = self._view
        self._swap(old, new)
        return old

    def install_over(self, base: ClusterView, new: ClusterView) -> bool:
        """Make ``new`` the current view if ``base``, the view it was built on, still is.

        False (and nothing changes) if another update was installed meanwhile: ``new``
        lacks it and must be built again on the current view.
        """
        if self._view is not base:
            return False
        self._swap(base, new)
        return True

    def build(self, snapshot: MetadataSnapshot, full: bool,
              pause: Callable[[], object] | None = None,
              base: ClusterView | None = None) -> ClusterView:
        """The view after merging ``snapshot`` into ``base`` (default: the current view).

        Not installed. Pure with respect to the store (reads only the immutable
        ``base``), so a large one can be built on a worker thread while the event loop
        keeps serving; ``pause``, if given, is called between topics and every 1,024
        partitions.
        """
        builder = self.builder(full, pause, base)
        for topic in snapshot.topics:
            builder.add(topic)
        return builder.finish(snapshot)

    def builder(self, full: bool, pause: Callable[[], object] | None = None,
                base: ClusterView | None = None) -> ViewBuilder:
        """What :meth:`build` does, a topic at a time: ``add`` each topic as it is read
        (``read_metadata``'s ``on_topic``), then ``finish`` with the snapshot's brokers."""
        return ViewBuilder(self._rack, self._clock(), self._view if base is None else base,
                           full, pause)

    def confirm(self) -> ClusterView:
        """Install the current view confirmed now (a poll's answer equal to the last one):
        ``refreshed_at`` is now, and every map, and the rack memo, is the old view's."""
        old = self._view
        new = ClusterView(old.brokers, old.racks, old.topics, old.topic_ids, self._clock(),
                          old.cluster_id)
        object.__setattr__(new, "_rack_memo", old._rack_memo)  # same racks, same answers
        self._swap(old, new)
        return new

    def apply_min_insync_replicas(self, values: Mapping[str, int]) -> ClusterView:
        """Set topics' min.insync.replicas and install the result (always a new view)."""
        old = self._view
        new = self.with_min_insync_replicas(values, base=old)
        if new is old:
            new = replace(old)
        self._swap(old, new)
        return new

    def with_min_insync_replicas(self, values: Mapping[str, int],
                                 pause: Callable[[], object] | None = None,
                                 base: ClusterView | None = None) -> ClusterView:
        """``base`` (default: the current view) with these topics' min.insync.replicas.

        Not installed, and pure like :meth:`build`. Returns ``base`` itself when no
        value changes (names it does not hold are ignored). ``pause``, if given, is
        called every 256 topics.
        """
        old = self._view if base is None else base
        current = old.topics
        changed: dict[str, TopicState] = {}
        for i, (name, value) in enumerate(values.items()):
            topic = current.get(name)
            if topic is not None and topic.min_insync_replicas != value:
                # Not dataclasses.replace: twice as fast (20,000 topics: ~30 ms with it).
                changed[name] = TopicState(topic.name, topic.topic_id, topic.partitions,
                                           topic.updated_at, value)
            if pause is not None and i % _TOPIC_CHUNK == _TOPIC_CHUNK - 1:
                pause()
        if not changed:
            return old
        topics = dict(current)
        topics.update(changed)
        return replace(old, topics=MappingProxyType(topics))

    def _swap(self, old: ClusterView, new: ClusterView) -> None:
        self._view = new
        for listener in self._listeners:
            listener(old, new)


class ViewBuilder:
    """The next view, merged a topic at a time into an immutable base (see
    :meth:`ClusterViewStore.builder`). Pure: touches nothing but its own new maps."""

    def __init__(self, rack: Callable[[int, str | None], str | None], now: float,
                 base: ClusterView, full: bool, pause: Callable[[], object] | None) -> None:
        self._rack = rack
        self._now = now
        self._old = base
        self._full = full
        self._pause = pause
        self._topics: dict[str, TopicState] = {} if full else dict(base.topics)
        self._topic_ids: dict[bytes, str] = {} if full else dict(base.topic_ids)

    def add(self, topic: TopicRow) -> None:
        """Merge one topic of the response."""
        name, raw_id, error_code, _internal, parts = topic
        topics = self._topics
        full = self._full
        pause = self._pause
        if name is None or error_code != 0:
            if full is False and name is not None and error_code == 3:
                topics.pop(name, None)  # UNKNOWN_TOPIC_OR_PARTITION: it is gone
            return
        topic_id = raw_id if raw_id and any(raw_id) else None
        if topic_id is not None:
            self._topic_ids[topic_id] = name
        previous = self._old.topics.get(name)
        if previous is not None and _same(parts, previous.partitions.source, pause):
            # Unchanged, as most topics are at most refreshes. A full refresh keeps the
            # topic's very object (its age is the view's refreshed_at, now), so it leaves
            # no new long-lived object for the cyclic GC to promote and scan; a partial
            # one confirms the topic now, sharing its partitions.
            if full and previous.topic_id == topic_id:
                topics[name] = previous
                return
            partitions = previous.partitions
        else:
            partitions = _partitions(parts, pause)
        topics[name] = TopicState(
            name,
            topic_id,
            partitions,
            self._now,
            previous.min_insync_replicas if previous else None,
        )
        if pause is not None:
            pause()

    def finish(self, snapshot: MetadataSnapshot) -> ClusterView:
        """The view, with the brokers and cluster id of ``snapshot`` (its topics, if it
        has any, must have been added)."""
        old = self._old
        brokers = {
            b.node_id: Broker(b.node_id, b.host, b.port, self._rack(b.node_id, b.rack))
            for b in snapshot.brokers
        }
        racks = dict(old.racks)
        for node_id, broker in brokers.items():
            racks[node_id] = broker.rack
        return ClusterView(
            brokers=MappingProxyType(brokers),
            racks=MappingProxyType(racks),
            topics=MappingProxyType(self._topics),
            topic_ids=MappingProxyType(self._topic_ids),
            refreshed_at=self._now if self._full else old.refreshed_at,
            cluster_id=snapshot.cluster_id or old.cluster_id,
        )


def _partitions(parts: Sequence[MetadataRow], pause: Callable[[], object] | None
                ) -> Partitions:
    """The response's rows by index. Each row must be a plain tuple for the collector to
    stop tracking it: rows of another type (named tuples a test wrote) are copied."""
    if parts and type(parts[0]) is not tuple:
        parts = tuple(cast(PartitionRow, tuple(p)) for p in parts)
    source = parts if type(parts) is tuple else tuple(parts)
    if pause is None or len(source) <= _CHUNK:
        return Partitions({p[0]: p for p in source}, source)
    rows: dict[int, PartitionRow] = {}
    for start in range(0, len(source), _CHUNK):
        rows.update({p[0]: p for p in source[start:start + _CHUNK]})
        pause()
    return Partitions(rows, source)


def _same(parts: Sequence[MetadataRow], source: tuple[PartitionRow, ...],
          pause: Callable[[], object] | None) -> bool:
    """``parts`` equal to ``source``, compared in C a chunk at a time (with ``pause``)."""
    if len(parts) != len(source):
        return False
    if pause is None or len(parts) <= _CHUNK:
        return tuple(parts) == source
    for start in range(0, len(parts), _CHUNK):
        if tuple(parts[start:start + _CHUNK]) != source[start:start + _CHUNK]:
            return False
        pause()
    return True
