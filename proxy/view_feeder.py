"""Reading Metadata responses into the cluster view without stalling the event loop.

A 100,000-partition Metadata response takes about 0.1 s to read and as long
again to merge; done on the event loop, every connection would stall that
long. Here both run on one worker thread, and only the swap of the finished
view happens on the loop. Invariant: one worker, so views are built in the
order responses arrived; the store is only ever written from the loop thread.

For a large response (256 KiB and more) the worker never keeps the event
loop waiting more than about a millisecond: it naps (a 50 us sleep, so the
loop gets both the GIL and, if they share one, the CPU) after every
millisecond of work, between topics and chunks of 1,024 partitions, in the
read, the build and the release alike; from before the build is handed to the
worker until the replaced view has been freed the GIL switch interval is
short, for whatever runs between two naps; the cyclic GC is paused during the
build, and the new objects are frozen (:func:`gc.freeze`) before it resumes,
so no collection ever scans them; the parsed response and the replaced view
are freed a few objects at a time. None of this changes the view built.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time
from collections.abc import Callable, Iterable, MutableSequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from protocol.addresses import BrokerAddress
from protocol.metadata import MetadataSnapshot, read_metadata
from protocol.primitives import ProtocolError
from proxy.cluster_view import ClusterView, ClusterViewStore

log = logging.getLogger("rackguard.cluster")

_LARGE_FRAME = 256 * 1024  # Metadata responses from here on get the treatment below
_SWITCH_INTERVAL_S = 0.0005
_WORK_S = 0.001  # worker time between two naps
_NAP_S = 0.00005
_CHUNK = 1024  # objects freed between two calls of ``pause``


class Pacer:
    """``pause()``: sleep ``nap`` seconds if ``work`` seconds have passed since the last nap.

    A CPU-bound worker thread otherwise delays the event loop thread twice over: the
    loop waits for the GIL (the switch interval), and, woken on a CPU the worker is
    running on, for the scheduler to preempt the worker (up to a tick: 4 ms on the
    project's machine). A sleep hands over both at once.
    """

    def __init__(self, work: float = _WORK_S, nap: float = _NAP_S,
                 clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._work = work
        self._nap = nap
        self._clock = clock
        self._sleep = sleep
        self._last = clock()

    def __call__(self) -> None:
        if self._clock() - self._last >= self._work:
            self._sleep(self._nap)
            self._last = self._clock()


def _gather(groups: list[Iterable[object]], pause: Callable[[], object]) -> list[object]:
    out: list[object] = []
    for group in groups:
        out.extend(group)
        pause()
    return out


def _pop_all(objects: MutableSequence[Any], pause: Callable[[], object]) -> None:
    """Drop ``objects`` a chunk at a time (each pop may free a whole subtree)."""
    while objects:
        for _ in range(min(_CHUNK, len(objects))):
            objects.pop()
        pause()


def _release_gradually(box: list[ClusterView], pause: Callable[[], object]) -> None:
    """Free a replaced view on the worker, a few objects at a time.

    Dropping the last reference to 100,000 objects at once frees them in one C-level
    cascade that never yields the GIL; popping them one by one from a list does.
    """
    view = box.pop()
    topics = list(view.topics.values())
    parts = _gather([t.partitions.values() for t in topics], pause)
    del view
    _pop_all(topics, pause)
    _pop_all(parts, pause)


def _drop_snapshot_gradually(box: list[MetadataSnapshot], pause: Callable[[], object]
                             ) -> None:
    snapshot = box.pop()
    topics = list(snapshot.topics)
    parts = _gather([t.partitions for t in topics], pause)
    del snapshot
    _pop_all(topics, pause)
    _pop_all(parts, pause)


class ViewFeeder:
    def __init__(self, store: ClusterViewStore) -> None:
        self._store = store
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="rackguard-view")
        self._pending: set[asyncio.Future[None]] = set()
        self._lock = asyncio.Lock()  # each build starts from the view the last one installed
        # Large absorbs in flight (build to release); only touched on the loop thread.
        self._gentle = 0
        self._saved_interval = sys.getswitchinterval()

    async def absorb(self, frame: bytes | memoryview, version: int, full: bool
                     ) -> tuple[BrokerAddress, ...]:
        """Read a Metadata response frame and install the merged view; return its brokers.

        Raises ProtocolError. The parsed response and the replaced view are released on
        the worker thread too: freeing 100,000 objects is itself a stall of ~20 ms.
        """
        loop = asyncio.get_running_loop()
        large = len(frame) >= _LARGE_FRAME
        if large:
            # Set here, not on the worker: a loop thread that starts waiting for the GIL
            # before the worker shortens the interval would wait the old 5 ms.
            self._begin_gentle()
        try:
            async with self._lock:
                brokers, view = await loop.run_in_executor(
                    self._executor, self._build, frame, version, full, large)
                replaced = self._store.install(view)
            box = [replaced]
            del replaced
            released = loop.run_in_executor(
                self._executor, _release_gradually, box, Pacer() if large else _no_pause)
        except BaseException:
            if large:
                self._end_gentle()
            raise
        if large:
            released.add_done_callback(self._end_gentle)
        return brokers

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

    def _build(self, frame: bytes | memoryview, version: int, full: bool, large: bool
               ) -> tuple[tuple[BrokerAddress, ...], ClusterView]:
        if not large:
            snapshot = read_metadata(frame, version)
            return snapshot.brokers, self._store.build(snapshot, full)
        # A cyclic-GC pass started by these allocations would run while holding the GIL
        # (tens of ms at 100,000 partitions); the objects built here hold no cycles.
        enabled = gc.isenabled()
        gc.disable()
        pause = Pacer()
        try:
            box = [read_metadata(frame, version, pause)]
            view = self._store.build(box[0], full, pause)
            brokers = box[0].brokers
            _drop_snapshot_gradually(box, pause)
            # Moves every tracked object out of the generations in O(1). Otherwise the
            # first young collection after gc.enable() would scan the whole new view
            # (~10 ms), and full collections would rescan it for as long as it lives;
            # it is still freed by refcount.
            gc.freeze()
            return brokers, view
        finally:
            if enabled:
                gc.enable()

    def absorb_soon(self, frame: bytes | memoryview, version: int) -> None:
        """Learn from a Metadata response a client asked for (topic subsets: partial)."""
        task = asyncio.ensure_future(self._absorb_quietly(frame, version))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _absorb_quietly(self, frame: bytes | memoryview, version: int) -> None:
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


def _no_pause() -> None:
    pass
