"""The proxy's own connection to the cluster: a metadata and topic-config poller.

Every ``metadata_refresh_interval_ms`` it asks one broker for Metadata on the
topics in scope, in one request: the watched set (:mod:`proxy.cluster.watch`,
``view_scope = "watched"``, a sidecar's default) or every topic (``"cluster"``,
given no watched set): any broker of the current view, in the order :class:`UpstreamHealth`
gives (the bootstrap servers only for the first view and when every known
broker failed). Each attempt has its own connect and request timeouts
(``admin_connect_timeout_ms``, ``admin_request_timeout_ms``); a broker that
fails is backed off and the next one, in another rack first, is asked at
once; one that has not answered within ``metadata_hedge_delay_ms`` is joined
by a second attempt on another broker, and the first answer wins. So a rack
that hangs costs a poll one hedge delay, not a timeout. Every
``topic_config_refresh_interval_ms`` it asks each topic's ``min.insync.replicas``
in scope with DescribeConfigs (and, at once, that of topics new to the view only).
One connection is kept open, to the broker that answered last: a sidecar holds
one control connection to the cluster. Results go into the :class:`ClusterViewStore`, through
the :class:`ViewFeeder`. ``refresh_now`` wakes it at once and resolves as soon as
the next refresh's Metadata is in the view (a produce naming a topic the view lacks
waits for that one round trip, not for the DescribeConfigs that follows).

A refresh costs nothing when nothing changed: a Metadata answer (under 256 KiB, as
a watched set's is) whose bytes after the throttle time equal the last one's is not
decoded; the view is confirmed (a new :class:`ClusterView` sharing every map of the
old one, with ``refreshed_at`` now) and nothing per topic or partition is built.

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
from collections.abc import Callable, Collection
from functools import partial
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from protocol.addresses import BrokerAddress
from protocol.api_versions import read_api_versions
from protocol.apis import ApiKey
from protocol.describe_configs import (
    DESCRIBE_CONFIGS_MAX,
    MIN_INSYNC_REPLICAS,
    encode_describe_configs,
    read_min_insync_replicas,
)
from protocol.primitives import Buffer
from proxy.cluster.control_conn import (
    LARGE_RESPONSE,
    ByteCount,
    ControlConn,
    PollError,
    no_count,
)
from proxy.cluster.feeder import Pause, ViewFeeder
from proxy.cluster.upstream_health import Address, Candidate, UpstreamHealth
from proxy.cluster.view import ClusterView, ClusterViewStore
from proxy.cluster.watch import WatchedTopics
from proxy.security.own_login import LoginFailed, login
from proxy.security.settings_map import sasl_credentials, upstream_tls
from proxy.security.tls import upstream_context
from proxy.settings import Settings

log = logging.getLogger("rackguard.poller")

METADATA_MAX = 12
_MANY_TOPICS = 1000  # from here on the DescribeConfigs steps are paced (``large``)

# what one attempt on one broker can fail with (TimeoutError and ssl.SSLError are OSErrors)
ATTEMPT_ERRORS = (OSError, asyncio.IncompleteReadError, PollError, ValueError, LoginFailed)
# a connection whose SASL session has a lifetime (KIP-368) is replaced at this share of it
_SESSION_SHARE = 0.8


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
        watched: WatchedTopics | None = None,
        count_bytes: ByteCount = no_count,
    ) -> None:
        self._settings = settings
        self._store = store
        self._feeder = feeder if feeder is not None else ViewFeeder(
            store, watched.__contains__ if watched is not None else None)
        self._on_metadata = on_metadata
        self._count_failure = failures
        self._clock = clock
        self._on_health = on_health
        self._watched = watched  # None: every topic of the cluster (view_scope "cluster")
        self._count_bytes = count_bytes
        self.upstreams = UpstreamHealth(
            settings.upstream_addresses(), clock, settings.upstream_backoff_ms / 1000,
            settings.upstream_backoff_max_ms / 1000)
        self._conns: dict[Address, ControlConn] = {}
        tls = upstream_tls(settings)
        self._ssl = upstream_context(tls) if tls is not None else None
        self._wake = asyncio.Event()
        self._waiters: list[asyncio.Future[bool]] = []
        self._config_waiters: list[asyncio.Future[bool]] = []
        self._task: asyncio.Task[None] | None = None
        self._configs_at = -float("inf")
        self._known_topics: frozenset[str] = frozenset()
        self.last_error: str | None = None
        self.last_poll_s = 0.0  # how long the last successful poll took, failovers included
        self._ask_key_only = True
        self._stopping = False
        # The last Metadata answer's bytes after its throttle time, its brokers, and the
        # view the poller itself installed last: an equal answer on that view is only
        # confirmed (nothing decoded). See _unchanged_key.
        self._last_answer: bytes | None = None
        self._last_brokers: tuple[BrokerAddress, ...] = ()
        self._last_view: ClusterView | None = None
        self.unchanged_polls = 0  # polls answered with the same bytes (not decoded)

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

    def refresh_now(self, configs: bool = False) -> asyncio.Future[bool]:
        """Wake the poller; resolves with the success of a poll that starts after this call,
        once its Metadata is in the view, or (``configs``) once the poll has ended, the
        min.insync.replicas of topics new to the view read too."""
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        (self._config_waiters if configs else self._waiters).append(waiter)
        self._wake.set()
        return waiter

    async def call_broker(self, node_id: int, api_key: int, min_version: int,
                          max_version: int, build: Callable[[int], Any]) -> tuple[Buffer, int]:
        """A request of the proxy's own to broker ``node_id`` on this poller's connection to
        it (the loss watch's reads of a partition's leader): ``build(version)`` at the
        broker's highest version up to ``max_version``; LookupError when it has none from
        ``min_version``. A failed exchange drops the connection."""
        c = self._candidate(node_id)
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

    @property
    def watched(self) -> WatchedTopics | None:
        """The watched set the poller is scoped to (None: the whole cluster)."""
        return self._watched

    async def poll_once(self, on_view: Callable[[], None] | None = None) -> None:
        """One refresh, failing over and hedging across brokers; raises PollError when no
        broker answered (used at start-up and by the loop). ``on_view`` is called once
        the Metadata answer is in the view, before the DescribeConfigs step."""
        began = self._clock()
        try:
            await self._poll(on_view)
            self.last_poll_s = self._clock() - began
        finally:
            self._on_health(self.upstreams)

    async def _poll(self, on_view: Callable[[], None] | None) -> None:
        try:
            winner, conn, frame, version = await self._hedged_metadata()
            key = _unchanged_key(frame, version)
            store = self._store
            if (key is not None and key == self._last_answer
                    and store.view is self._last_view):
                store.confirm()  # the same answer: nothing to decode, merge or allocate
                brokers = self._last_brokers
                self.unchanged_polls += 1
            else:
                brokers = await self._feeder.absorb(frame, version, full=True)
                self._last_answer, self._last_brokers = key, brokers
            self._last_view = store.view
            del frame
            if on_view is not None:
                on_view()
            self._on_metadata(brokers)
            self.upstreams.learn(Candidate(b.node_id, b.host, b.port, b.rack)
                                 for b in store.view.brokers.values())
            now = self._clock()
            due = now - self._configs_at >= self._settings.topic_config_refresh_interval_ms / 1000
            view = store.view
            if len(view.topics) < _MANY_TOPICS:  # a watched set: no hop to the worker
                asked = _topics_to_ask(view, self._known_topics, due, None)
            else:
                asked = await self._feeder.run(
                    partial(_topics_to_ask, view, self._known_topics, due), large=True)
            del view
            if asked is not None:
                topics, known = asked
                await self._topic_configs(winner, conn, topics)
                self._last_view = store.view
                if due:
                    self._configs_at = now
                self._known_topics = known
            self.last_error = None
        except ATTEMPT_ERRORS as exc:
            self.last_error = str(exc) or type(exc).__name__
            raise PollError(self.last_error) from exc

    # ----- loop
    async def _run(self) -> None:
        interval = self._settings.metadata_refresh_interval_ms / 1000
        while not self._stopping:
            self._wake.clear()
            waiters, self._waiters = self._waiters, []
            after, self._config_waiters = self._config_waiters, []
            ok = True
            try:
                await self.poll_once(partial(_resolve, waiters, True))
            except PollError as exc:
                ok = False
                self._count_failure()
                log.warning("metadata refresh failed (keeping the last view): %s", exc)
            _resolve(waiters, ok)
            _resolve(after, ok)
            if self._wake.is_set():
                continue  # asked for during that poll, which may have started too early
            try:
                async with asyncio.timeout(interval):
                    await self._wake.wait()
            except TimeoutError:
                pass

    # ----- asking the brokers
    async def _hedged_metadata(self) -> tuple[Candidate, ControlConn, Buffer, int]:
        """Metadata from the first broker that answers: candidates in the health order, the
        next one at once when one fails, and a second one in flight when the first has not
        answered within the hedge delay (at most two at a time)."""
        waiting = self.upstreams.order()
        hedge = self._settings.metadata_hedge_delay_ms / 1000
        running: dict[asyncio.Task[tuple[ControlConn, Buffer, int]], Candidate] = {}
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
                    if not isinstance(exc, ATTEMPT_ERRORS):
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

    async def _ask_metadata(self, c: Candidate) -> tuple[ControlConn, Buffer, int]:
        conn = await self._connect(c)
        frame, version = await self._metadata(conn, self._request_timeout)
        return conn, frame, version

    @property
    def _request_timeout(self) -> float:
        return self._settings.admin_request_timeout_ms / 1000

    async def open_connection(self, node_id: int) -> ControlConn:
        """A connection of the proxy's own to broker ``node_id`` (at the view's address,
        with the poller's TLS, SASL and ApiVersions), outside the poller's: for a caller
        that holds requests open (the config topic's long-polling Fetch), which closes
        it. Raises like a poller attempt (OSError, PollError, LoginFailed...)."""
        return await self._open(self._candidate(node_id))

    def _candidate(self, node_id: int) -> Candidate:
        """Broker ``node_id`` at the view's address for it."""
        broker = self._store.view.brokers.get(node_id)
        if broker is None:
            raise PollError(f"broker {node_id} is not in the view")
        return Candidate(node_id, broker.host, broker.port, broker.rack)

    async def _connect(self, c: Candidate) -> ControlConn:
        conn = self._conns.get(c.address)
        if conn is not None and conn.expires_at <= self._clock():
            self._drop(c.address)  # its SASL session is about to end: a new one logs in
            conn = None
        if conn is None:
            conn = self._conns[c.address] = await self._open(c)
        return conn

    async def _open(self, c: Candidate) -> ControlConn:
        async with asyncio.timeout(self._settings.admin_connect_timeout_ms / 1000):
            reader, writer = await asyncio.open_connection(
                c.host, c.port, ssl=self._ssl,
                server_hostname=c.host if self._ssl is not None else None)
        conn = ControlConn(reader, writer, self._count_bytes)
        try:
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
        except BaseException:  # a failed or cancelled set-up: nothing left open
            conn.close()
            raise
        return conn

    def _drop(self, address: Address) -> None:
        conn = self._conns.pop(address, None)
        if conn is not None:
            conn.close()

    async def _metadata(self, conn: ControlConn, timeout: float) -> tuple[Buffer, int]:
        _, hi = conn.versions.get(ApiKey.METADATA, (0, 0))
        version = min(hi, METADATA_MAX)
        if version < 1:
            raise PollError("the broker does not support Metadata v1+")
        kwargs: dict[str, Any] = {"topics": None}
        if self._watched is not None:
            kwargs["topics"] = [MetadataRequest.MetadataRequestTopic(topic_id=None, name=name)
                                for name in sorted(self._watched.names())]
        if version >= 4:
            kwargs["allow_auto_topic_creation"] = False
        request = MetadataRequest(version=version, **kwargs)
        return await conn.call(request, timeout), version

    async def _topic_configs(self, c: Candidate, conn: ControlConn, topics: Collection[str]
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

    async def _min_insync_replicas(self, conn: ControlConn, topics: Collection[str], timeout: float
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
                   ) -> tuple[frozenset[str], frozenset[str]] | None:
    """(topics to ask, topics known once asked): every topic of the view if their configs
    are due, else those new to it; None when none is new (nothing built then). A topic
    that left the view is forgotten: back in it, it is new again."""
    if due:
        topics = frozenset(view.topics)
        return topics, topics
    if view.topics.keys() <= known:
        return None
    new = frozenset(name for name in view.topics if name not in known)
    return new, frozenset(name for name in known if name in view.topics) | new


def _resolve(waiters: list[asyncio.Future[bool]], ok: bool) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(ok)


def _unchanged_key(frame: Buffer, version: int) -> bytes | None:
    """What two Metadata answers must share to be the same: the bytes after the header
    and the throttle time (None for an answer too large to copy on the loop, or with
    tagged fields in its header)."""
    if len(frame) >= LARGE_RESPONSE:
        return None
    start = 8
    if version >= 9:
        if frame[start] != 0:
            return None
        start += 1
    if version >= 3:
        start += 4
    return bytes(frame[start:])


def _numbers(values: dict[str, int | str]) -> dict[str, int]:
    out = {}
    for topic, value in values.items():
        if isinstance(value, int):
            out[topic] = value
        else:
            log.warning("topic %s: min.insync.replicas=%r is not a number", topic, value)
    return out
