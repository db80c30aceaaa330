"""The proxy's own connection to the cluster: a metadata and topic-config poller.

Every ``metadata_refresh_interval_ms`` it asks one upstream bootstrap server
for Metadata on all topics, and every ``topic_config_refresh_interval_ms``
(and whenever new topics appear) for each topic's ``min.insync.replicas``
with DescribeConfigs. Results go into the :class:`ClusterViewStore`.
``refresh_now`` wakes it at once and resolves after the next refresh ends.

Invariants: a failed poll keeps the last view (its age keeps growing, which
is what makes the policy fail closed) and counts a failure; requests of its
own never share a connection with a client. These requests are small and
infrequent, so they are encoded with kafka-python's generic codec; the large
Metadata response is read with the proxy's own fast reader.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from config.settings import Settings
from protocol.addresses import BrokerAddress
from protocol.api_versions import read_api_versions
from protocol.apis import ApiKey
from proxy.cluster_view import ClusterViewStore
from proxy.view_feeder import ViewFeeder

log = logging.getLogger("rackguard.poller")

CLIENT_ID = "rackguard-poller"
TOPIC_RESOURCE = 2
METADATA_MAX = 12
DESCRIBE_CONFIGS_MAX = 4


class PollError(Exception):
    pass


class _Conn:
    """One request/response connection (no pipelining needed here)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.corr = 0
        self.versions: dict[int, tuple[int, int]] = {}

    async def call(self, request: Any, timeout: float) -> bytes:
        self.corr += 1
        request.with_header(correlation_id=self.corr, client_id=CLIENT_ID)
        self.writer.write(bytes(request.encode(header=True, framed=True)))
        async with asyncio.timeout(timeout):
            size = struct.unpack(">i", await self.reader.readexactly(4))[0]
            body = await self.reader.readexactly(size)
        frame = struct.pack(">i", size) + body
        corr = struct.unpack_from(">i", frame, 4)[0]
        if corr != self.corr:
            raise PollError(f"correlation id {corr} != {self.corr}")
        return frame

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
            self._on_metadata(brokers)
            topics = frozenset(self._store.view.topics)
            now = self._clock()
            interval = self._settings.topic_config_refresh_interval_ms / 1000
            if topics - self._known_topics or now - self._configs_at >= interval:
                self._store.apply_min_insync_replicas(
                    await self._topic_configs(conn, sorted(topics), timeout))
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

    async def _metadata(self, conn: _Conn, timeout: float) -> tuple[bytes, int]:
        _, hi = conn.versions.get(ApiKey.METADATA, (0, 0))
        version = min(hi, METADATA_MAX)
        if version < 1:
            raise PollError("the broker does not support Metadata v1+")
        kwargs: dict[str, Any] = {"topics": None}
        if version >= 4:
            kwargs["allow_auto_topic_creation"] = False
        request = MetadataRequest(version=version, **kwargs)
        return await conn.call(request, timeout), version

    async def _topic_configs(
        self, conn: _Conn, topics: list[str], timeout: float
    ) -> dict[str, int]:
        try:
            return await self._min_insync_replicas(conn, topics, timeout)
        except (OSError, asyncio.IncompleteReadError) as exc:
            if not self._ask_key_only:
                raise
            # Some Kafka-compatible brokers drop the connection when configuration
            # keys are named; ask for all of each topic's configs from now on.
            log.info("DescribeConfigs with a key list failed (%s); asking for all configs",
                     exc or type(exc).__name__)
            self._ask_key_only = False
            self._conn = None
            conn = await self._connection(timeout)
            return await self._min_insync_replicas(conn, topics, timeout)

    async def _min_insync_replicas(
        self, conn: _Conn, topics: list[str], timeout: float
    ) -> dict[str, int]:
        if not topics or ApiKey.DESCRIBE_CONFIGS not in conn.versions:
            return {}
        version = min(conn.versions[ApiKey.DESCRIBE_CONFIGS][1], DESCRIBE_CONFIGS_MAX)
        resource = DescribeConfigsRequest.DescribeConfigsResource
        keys = ["min.insync.replicas"] if self._ask_key_only else None
        request = DescribeConfigsRequest(
            version=version,
            resources=[resource(resource_type=TOPIC_RESOURCE, resource_name=name,
                                configuration_keys=keys) for name in topics],
            include_synonyms=False,
            include_documentation=False,
        )
        response = DescribeConfigsResponse.decode(
            await conn.call(request, timeout), version=version, header=True, framed=True)
        values: dict[str, int] = {}
        for result in response.results:
            if result.error_code != 0:
                continue
            for entry in result.configs:
                if entry.name == "min.insync.replicas" and entry.value is not None:
                    try:
                        values[result.resource_name] = int(entry.value)
                    except ValueError:
                        log.warning("topic %s: min.insync.replicas=%r is not a number",
                                    result.resource_name, entry.value)
        return values
