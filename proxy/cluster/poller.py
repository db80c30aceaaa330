"""The proxy's own connection to the cluster: a metadata and topic-config poller.

Every ``metadata_refresh_interval_ms`` it asks one broker for Metadata on all
topics: any broker of the current view, in the order :class:`UpstreamHealth`
gives (the bootstrap servers only for the first view and when every known
broker failed). Each attempt has its own connect and request timeouts
(``admin_connect_timeout_ms``, ``admin_request_timeout_ms``); a broker that
fails is backed off and the next one, in another rack first, is asked at
once; one that has not answered within ``metadata_hedge_delay_ms`` is joined
by a second attempt on another broker, and the first answer wins. So a rack
that hangs costs a poll one hedge delay, not a timeout. Every
``topic_config_refresh_interval_ms``
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
from proxy.cluster.feeder import Pause, ViewFeeder
from proxy.cluster.upstream_health import Address, Candidate, UpstreamHealth
from proxy.cluster.view import ClusterView, ClusterViewStore
from proxy.security.own_login import LoginFailed, login
from proxy.security.settings_map import sasl_credentials, upstream_tls
from proxy.security.tls import upstream_context
from proxy.settings import Settings

log = logging.getLogger("rackguard.poller")

METADATA_MAX = 12
_MANY_TOPICS = 1000  # from here on the DescribeConfigs steps are paced (``large``)
_LARGE_RESPONSE = 256 * 1024  # read a buffer at a time from here on
_I32 = struct.Struct(">i")


class PollError(Exception):
    pass


# what one attempt on one broker can fail with (TimeoutError and ssl.SSLError are OSErrors)
_ATTEMPT_ERRORS = (OSError, asyncio.IncompleteReadError, PollError, ValueError, LoginFailed)
# a connection whose SASL session has a lifetime (KIP-368) is replaced at this share of it
_SESSION_SHARE = 0.8


class _Conn:
    """One request/response connection (no pipelining needed here)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.corr = 0
        self.versions: dict[int, tuple[int, int]] = {}
        self.expires_at = float("inf")  # the SASL session's end (KIP-368), if it has one
        self.lock = asyncio.Lock()  # one exchange at a time: the poller and ``call_broker``

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
        async with self.lock:
            return await self._exchange(frame, corr, timeout)

    async def _exchange(self, frame: bytes, corr: int, timeout: float) -> Buffer:
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
        on_health: Callable[[UpstreamHealth], None] = lambda health: None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._feeder = feeder if feeder is not None else ViewFeeder(store)
        self._on_metadata = on_metadata
        self._count_failure = failures
        self._clock = clock
        self._on_health = on_health
        self.upstreams = UpstreamHealth(
            settings.upstream_addresses(), clock, settings.upstream_backoff_ms / 1000,
            settings.upstream_backoff_max_ms / 1000)
        self._conns: dict[Address, _Conn] = {}
        tls = upstream_tls(settings)
        self._ssl = upstream_context(tls) if tls is not None else None
        self._wake = asyncio.Event()
        self._waiters: list[asyncio.Future[bool]] = []
        self._task: asyncio.Task[None] | None = None
        self._configs_at = -float("inf")
        self._known_topics: frozenset[str] = frozenset()
        self.last_error: str | None = None
        self.last_poll_s = 0.0  # how long the last successful poll took, failovers included
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
        for address in list(self._conns):
            self._drop(address)
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

    async def call_broker(self, node_id: int, api_key: int, min_version: int,
                          max_version: int, build: Callable[[int], Any]) -> tuple[Buffer, int]:
        """A request of the proxy's own to broker ``node_id`` on this poller's connection to
        it (the loss watch's reads of a partition's leader): ``build(version)`` at the
        broker's highest version up to ``max_version``; LookupError when it has none from
        ``min_version``. A failed exchange drops the connection."""
        broker = self._store.view.brokers.get(node_id)
        if broker is None:
            raise PollError(f"broker {node_id} is not in the view")
        c = Candidate(node_id, broker.host, broker.port, broker.rack)
        conn = await self._connect(c)
        lo, hi = conn.versions.get(api_key, (0, -1))
        version = min(hi, max_version)
        if version < max(lo, min_version):
            raise LookupError(f"broker {node_id} has no version {min_version}-{max_version} "
                              f"of api {api_key}")
        try:
            return await conn.call(build(version), self._request_timeout), version
        except BaseException:
            self._drop(c.address)
            raise

    async def poll_once(self) -> None:
        """One refresh, failing over and hedging across brokers; raises PollError when no
        broker answered (used at start-up and by the loop)."""
        began = self._clock()
        try:
            await self._poll()
            self.last_poll_s = self._clock() - began
        finally:
            self._on_health(self.upstreams)

    async def _poll(self) -> None:
        try:
            winner, conn, frame, version = await self._hedged_metadata()
            brokers = await self._feeder.absorb(frame, version, full=True)
            del frame
            self._on_metadata(brokers)
            self.upstreams.learn(Candidate(b.node_id, b.host, b.port, b.rack)
                                 for b in self._store.view.brokers.values())
            now = self._clock()
            due = now - self._configs_at >= self._settings.topic_config_refresh_interval_ms / 1000
            view = self._store.view
            topics = await self._feeder.run(
                partial(_topics_to_ask, view, self._known_topics, due),
                large=len(view.topics) >= _MANY_TOPICS)
            del view
            if topics is not None:
                await self._topic_configs(winner, conn, topics)
                self._configs_at = now
                self._known_topics = topics
            self.last_error = None
        except _ATTEMPT_ERRORS as exc:
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

    # ----- asking the brokers
    async def _hedged_metadata(self) -> tuple[Candidate, _Conn, Buffer, int]:
        """Metadata from the first broker that answers: candidates in the health order, the
        next one at once when one fails, and a second one in flight when the first has not
        answered within the hedge delay (at most two at a time)."""
        waiting = self.upstreams.order()
        hedge = self._settings.metadata_hedge_delay_ms / 1000
        running: dict[asyncio.Task[tuple[_Conn, Buffer, int]], Candidate] = {}
        errors: list[str] = []

        def launch() -> bool:
            # the next candidate, from a rack none of the running attempts is in if any is
            # left: a broker that does not answer may be a zone that does not answer
            busy = {c.rack for c in running.values()}
            pick = next((c for c in waiting if c.rack not in busy), None)
            if pick is None and waiting:
                pick = waiting[0]
            if pick is not None:
                waiting.remove(pick)
                running[asyncio.ensure_future(self._ask_metadata(pick))] = pick
            return pick is not None

        launch()
        try:
            while running:
                done, _ = await asyncio.wait(running, timeout=hedge,
                                             return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    if len(running) < 2:
                        launch()  # a hedge: the order puts another rack next
                    continue
                for task in done:
                    c = running.pop(task)
                    exc = task.exception()
                    if exc is None:
                        conn, frame, version = task.result()
                        self.upstreams.succeeded(c)
                        for address in [a for a in self._conns if a != c.address]:
                            self._drop(address)  # one connection kept: the one that answered
                        return c, conn, frame, version
                    if not isinstance(exc, _ATTEMPT_ERRORS):
                        raise exc
                    error = str(exc) or type(exc).__name__
                    errors.append(f"{c.name}: {error}")
                    self.upstreams.failed(c, error)
                    self._drop(c.address)
                if not running:
                    launch()  # failover: the next broker, another rack first
        finally:
            for task, c in running.items():  # hedges that lost, or a failure elsewhere
                task.cancel()
                self._drop(c.address)
            await asyncio.gather(*running, return_exceptions=True)
        raise PollError("no broker answered: " + "; ".join(errors or ["none known"]))

    async def _ask_metadata(self, c: Candidate) -> tuple[_Conn, Buffer, int]:
        conn = await self._connect(c)
        frame, version = await self._metadata(conn, self._request_timeout)
        return conn, frame, version

    @property
    def _request_timeout(self) -> float:
        return self._settings.admin_request_timeout_ms / 1000

    async def _connect(self, c: Candidate) -> _Conn:
        conn = self._conns.get(c.address)
        if conn is not None and conn.expires_at <= self._clock():
            self._drop(c.address)  # its SASL session is about to end: a new one logs in
            conn = None
        if conn is not None:
            return conn
        async with asyncio.timeout(self._settings.admin_connect_timeout_ms / 1000):
            reader, writer = await asyncio.open_connection(
                c.host, c.port, ssl=self._ssl,
                server_hostname=c.host if self._ssl is not None else None)
        conn = _Conn(reader, writer)
        self._conns[c.address] = conn
        frame = await conn.call(ApiVersionsRequest(version=0), self._request_timeout)
        error, entries = read_api_versions(frame, 0)
        if error != 0:
            raise PollError(f"ApiVersions error {error}")
        conn.versions = {key: (lo, hi) for key, lo, hi in entries}
        credentials = sasl_credentials(self._settings)  # the password file is read now
        if credentials is not None:
            lifetime_ms = await login(conn, credentials, self._request_timeout)
            if lifetime_ms > 0:
                conn.expires_at = self._clock() + _SESSION_SHARE * lifetime_ms / 1000
        return conn

    def _drop(self, address: Address) -> None:
        conn = self._conns.pop(address, None)
        if conn is not None:
            conn.close()

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

    async def _topic_configs(self, c: Candidate, conn: _Conn, topics: Collection[str]
                             ) -> None:
        """min.insync.replicas of ``topics`` from the broker that answered the Metadata;
        on failure, once more from the next broker (another rack first)."""
        try:
            await self._min_insync_replicas(conn, topics, self._request_timeout)
            return
        except (OSError, asyncio.IncompleteReadError, PollError, ValueError) as exc:
            self._drop(c.address)
            # A timeout says nothing about key lists (on Python 3.11 TimeoutError is an
            # OSError: catching it as one used to switch to all configs for good); a
            # connection dropped on a key list is what some Kafka-compatible brokers do:
            # ask for all of each topic's configs from now on.
            if (self._ask_key_only and not isinstance(exc, TimeoutError)
                    and isinstance(exc, (OSError, asyncio.IncompleteReadError))):
                log.info("DescribeConfigs with a key list failed (%s); asking for all "
                         "configs", exc or type(exc).__name__)
                self._ask_key_only = False
                conn = await self._connect(c)
                await self._min_insync_replicas(conn, topics, self._request_timeout)
                return
            self.upstreams.failed(c, str(exc) or type(exc).__name__)
        for other in self.upstreams.order()[:1]:
            conn = await self._connect(other)
            await self._min_insync_replicas(conn, topics, self._request_timeout)

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
