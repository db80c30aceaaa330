"""The proxy's own connection to the cluster: a metadata and topic-config poller.

Every ``metadata_refresh_interval_ms`` it asks one upstream bootstrap server
for Metadata on all topics, and every ``topic_config_refresh_interval_ms``
(and whenever new topics appear) for each topic's ``min.insync.replicas``
with DescribeConfigs. Results go into the :class:`ClusterViewStore`, through
the :class:`ViewFeeder`. ``refresh_now`` wakes it at once and resolves after
the next refresh ends.

Invariants: a failed poll keeps the last view (its age keeps growing, which
is what makes the policy fail closed) and counts a failure; requests of its
own never share a connection with a client. On the event loop a refresh only
moves bytes and swaps views, whatever the cluster's size: every step whose
cost grows with the number of topics or partitions (reading and merging the
Metadata response, listing the topics, encoding the DescribeConfigs request,
reading its response, applying min.insync.replicas) runs on the feeder's
worker thread, paced for large clusters; responses come off the socket a
buffer at a time and are never copied whole on the loop. The small requests
(ApiVersions, Metadata) are encoded with kafka-python's generic codec; the
DescribeConfigs request and response, one entry per topic, with
:mod:`protocol.describe_configs` (the generic codec takes ~0.3 s for 20,000
topics, seconds with all configs). The min.insync.replicas values are applied by
:meth:`ViewFeeder.update` on whatever view is current when they arrive, never
on the one the request was built from.
"""

from __future__ import annotations

import asyncio
import logging
import mmap
import struct
from collections.abc import Callable, Collection
from functools import partial
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from config.settings import Settings
from protocol.addresses import BrokerAddress
from protocol.api_versions import read_api_versions
from protocol.apis import ApiKey
from protocol.describe_configs import (
    CLIENT_ID,
    DESCRIBE_CONFIGS_MAX,
    MIN_INSYNC_REPLICAS,
    encode_describe_configs,
    read_min_insync_replicas,
)
from protocol.primitives import Buffer
from proxy.cluster_view import ClusterView, ClusterViewStore
from proxy.view_feeder import Pause, ViewFeeder

log = logging.getLogger("rackguard.poller")

METADATA_MAX = 12
_MANY_TOPICS = 1000  # from here on the DescribeConfigs steps are paced (``large``)
_LARGE_RESPONSE = 256 * 1024  # read a buffer at a time from here on
_I32 = struct.Struct(">i")


class PollError(Exception):
    pass


class _Conn:
    """One request/response connection (no pipelining needed here)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.corr = 0
        self.versions: dict[int, tuple[int, int]] = {}

    def next_correlation_id(self) -> int:
        self.corr += 1
        return self.corr

    async def call(self, request: Any, timeout: float) -> Buffer:
        corr = self.next_correlation_id()
        request.with_header(correlation_id=corr, client_id=CLIENT_ID)
        return await self.exchange(bytes(request.encode(header=True, framed=True)), corr,
                                   timeout)

    async def exchange(self, frame: bytes, corr: int, timeout: float) -> Buffer:
        """Send a request frame; return the response frame (size prefix included)."""
        self.writer.write(frame)
        async with asyncio.timeout(timeout):
            head = await self.reader.readexactly(4)
            size = _I32.unpack(head)[0]
            if size < 4:
                raise PollError(f"response frame of {size} bytes")
            if size < _LARGE_RESPONSE:
                out: Buffer = head + await self.reader.readexactly(size)
            else:
                out = await self._read_large(head, 4 + size)
        got = _I32.unpack_from(out, 4)[0]
        if got != corr:
            raise PollError(f"correlation id {got} != {corr}")
        return out

    async def _read_large(self, head: bytes, size: int) -> memoryview:
        # A buffer at a time into an anonymous mapping: no single step on the loop
        # copies more than one socket read (readexactly and a growing bytearray copy
        # the whole 15 MB, several ms at once), and the mapping's pages start zeroed
        # without a memset. Unmapped (GIL released) when the last view of it goes.
        buf = mmap.mmap(-1, size)
        buf[:4] = head
        pos = 4
        while pos < size:
            chunk = await self.reader.read(size - pos)
            if not chunk:
                raise ConnectionResetError(f"connection closed after {pos} of {size} bytes")
            buf[pos:pos + len(chunk)] = chunk
            pos += len(chunk)
        return memoryview(buf)

    def close(self) -> None:
        self.writer.close()


class MetadataPoller:
    def __init__(
        self,
        settings: Settings,
        store: ClusterViewStore,
        on_metadata: Callable[[tuple[BrokerAddress, ...]], None],
        failures: Callable[[], None],
        clock: Callable[[], float],
        feeder: ViewFeeder | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._feeder = feeder if feeder is not None else ViewFeeder(store)
        self._on_metadata = on_metadata
        self._count_failure = failures
        self._clock = clock
        self._conn: _Conn | None = None
        self._wake = asyncio.Event()
        self._waiters: list[asyncio.Future[bool]] = []
        self._task: asyncio.Task[None] | None = None
        self._next_upstream = 0
        self._configs_at = -float("inf")
        self._known_topics: frozenset[str] = frozenset()
        self.last_error: str | None = None
        self._ask_key_only = True
        self._stopping = False

    # ----- public
    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self._stopping = True  # ends the loop even if a cancellation gets lost
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=5)
        if self._conn is not None:
            self._conn.close()
        self._feeder.close()

    @property
    def feeder(self) -> ViewFeeder:
        return self._feeder

    def refresh_now(self) -> asyncio.Future[bool]:
        """Wake the poller; resolves with the success of a poll that starts after this call."""
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._wake.set()
        return waiter

    async def poll_once(self) -> None:
        """One refresh; raises on failure (used at start-up and by the loop).

        A failure on a connection that was already open (its broker may have gone)
        is retried once on a new connection, which tries every upstream in turn.
        """
        reused = self._conn is not None
        try:
            await self._poll()
        except PollError:
            if not reused:
                raise
            await self._poll()

    async def _poll(self) -> None:
        timeout = self._settings.connect_timeout_ms / 1000
        try:
            conn = await self._connection(timeout)
            frame, version = await self._metadata(conn, timeout)
            brokers = await self._feeder.absorb(frame, version, full=True)
            del frame
            self._on_metadata(brokers)
            now = self._clock()
            due = now - self._configs_at >= self._settings.topic_config_refresh_interval_ms / 1000
            view = self._store.view
            topics = await self._feeder.run(
                partial(_topics_to_ask, view, self._known_topics, due),
                large=len(view.topics) >= _MANY_TOPICS)
            del view
            if topics is not None:
                await self._topic_configs(conn, topics, timeout)
                self._configs_at = now
                self._known_topics = topics
            self.last_error = None
        except (TimeoutError, OSError, asyncio.IncompleteReadError, PollError, ValueError) as exc:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                self._next_upstream += 1  # start the next connection with another upstream
            self.last_error = str(exc) or type(exc).__name__
            raise PollError(self.last_error) from exc

    # ----- loop
    async def _run(self) -> None:
        interval = self._settings.metadata_refresh_interval_ms / 1000
        while not self._stopping:
            self._wake.clear()
            waiters, self._waiters = self._waiters, []
            ok = True
            try:
                await self.poll_once()
            except PollError as exc:
                ok = False
                self._count_failure()
                log.warning("metadata refresh failed (keeping the last view): %s", exc)
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(ok)
            if self._wake.is_set():
                continue  # asked for during that poll, which may have started too early
            try:
                async with asyncio.timeout(interval):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _connection(self, timeout: float) -> _Conn:
        if self._conn is not None:
            return self._conn
        upstreams = self._settings.upstream_addresses()
        errors = []
        for i in range(len(upstreams)):
            host, port = upstreams[(self._next_upstream + i) % len(upstreams)]
            try:
                async with asyncio.timeout(timeout):
                    reader, writer = await asyncio.open_connection(host, port)
            except (TimeoutError, OSError) as exc:
                errors.append(f"{host}:{port}: {exc or 'timeout'}")
                continue
            conn = _Conn(reader, writer)
            frame = await conn.call(ApiVersionsRequest(version=0), timeout)
            error, entries = read_api_versions(frame, 0)
            if error != 0:
                conn.close()
                raise PollError(f"ApiVersions error {error} from {host}:{port}")
            conn.versions = {key: (lo, hi) for key, lo, hi in entries}
            self._conn = conn
            self._next_upstream = (self._next_upstream + i) % len(upstreams)
            return conn
        raise PollError("no upstream reachable: " + "; ".join(errors))

    async def _metadata(self, conn: _Conn, timeout: float) -> tuple[Buffer, int]:
        _, hi = conn.versions.get(ApiKey.METADATA, (0, 0))
        version = min(hi, METADATA_MAX)
        if version < 1:
            raise PollError("the broker does not support Metadata v1+")
        kwargs: dict[str, Any] = {"topics": None}
        if version >= 4:
            kwargs["allow_auto_topic_creation"] = False
        request = MetadataRequest(version=version, **kwargs)
        return await conn.call(request, timeout), version

    async def _topic_configs(self, conn: _Conn, topics: Collection[str], timeout: float
                             ) -> None:
        try:
            await self._min_insync_replicas(conn, topics, timeout)
        except (OSError, asyncio.IncompleteReadError) as exc:
            if not self._ask_key_only:
                raise
            # Some Kafka-compatible brokers drop the connection when configuration
            # keys are named; ask for all of each topic's configs from now on.
            log.info("DescribeConfigs with a key list failed (%s); asking for all configs",
                     exc or type(exc).__name__)
            self._ask_key_only = False
            conn.close()
            self._conn = None
            conn = await self._connection(timeout)
            await self._min_insync_replicas(conn, topics, timeout)

    async def _min_insync_replicas(self, conn: _Conn, topics: Collection[str], timeout: float
                                   ) -> None:
        """Read every topic's min.insync.replicas and apply them to the current view."""
        if not topics or ApiKey.DESCRIBE_CONFIGS not in conn.versions:
            return
        version = min(conn.versions[ApiKey.DESCRIBE_CONFIGS][1], DESCRIBE_CONFIGS_MAX)
        keys = (MIN_INSYNC_REPLICAS,) if self._ask_key_only else None
        large = len(topics) >= _MANY_TOPICS
        corr = conn.next_correlation_id()
        request = await self._feeder.run(
            partial(encode_describe_configs, topics, version, corr, keys), large)
        response = await conn.exchange(request, corr, timeout)
        del request
        store = self._store

        def apply(base: ClusterView, pause: Pause) -> ClusterView:
            values = _numbers(read_min_insync_replicas(response, version, pause))
            return store.with_min_insync_replicas(values, pause, base)

        # Applied to the view current once the response is read (a Metadata response
        # may have been absorbed meanwhile), on the worker; only the swap is on the loop.
        await self._feeder.update(apply, large)


# ----- steps run on the feeder's worker thread (pure; no I/O)


def _topics_to_ask(view: ClusterView, known: frozenset[str], due: bool, pause: Pause
                   ) -> frozenset[str] | None:
    """The view's topics if their configs are due or some are new, else None."""
    topics = frozenset(view.topics)
    return topics if due or not topics <= known else None


def _numbers(values: dict[str, int | str]) -> dict[str, int]:
    out = {}
    for topic, value in values.items():
        if isinstance(value, int):
            out[topic] = value
        else:
            log.warning("topic %s: min.insync.replicas=%r is not a number", topic, value)
    return out
