"""Suspect partitions: those whose acks=all answers and decisions wait for a view fetched
after the suspicion began (docs/enforcement.md, "The honest limit").

A partition becomes suspect when an answer the rule let through comes back slow (it
waited on the leader for replicas that stopped fetching: the ISR may have shrunk under
it, and every answer the same shrink released follows it within milliseconds). From that
moment, and until a lookup that began after it (:class:`~.fresh_view.FreshView`) has put a
new view in the store (its *settling*), every answer of the partition and every produce
to it wait; then the rule decides them on that view. A partition the view then shows
short stays *held*: its answers are still decided again, on views from after the
suspicion, until one finds its ISR whole (or ``hold_max_s`` passes without one). When the
fresh view shows the very leader and ISR the suspect request was decided on, the view
is looked at again (twice at most, :data:`~.fresh_view.RELOOK_DELAYS_S`): a broker's
metadata cache may replay the shrink milliseconds after the leader released the answers.

Invariants: marking is synchronous (an answer found slow marks its partitions before the
next answer of the same read is looked at); nothing here decides: the pure policy does,
over the store's view; cost is per suspect partition: with none, :attr:`held` is an empty
dict and a caller tests only its truthiness.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping

from protocol.produce import TopicKey
from proxy.cluster.view import ClusterView, ClusterViewStore
from proxy.enforce.fresh_view import FreshView

Key = tuple[TopicKey, int]
Row = tuple[int, tuple[int, ...]]  # (leader, isr)


def row_of(view: ClusterView, key: Key) -> Row | None:
    """The partition's (leader, ISR) in ``view``; None when the view lacks it."""
    row = view.partition(*key)
    return None if row is None else (row[2], row[5])


def unchanged(view: ClusterView, before: Mapping[Key, Row | None], keys: Iterable[Key]
              ) -> bool:
    """``view`` still shows one of ``keys`` with the (leader, ISR) it had ``before``."""
    return any((row := before.get(key)) is not None and row_of(view, key) == row
               for key in keys)


class SuspectPartitions:
    def __init__(self, fresh: FreshView, store: ClusterViewStore,
                 clock: Callable[[], float], hold_max_s: float = 300.0) -> None:
        self.fresh = fresh
        self._store = store
        self._clock = clock
        self._hold_max_s = hold_max_s
        self.held: dict[Key, float] = {}  # partition -> when its suspicion began
        self._before: dict[Key, Row | None] = {}  # what the suspect request was decided on
        self._settling: dict[Key, asyncio.Future[bool]] = {}
        self._touched: dict[Key, float] = {}  # last suspected or found short (expiry)

    def __len__(self) -> int:
        return len(self.held)

    def suspect(self, keys: Iterable[Key], before: ClusterView) -> None:
        """These partitions' answer was slow: suspect from now (renewed if held), a lookup
        started at once; ``before`` is the view the request was decided on."""
        now = self._clock()
        self._expire(now)
        marked = list(keys)
        for key in marked:
            self.held[key] = self._touched[key] = now
            self._before[key] = row_of(before, key)
        if marked:
            self._settle(marked, now)

    def unsure(self, keys: Iterable[Key]) -> asyncio.Future[bool] | None:
        """None when every held one of ``keys`` has a view from after its suspicion (or
        none is held); else what settles them: True once such a view is in the store,
        False when the lookup failed or timed out."""
        held = self.held
        waits: list[asyncio.Future[bool]] = []
        new: list[Key] = []
        since = float("-inf")
        for key in keys:
            began = held.get(key)
            if began is None:
                continue
            settling = self._settling.get(key)
            if settling is not None:
                if settling not in waits:
                    waits.append(settling)
            elif not self.fresh.since(began):
                new.append(key)  # its last lookup failed: one more
                since = max(since, began)
        if new:
            waits.append(self._settle(new, since))
        if not waits:
            return None
        if len(waits) == 1:
            return waits[0]
        return asyncio.ensure_future(_all(waits))

    def release(self, key: Key) -> None:
        """Found whole on a view from after its suspicion: its answers pass unchecked."""
        self.held.pop(key, None)
        self._before.pop(key, None)
        self._touched.pop(key, None)

    def keep(self, key: Key) -> None:
        """Found short: still held, ``hold_max_s`` from now."""
        now = self._clock()
        self._expire(now)
        if key in self.held:
            self._touched[key] = now

    def _settle(self, keys: list[Key], since: float) -> asyncio.Future[bool]:
        task = asyncio.ensure_future(self.fresh.confirm(since, lambda: self._unchanged(keys)))
        for key in keys:
            self._settling[key] = task

        def done(_: object) -> None:
            for key in keys:
                if self._settling.get(key) is task:
                    del self._settling[key]

        task.add_done_callback(done)
        return task

    def _unchanged(self, keys: list[Key]) -> bool:
        """The fresh view still shows one of ``keys`` as the suspect request saw it."""
        return unchanged(self._store.view, self._before, keys)

    def _expire(self, now: float) -> None:
        touched = self._touched
        if touched:
            for key in [k for k, at in touched.items() if now - at > self._hold_max_s]:
                if key not in self._settling:
                    self.release(key)


async def _all(waits: list[asyncio.Future[bool]]) -> bool:
    results = await asyncio.gather(*waits)
    return all(results)
