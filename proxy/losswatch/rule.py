"""The rule that turns two readings of a partition's leader into a loss, or into nothing.

A *reading* is what the partition's current leader answered the proxy's own requests:
OffsetForLeaderEpoch for the epoch before its current one (whose end offset is where
the leader's current epoch starts: its log end when it was elected, an offset that never
moves while that epoch lasts) and ListOffsets latest (its high watermark), both sent
with the leader epoch the view shows as the current one (a broker that is not, or not
yet, the leader in that epoch answers an error).

The rule, which never reports what a retry or a slow replica could explain:
1. both readings answered without error (OffsetForLeaderEpoch's: the high watermark is
   kept for the record only), by the same broker, in the same leader epoch,
   at least ``confirm_delay`` apart (the leadership was stable across them: a leader
   that was deposed again, or re-elected with its old log, shows another epoch);
2. both give the same epoch start offset S (a leader never copies records from another
   broker, so what lies at or above S in its log was written in its own epoch; it is
   not "still catching up": the records it lacks will never arrive, and followers
   truncate theirs to S);
3. then every offset an *earlier* leader acknowledged at or above S is lost:
   ``[max(S, lo), hi]`` for each earlier segment and acks level with ``hi >= S``.
   Acknowledgements of the current leader are never judged (they are in its log).
A broker too old for OffsetForLeaderEpoch v2 (current leader epoch) gives no epoch start:
then nothing is reported (the high watermark alone cannot tell a new leader's lagging
watermark from a loss).

Invariant: pure; ``None`` means inconclusive (read again), ``[]`` means no loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from proxy.losswatch.state import ACKS_ALL, ACKS_ONE, Segment


@dataclass(frozen=True, slots=True)
class Reading:
    leader: int
    epoch: int  # the current leader epoch the requests named (the view's)
    error: int  # 0: both requests answered without error for this partition
    high_watermark: int
    epoch_start: int | None  # None: unsupported by the broker, or undefined
    at: float  # clock reading when the answer arrived


@dataclass(frozen=True, slots=True)
class LostRange:
    level: int  # ACKS_ALL or ACKS_ONE
    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


def stable(first: Reading, second: Reading, delay_s: float) -> int | None:
    """The epoch start both readings agree on under conditions 1 and 2, else None."""
    if first.error or second.error:
        return None
    if (first.leader, first.epoch) != (second.leader, second.epoch):
        return None
    if second.at - first.at < delay_s:
        return None
    if first.epoch_start is None or first.epoch_start != second.epoch_start:
        return None
    return first.epoch_start


def lost_ranges(epoch_start: int, earlier: Sequence[Segment]) -> list[LostRange]:
    """Condition 3: per acks level, the acknowledged offsets at or above the epoch start
    (ranges of several segments of one level joined where they overlap or touch)."""
    out: list[LostRange] = []
    for level in (ACKS_ALL, ACKS_ONE):
        spans = sorted((max(lo, epoch_start), hi) for lo, hi in
                       (s.range(level) for s in earlier) if hi >= epoch_start and hi >= 0)
        joined: list[list[int]] = []
        for lo, hi in spans:
            if joined and lo <= joined[-1][1] + 1:
                joined[-1][1] = max(joined[-1][1], hi)
            else:
                joined.append([lo, hi])
        out.extend(LostRange(level, lo, hi) for lo, hi in joined)
    return out
