"""Following one partition: its records fetched from its leader, one Fetch at a time, on a
connection of the proxy's own (the config topic's reader).

Each Fetch waits up to ``wait_s`` at the leader for a record (a long poll: an idle
sidecar asks twice a second, the broker answers at once when a change is written); the
first one does not wait (an empty topic is read to its end with the first answer, and
start-up waits for that). The
leader is the one the proxy's cluster view names (``leader``): the poller keeps the view
within its bound through a hung rack, hedging across racks, so the follower needs no
Metadata of its own. An attempt (a connection when none is open, then the Fetch) that has
not ended ``attempt_s`` after it began failed: a leader that answers no faster than its
own wait plus the poller's hedge delay is treated as hung. After any failure (a broker
that cannot be reached or does not answer in time, a partition error naming another
leader) the connection is closed, the poller is asked for a fresh view (``refresh``, one
Metadata round trip), and the leader it names is asked at once; the same leader again is
asked after a back-off (doubled per failure, up to ``max_backoff_s``), which ends as soon
as the view (refreshed by the poller meanwhile) names another leader.

Invariants: records reach ``on_record`` in offset order, each once (the offset to read is
kept across connections and leaders); ``on_caught_up`` is called once, when the offset
reaches the high watermark of an answer for the first time; ``on_silence`` gets the
failure text once the leader has not answered for ``silence_s`` and None when an answer
comes again (the store counts and logs it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from proxy.admin.topic_fetch import (
    FETCH,
    FETCH_MAX,
    FETCH_MIN,
    NOT_LEADER,
    OFFSET_OUT_OF_RANGE,
    Fetched,
    Record,
    fetch_request,
    read_fetch,
)
from proxy.cluster.control_conn import ControlConn
from proxy.cluster.poller import ATTEMPT_ERRORS

log = logging.getLogger("rackguard.admin.store")

LEADER_CHECK_S = 0.25  # during a back-off: how often the view's leader is looked at

# what one attempt can fail with: what a poller attempt can (connecting, logging in, a
# broker that does not answer), or a broker without a Fetch version we read
_ATTEMPT_ERRORS = (*ATTEMPT_ERRORS, LookupError)


@dataclass(frozen=True, slots=True)
class FollowSettings:
    topic: str
    partition: int
    wait_s: float  # how long the leader holds a Fetch that finds nothing new
    attempt_s: float  # connect + Fetch, beyond which the leader is treated as hung
    backoff_s: float  # before the same leader is asked again after a failure
    max_backoff_s: float
    silence_s: float  # no answer for this long is reported (``on_silence``)


class PartitionFollower:
    def __init__(
        self,
        settings: FollowSettings,
        leader: Callable[[], int | None],
        connect: Callable[[int], Awaitable[ControlConn]],
        refresh: Callable[[], Awaitable[object]],
        clock: Callable[[], float],
        on_record: Callable[[Record], None],
        on_caught_up: Callable[[], None],
        on_silence: Callable[[str | None], None],
    ) -> None:
        self.settings = settings
        self._leader = leader
        self._connect = connect
        self._refresh = refresh
        self._clock = clock
        self._on_record = on_record
        self._on_caught_up = on_caught_up
        self._on_silence = on_silence
        self.offset = 0  # the next offset to read
        self.caught_up = False
        self.fetches = 0  # answers read (a figure for tests and benchmarks)
        self._conn: ControlConn | None = None
        self._node = -1  # the broker ``_conn`` is open to
        self._answered = clock()  # when the leader last answered
        self._silent = False

    async def run(self) -> None:
        """Follow until cancelled (the connection is closed then)."""
        backoff = self.settings.backoff_s
        try:
            while True:
                node = self._leader()
                failure = "no leader in the cluster view" if node is None else None
                if node is not None:
                    failure = await self._attempt(node)
                if failure is None:
                    backoff = self.settings.backoff_s
                    continue
                self._failed(failure)
                if await self._moved(node):
                    continue  # another leader: asked at once
                await self._back_off(backoff, node)
                backoff = min(backoff * 2, self.settings.max_backoff_s)
        finally:
            self._close()

    async def _attempt(self, node: int) -> str | None:
        """One Fetch from ``node``; None when it was answered without a leader error."""
        s = self.settings
        try:
            async with asyncio.timeout(s.attempt_s):
                conn = await self._conn_to(node)
                lo, hi = conn.versions.get(FETCH, (0, -1))
                version = min(hi, FETCH_MAX)
                if version < max(lo, FETCH_MIN):
                    raise LookupError(f"broker {node} has no Fetch v{FETCH_MIN}-v{FETCH_MAX}")
                # the first is barely held (1 ms): it reads an empty topic to its end at
                # once (start-up waits for that); later ones find records at once if any.
                # Not 0: a broker may answer an unheld Fetch of an empty partition without
                # the partition (Tansu does), so without its high watermark
                wait_ms = int(s.wait_s * 1000) if self.fetches else 1
                frame = await conn.call(
                    fetch_request(s.topic, s.partition, self.offset, wait_ms, version),
                    s.attempt_s)
            fetched = read_fetch(frame, version, s.topic, s.partition, self.offset)
        except TimeoutError:
            self._close()
            return f"broker {node} did not answer a Fetch within {s.attempt_s:.1f} s"
        except _ATTEMPT_ERRORS as exc:
            self._close()
            return f"broker {node}: {exc or type(exc).__name__}"
        return self._take(node, fetched)

    def _take(self, node: int, fetched: Fetched) -> str | None:
        if fetched.error in NOT_LEADER:
            self._close()
            return f"broker {node} answered error {fetched.error} (not the leader)"
        if fetched.error == OFFSET_OUT_OF_RANGE:
            # below the log start (deleted records): from the start; past the end (a
            # log truncated by an unclean election): from the end, as a new consumer would
            restart = fetched.log_start if 0 <= self.offset < fetched.log_start else \
                max(fetched.high_watermark, 0)
            log.warning("config topic %s: offset %d is out of range at broker %d; reading "
                        "from %d", self.settings.topic, self.offset, node, restart)
            self.offset = restart
        elif fetched.error != 0:
            self._close()
            return f"broker {node} answered error {fetched.error}"
        self.fetches += 1
        self._answered = self._clock()
        if self._silent:
            self._silent = False
            self._on_silence(None)
        for record in fetched.records:
            self._on_record(record)
        self.offset = max(self.offset, fetched.next_offset)
        if not self.caught_up and fetched.high_watermark >= 0 and \
                self.offset >= fetched.high_watermark:
            self.caught_up = True
            self._on_caught_up()
        return None

    async def _conn_to(self, node: int) -> ControlConn:
        conn = self._conn
        if conn is not None and (node != self._node or conn.expires_at <= self._clock()):
            self._close()  # another leader, or its SASL session is about to end
            conn = None
        if conn is None:
            conn = self._conn = await self._connect(node)
            self._node = node
        return conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            self._node = -1

    def _failed(self, failure: str) -> None:
        log.debug("config topic %s: %s", self.settings.topic, failure)
        if not self._silent and self._clock() - self._answered > self.settings.silence_s:
            self._silent = True
            self._on_silence(failure)

    async def _back_off(self, seconds: float, node: int | None) -> None:
        """Wait ``seconds``, or less: the view is looked at every ``LEADER_CHECK_S``, and
        a leader other than ``node`` in it ends the wait (the poller brings the leader
        elected while this one was down; a back-off grown through the outage must not
        delay reading it)."""
        left = seconds
        while left > 0:
            step = min(left, LEADER_CHECK_S)
            await asyncio.sleep(step)
            left -= step
            now = self._leader()
            if now is not None and now != node:
                return

    async def _moved(self, node: int | None) -> bool:
        """Ask for a fresh view (bounded); True when it names a leader other than
        ``node``."""
        try:
            async with asyncio.timeout(self.settings.attempt_s + self.settings.wait_s):
                await self._refresh()
        except TimeoutError:
            pass
        except Exception as exc:  # noqa: BLE001 - the view stays; the back-off applies
            log.debug("config topic %s: refreshing the view failed: %s",
                      self.settings.topic, exc)
        now = self._leader()
        return now is not None and now != node
