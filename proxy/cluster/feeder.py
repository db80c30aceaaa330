"""Building the next cluster view without stalling the event loop.

A Metadata response under 16 KiB (a watched set's: some hundred partitions) is
read and merged on the loop, in well under a millisecond: a worker round trip
would cost more. A 100,000-partition Metadata response takes about 0.1 s to read
and as long again to merge; min.insync.replicas read for 20,000 topics takes tens of ms
to decode and apply. Done on the event loop, every connection would stall that
long. Here all of it runs on one worker thread, and only the swap of the
finished view happens on the loop.

Invariants: one worker and one lock, so updates are built one at a time, in
the order they were asked for, each on the view the previous one installed;
the store is only ever written from the loop thread, with
:meth:`ClusterViewStore.install_over`, so a view built on a base that is no
longer current (someone wrote to the store directly meanwhile) is never
installed: it is built again on the current view. A view once installed is
therefore never lost or replaced by an older one. Installing is O(1).

For a large job (a Metadata response of 256 KiB and more, or one the caller
says is large) the worker never keeps the event loop waiting more than about
a millisecond: it naps (a 50 us sleep, so the loop gets both the GIL and, if
they share one, the CPU) after every millisecond of work, between topics and
chunks of 1,024 partitions, in the read, the build and the release alike;
from before the job is handed to the worker until the replaced view has been
freed the GIL switch interval is short, for whatever runs between two naps;
the replaced view is freed a few objects at a time. None of this changes the
view built. The cyclic GC is left alone (no pause, no freeze): the parsed
response's topics are merged into the next view one by one as they are read
(an unchanged topic is dropped at once and its old object kept, see
:mod:`proxy.cluster.view`), so a refresh of an unchanged cluster
leaves a handful of new long-lived objects, not one per topic, and does not
bring the next full collection forward; per-partition values are plain tuples
the collector stops tracking, so no collection has a whole view to scan.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, MutableSequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from protocol.addresses import BrokerAddress
from protocol.metadata import TopicRow, read_metadata
from protocol.primitives import Buffer, ProtocolError
from proxy.cluster.pacing import Pacer
from proxy.cluster.view import ClusterView, ClusterViewStore

log = logging.getLogger("rackguard.cluster")

_LARGE_FRAME = 256 * 1024  # Metadata responses from here on get the treatment below
_INLINE_FRAME = 16 * 1024  # below this an answer is read and merged on the loop (~0.1 ms)
_SWITCH_INTERVAL_S = 0.0005
_CHUNK = 1024  # objects freed between two calls of ``pause``
Pause = Callable[[], object] | None
R = TypeVar("R")
T = TypeVar("T")


def _pop_all(objects: MutableSequence[Any], pause: Callable[[], object]) -> None:
    """Drop ``objects`` a chunk at a time (each pop may free a whole subtree)."""
    while objects:
        for _ in range(min(_CHUNK, len(objects))):
            objects.pop()
        pause()


def _release_gradually(box: list[ClusterView], pause: Callable[[], object],
                       keep: ClusterView | None = None) -> None:
    """Free a replaced view on the worker, a few objects at a time.

    Dropping the last reference to 100,000 objects at once frees them in one C-level
    cascade that never yields the GIL; popping them one by one from a list does. The
    partitions of a topic that ``keep`` (the view that replaced it) shares are not
    walked: they stay alive (a min.insync.replicas update shares them all).
    """
    view = box.pop()
    topics = list(view.topics.values())
    kept = keep.topics if keep is not None else {}
    parts: list[object] = []
    for i, topic in enumerate(topics):
        successor = kept.get(topic.name)
        if successor is None or successor.partitions is not topic.partitions:
            parts.extend(topic.partitions.rows.values())
            pause()
        elif i % _CHUNK == _CHUNK - 1:
            pause()
    del view
    _pop_all(topics, pause)
    _pop_all(parts, pause)


class ViewFeeder:
    """The one worker thread that builds every next view, and the loop-side swaps."""

    def __init__(self, store: ClusterViewStore,
                 scope: Callable[[str], bool] | None = None) -> None:
        self._store = store
        # None: every topic; else a client's Metadata answer adds only the topics in scope
        # (the watched set): a client asking for every topic does not grow the view
        self._scope = scope
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="rackguard-view")
        self._pending: set[asyncio.Future[None]] = set()
        self._lock = asyncio.Lock()  # one update at a time, each built on the last installed
        # Large jobs in flight (start to release); only touched on the loop thread.
        self._gentle = 0
        self._saved_interval = sys.getswitchinterval()

    async def absorb(self, frame: Buffer, version: int, full: bool
                     ) -> tuple[BrokerAddress, ...]:
        """Read a Metadata response frame and install the merged view; return its brokers.

        Raises ProtocolError. The parsed response and the replaced view are released on
        the worker thread too: freeing 100,000 objects is itself a stall of ~20 ms.
        """
        store = self._store
        scope = None if full else self._scope

        def build(base: ClusterView, pause: Pause) -> tuple[tuple[BrokerAddress, ...],
                                                             ClusterView]:
            builder = store.builder(full, pause, base)
            add = builder.add if scope is None else partial(_add_in_scope, scope, builder.add)
            # Each topic goes into the view as soon as it is read: an unchanged one is
            # dropped at once, so a refresh of 20,000 topics does not leave 20,000 parsed
            # topics to be promoted to the oldest generation (bringing the next full
            # collection forward) while the rest is read.
            snapshot = read_metadata(frame, version, pause, add)
            return snapshot.brokers, builder.finish(snapshot)

        if len(frame) < _INLINE_FRAME:
            return self._update_inline(build)
        return await self._update(build, len(frame) >= _LARGE_FRAME)

    def _update_inline(self, build: Callable[[ClusterView, Pause], tuple[R, ClusterView]]
                       ) -> R:
        """A small update (a watched set's answer) built and installed on the loop: no
        worker round trip, which would cost more than the build. Installed over the
        current view like any other; a worker update in flight is built again on it."""
        base = self._store.view
        result, view = build(base, None)
        if view is not base:
            self._store.install(view)
        return result

    async def update(self, build: Callable[[ClusterView, Pause], ClusterView], large: bool
                     ) -> ClusterView:
        """Install ``build(base, pause)``, run on the worker, on top of the current view.

        ``build`` must be pure like :meth:`ClusterViewStore.build`: its result is
        discarded and it runs again if another view was installed while it ran.
        Returning ``base`` itself installs nothing. ``large``: pace it (``pause`` is a
        :class:`Pacer`, else None) and give it the treatment against loop stalls.
        Returns the view installed (or kept).
        """
        def job(base: ClusterView, pause: Pause) -> tuple[None, ClusterView]:
            return None, build(base, pause)

        await self._update(job, large)
        return self._store.view

    async def run(self, work: Callable[[Pause], T], large: bool) -> T:
        """``work(pause)`` on the worker, in order with the view updates; installs nothing.

        ``large``: ``pause`` is a :class:`Pacer` (else None), and the GIL switch interval
        is short while it runs.
        """
        loop = asyncio.get_running_loop()
        if not large:
            return await loop.run_in_executor(self._executor, work, None)
        self._begin_gentle()
        try:
            return await loop.run_in_executor(self._executor, _paced, work)
        finally:
            self._end_gentle()

    async def _update(self, build: Callable[[ClusterView, Pause], tuple[R, ClusterView]],
                      large: bool) -> R:
        loop = asyncio.get_running_loop()
        if large:
            # Set here, not on the worker: a loop thread that starts waiting for the GIL
            # before the worker shortens the interval would wait the old 5 ms.
            self._begin_gentle()
        released: asyncio.Future[None] | None = None
        try:
            async with self._lock:
                while True:
                    base = self._store.view
                    result, view = await loop.run_in_executor(
                        self._executor, self._build, build, base, large)
                    if view is base or self._store.install_over(base, view):
                        break
                    # Installed by someone else meanwhile (a direct write to the store):
                    # ``view`` lacks it. Drop it off the loop and build again on top.
                    self._release_soon([view], None, large)
                    del view
            if view is not base:
                box = [base]
                del base
                released = self._release_soon(box, view, large)
        except BaseException:
            if large:
                self._end_gentle()
            raise
        if large:
            if released is None:
                self._end_gentle()
            else:
                released.add_done_callback(self._end_gentle)
        return result

    def _release_soon(self, box: list[ClusterView], keep: ClusterView | None, large: bool
                      ) -> asyncio.Future[None]:
        return asyncio.get_running_loop().run_in_executor(
            self._executor, _release_gradually, box, Pacer() if large else _no_pause, keep)

    def _begin_gentle(self) -> None:
        if self._gentle == 0:
            self._saved_interval = sys.getswitchinterval()
            sys.setswitchinterval(_SWITCH_INTERVAL_S)
        self._gentle += 1

    def _end_gentle(self, _: object = None) -> None:
        if self._gentle == 0:  # close() already restored the interval
            return
        self._gentle -= 1
        if self._gentle == 0:
            sys.setswitchinterval(self._saved_interval)

    @staticmethod
    def _build(build: Callable[[ClusterView, Pause], tuple[R, ClusterView]],
               base: ClusterView, large: bool) -> tuple[R, ClusterView]:
        return build(base, Pacer() if large else None)

    def absorb_soon(self, frame: Buffer, version: int) -> None:
        """Learn from a Metadata response a client asked for (topic subsets: partial)."""
        task = asyncio.ensure_future(self._absorb_quietly(frame, version))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _absorb_quietly(self, frame: Buffer, version: int) -> None:
        try:
            await self.absorb(frame, version, full=False)
        except ProtocolError as exc:  # the client has its bytes; the view keeps its state
            log.warning("cluster view could not read a Metadata v%d response: %s",
                        version, exc)

    def close(self) -> None:
        for task in self._pending:
            task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._gentle:
            self._gentle = 0
            sys.setswitchinterval(self._saved_interval)


def _add_in_scope(scope: Callable[[str], bool], add: Callable[[TopicRow], None],
                  topic: TopicRow) -> None:
    if topic[0] is not None and scope(topic[0]):
        add(topic)


def _paced(work: Callable[[Pause], T]) -> T:
    return work(Pacer())


def _no_pause() -> None:
    pass
