"""What the proxy acknowledged, per partition: the state of the loss watch (pure, no I/O).

For every partition an acknowledged Produce answer named (error 0, acks 1 or all), the
state keeps *segments*: a run of acknowledgements given by one broker (the leader that
answered), with the lowest and highest acknowledged offset and the record count, split by
acks level (all, 1), and the leader epoch the view showed when the run began. A new run
starts when another broker answers, or after the view showed the leadership move away
from the run's broker (:meth:`AckState.close`). Earlier runs (``closed``, or from a broker
that is no longer the leader) are what a new leader may have lost; the run of the
current leader is not (its acknowledgements are in its own log).

Memory: one :class:`PartitionAcks` and one :class:`Segment` per written partition, a
second segment only between a leadership change and its check, at most
``MAX_SEGMENTS``; measured in benchmarks/losswatch_cost.py (stated in docs/losswatch.md).
An entry not written for ``idle_s`` is dropped by :meth:`AckState.expire`, unless its
partition is being checked.

Invariant: offsets only move up within a segment (``hi`` is the highest acknowledged
offset, ``lo`` the lowest); nothing here reads a clock (the caller passes ``now``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

# a topic as Produce names it: the name (v3-v12) or the 16-byte topic id (v13)
TopicKey = str | bytes
PartitionKey = tuple[TopicKey, int]

ACKS_ALL = 0  # index into a segment's per-level fields
ACKS_ONE = 1
ACKS_LABELS = ("all", "1")
MAX_SEGMENTS = 4  # beyond: the two oldest are merged (their range covers both)
MAX_CLIENTS = 8  # client ids remembered per partition


class Segment:
    """Acknowledgements given by one broker in one run: per acks level, the lowest and
    highest offset (-1: none) and how many records."""

    __slots__ = ("node", "epoch", "closed", "lo_all", "hi_all", "n_all", "lo_one", "hi_one",
                 "n_one")

    def __init__(self, node: int, epoch: int) -> None:
        self.node = node
        self.epoch = epoch  # the leader epoch the view showed when the run began
        self.closed = False  # the view showed leadership leave ``node`` after it
        self.lo_all = self.hi_all = -1
        self.n_all = 0
        self.lo_one = self.hi_one = -1
        self.n_one = 0

    def range(self, level: int) -> tuple[int, int]:
        """(lo, hi) of one acks level; (-1, -1) when nothing was acknowledged at it."""
        return (self.lo_all, self.hi_all) if level == ACKS_ALL else (self.lo_one, self.hi_one)

    def trim_below(self, start: int) -> None:
        """Forget acknowledged offsets from ``start`` on (they were reported lost)."""
        if self.hi_all >= start:
            self.hi_all = start - 1
            if self.lo_all > self.hi_all:
                self.lo_all = self.hi_all = -1
        if self.hi_one >= start:
            self.hi_one = start - 1
            if self.lo_one > self.hi_one:
                self.lo_one = self.hi_one = -1

    @property
    def empty(self) -> bool:
        return self.hi_all < 0 and self.hi_one < 0

    def absorb(self, other: Segment) -> None:
        """Take ``other``'s ranges in (the union's span; used only to bound memory)."""
        for lo, hi, n, level in ((other.lo_all, other.hi_all, other.n_all, ACKS_ALL),
                                 (other.lo_one, other.hi_one, other.n_one, ACKS_ONE)):
            if hi < 0:
                continue
            if level == ACKS_ALL:
                self.lo_all = lo if self.lo_all < 0 else min(self.lo_all, lo)
                self.hi_all = max(self.hi_all, hi)
                self.n_all += n
            else:
                self.lo_one = lo if self.lo_one < 0 else min(self.lo_one, lo)
                self.hi_one = max(self.hi_one, hi)
                self.n_one += n
        self.epoch = min(self.epoch, other.epoch)
        self.closed = self.closed or other.closed


class PartitionAcks:
    """One written partition: its segments (oldest first; the last is the current run),
    the client ids that wrote it, and when it was last acknowledged."""

    __slots__ = ("segments", "clients", "seen")

    def __init__(self, seen: float) -> None:
        self.segments: list[Segment] = []
        self.clients: tuple[str, ...] = ()
        self.seen = seen

    def earlier(self, leader: int) -> list[Segment]:
        """The segments a leader ``leader`` may have lost: every closed one, and every one
        acknowledged by another broker."""
        return [s for s in self.segments if (s.closed or s.node != leader) and not s.empty]


class AckState:
    """Every written partition's :class:`PartitionAcks`, by topic key, then partition."""

    __slots__ = ("topics", "idle_s", "epoch_of")

    def __init__(self, idle_s: float,
                 epoch_of: Callable[[TopicKey, int], int] = lambda topic, index: -1) -> None:
        self.topics: dict[TopicKey, dict[int, PartitionAcks]] = {}
        self.idle_s = idle_s
        self.epoch_of = epoch_of  # the view's leader epoch, read when a segment starts

    def __len__(self) -> int:
        return sum(len(p) for p in self.topics.values())

    def get(self, key: PartitionKey) -> PartitionAcks | None:
        parts = self.topics.get(key[0])
        return parts.get(key[1]) if parts is not None else None

    def __iter__(self) -> Iterator[tuple[PartitionKey, PartitionAcks]]:
        for topic, parts in self.topics.items():
            for index, entry in parts.items():
                yield (topic, index), entry

    def acknowledged(self, topic: TopicKey, index: int, node: int, level: int, base: int,
                     count: int, client: str | None, now: float) -> None:
        """Broker ``node`` acknowledged ``count`` records at ``base`` .. ``base + count - 1``
        for ``client`` (its client id) at acks level ``level``."""
        parts = self.topics.get(topic)
        if parts is None:
            parts = self.topics[topic] = {}
        entry = parts.get(index)
        if entry is None:
            entry = parts[index] = PartitionAcks(now)
        entry.seen = now
        segments = entry.segments
        seg = segments[-1] if segments else None
        if seg is None or seg.node != node or seg.closed:
            seg = Segment(node, self.epoch_of(topic, index))
            segments.append(seg)
            if len(segments) > MAX_SEGMENTS:
                segments[1].absorb(segments[0])
                del segments[0]
        last = base + count - 1
        if level == ACKS_ALL:
            if seg.lo_all < 0 or base < seg.lo_all:
                seg.lo_all = base
            if last > seg.hi_all:
                seg.hi_all = last
            seg.n_all += count
        else:
            if seg.lo_one < 0 or base < seg.lo_one:
                seg.lo_one = base
            if last > seg.hi_one:
                seg.hi_one = last
            seg.n_one += count
        if client is not None and client not in entry.clients and \
                len(entry.clients) < MAX_CLIENTS:
            entry.clients = (*entry.clients, client)

    def close(self, key: PartitionKey, new_leader: int) -> None:
        """The view showed leadership move to ``new_leader`` (-1: none): the current run
        ends unless that broker gave it (its answers may come before the view shows it)."""
        entry = self.get(key)
        if entry is None or not entry.segments:
            return
        last = entry.segments[-1]
        if last.node != new_leader:
            last.closed = True

    def checked(self, key: PartitionKey, leader: int, epoch_start: int) -> None:
        """A check found the leader's log to start its epoch at ``epoch_start``: earlier
        segments keep only what lies below it (what lay above was reported lost), merged
        into one closed segment (it is all in the leader's log now)."""
        entry = self.get(key)
        if entry is None:
            return
        keep: list[Segment] = []
        merged: Segment | None = None
        for seg in entry.segments:
            if not (seg.closed or seg.node != leader):
                keep.append(seg)
                continue
            seg.trim_below(epoch_start)
            if seg.empty:
                continue
            if merged is None:
                merged = seg
                seg.closed = True
                keep.append(seg)
            else:
                merged.absorb(seg)
        entry.segments = keep

    def expire(self, now: float, keep: set[PartitionKey]) -> list[PartitionKey]:
        """Drop entries not acknowledged for ``idle_s`` (except those in ``keep``)."""
        cutoff = now - self.idle_s
        gone = [k for k, e in self if e.seen < cutoff and k not in keep]
        for topic, index in gone:
            parts = self.topics[topic]
            del parts[index]
            if not parts:
                del self.topics[topic]
        return gone
