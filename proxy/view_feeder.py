"""Reading Metadata responses into the cluster view without stalling the event loop.

A 100,000-partition Metadata response takes about 0.1 s to read and as long
again to merge; done on the event loop, every connection would stall that
long. Here both run on one worker thread, and only the swap of the finished
view happens on the loop. Invariant: one worker, so views are built in the
order responses arrived; the store is only ever written from the loop thread.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from concurrent.futures import ThreadPoolExecutor

from protocol.addresses import BrokerAddress
from protocol.metadata import MetadataSnapshot, read_metadata
from protocol.primitives import ProtocolError
from proxy.cluster_view import ClusterView, ClusterViewStore

log = logging.getLogger("rackguard.cluster")

_LARGE_FRAME = 256 * 1024  # Metadata responses from here on get the treatment below
_SWITCH_INTERVAL_S = 0.0005


def _release_gradually(box: list[ClusterView]) -> None:
    """Free a replaced view on the worker, a few objects at a time.

    Dropping the last reference to 100,000 objects at once frees them in one C-level
    cascade that never yields the GIL; popping them one by one from a list does.
    """
    view = box.pop()
    topics = list(view.topics.values())
    parts: list[object] = [p for t in topics for p in t.partitions.values()]
    del view
    while topics:
        topics.pop()
    while parts:
        parts.pop()


def _drop_snapshot_gradually(box: list[MetadataSnapshot]) -> None:
    snapshot = box.pop()
    topics = list(snapshot.topics)
    parts: list[object] = [p for t in topics for p in t.partitions]
    del snapshot
    while topics:
        topics.pop()
    while parts:
        parts.pop()


class ViewFeeder:
    def __init__(self, store: ClusterViewStore) -> None:
        self._store = store
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="rackguard-view")
        self._pending: set[asyncio.Future[None]] = set()
        self._lock = asyncio.Lock()  # each build starts from the view the last one installed

    async def absorb(self, frame: bytes | memoryview, version: int, full: bool
                     ) -> tuple[BrokerAddress, ...]:
        """Read a Metadata response frame and install the merged view; return its brokers.

        Raises ProtocolError. The parsed response and the replaced view are released on
        the worker thread too: freeing 100,000 objects is itself a stall of ~20 ms.
        """
        loop = asyncio.get_running_loop()
        async with self._lock:
            brokers, view = await loop.run_in_executor(
                self._executor, self._build, frame, version, full)
            replaced = self._store.install(view)
        box = [replaced]
        del replaced
        self._executor.submit(_release_gradually, box)
        if len(frame) >= _LARGE_FRAME:
            # Keep later full GC passes from re-scanning the long-lived view objects
            # (each pass would be a stall of its own); they are still freed by refcount.
            gc.freeze()
        return brokers

    def _build(self, frame: bytes | memoryview, version: int, full: bool
               ) -> tuple[tuple[BrokerAddress, ...], ClusterView]:
        if len(frame) < _LARGE_FRAME:
            snapshot = read_metadata(frame, version)
            return snapshot.brokers, self._store.build(snapshot, full)
        # A cyclic-GC pass started by these allocations would run on this thread while
        # holding the GIL (tens of ms at 100,000 partitions); the objects built here hold
        # no cycles, so collection waits until they are done and installed.
        # And the GIL is handed back to the event loop more often than every 5 ms while
        # this runs, so the loop waits at most about that long for it.
        enabled = gc.isenabled()
        interval = sys.getswitchinterval()
        gc.disable()
        sys.setswitchinterval(_SWITCH_INTERVAL_S)
        try:
            box = [read_metadata(frame, version)]
            view = self._store.build(box[0], full)
            brokers = box[0].brokers
            _drop_snapshot_gradually(box)
            return brokers, view
        finally:
            sys.setswitchinterval(interval)
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
