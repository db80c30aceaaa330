"""A view fetched after a given moment: the lookups that suspect partitions and stale
views wait for (docs/enforcement.md, "The honest limit").

``after(t)`` resolves True once a Metadata poll that *began* at or after ``t`` is in the
view store, False when that poll failed or took longer than ``wait_s``. The poll itself
is the poller's (``refresh``: :meth:`MetadataPoller.refresh_now`, a poll that starts after
the call, shared by every caller of the same round); this module only decides whether one
is needed and shares it: every caller asking for a moment no later than the start of the
lookup in flight waits for that one, so a burst of suspect answers costs one round trip.

``confirm(t, unchanged)`` is ``after(t)`` followed by up to two more lookups, a short
delay apart (:data:`RELOOK_DELAYS_S`), while ``unchanged()`` says the fresh view still
shows what the suspicion began on: a broker answers Metadata from its metadata cache,
which replays the controller's ISR change a few milliseconds after the leader acted on
it, so the first look may come too early.

Invariants: the clock and the sleep are injected (tests use a fake clock); one lookup in
flight at a time; a failed lookup is never taken for a fresh view.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("rackguard.enforcement")

RELOOK_DELAYS_S = (0.025, 0.1)
"""The delays before the second and third look (at most ~0.13 s, plus two round trips)."""


class FreshView:
    def __init__(
        self,
        refresh: Callable[[], Awaitable[bool]],
        clock: Callable[[], float],
        wait_s: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        relooks: tuple[float, ...] = RELOOK_DELAYS_S,
    ) -> None:
        self._refresh = refresh
        self._clock = clock
        self._wait_s = wait_s
        self._sleep = sleep
        self._relooks = relooks
        self._good_since = float("-inf")  # start of the latest lookup that succeeded
        self._inflight: tuple[float, asyncio.Future[bool]] | None = None
        self.lookups = 0  # lookups started, ever (tests and metrics read it)

    def since(self, t: float) -> bool:
        """True when a lookup that began at or after ``t`` has put its view in the store."""
        return self._good_since >= t

    async def after(self, t: float) -> bool:
        """Wait for a view from a lookup begun at or after ``t``; False if it failed or
        took longer than ``wait_s`` (the view is then older than ``t``)."""
        if self._good_since >= t:
            return True
        inflight = self._inflight
        if inflight is None or inflight[0] < t or inflight[1].done():
            began = self._clock()
            future = asyncio.ensure_future(self._lookup(began))
            inflight = self._inflight = (began, future)
        try:
            async with asyncio.timeout(self._wait_s):
                return await asyncio.shield(inflight[1])
        except TimeoutError:
            log.info("metadata lookup took longer than %.1fs", self._wait_s)
            return False

    async def confirm(self, t: float, unchanged: Callable[[], bool]) -> bool:
        """``after(t)``, then looked at again (at most twice) while ``unchanged()``: True
        when a view from after ``t`` is in the store."""
        if not await self.after(t):
            return False
        for delay in self._relooks:
            if not unchanged():
                break
            await self._sleep(delay)
            if not await self.after(self._clock()):
                break  # the first fresh view stands
        return True

    async def _lookup(self, began: float) -> bool:
        self.lookups += 1
        try:
            ok = await self._refresh()
        except Exception as exc:  # noqa: BLE001 - a lookup that cannot be made failed
            log.info("metadata lookup failed: %s", exc)
            ok = False
        if ok and began > self._good_since:
            self._good_since = began
        return ok
