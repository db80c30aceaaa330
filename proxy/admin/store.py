"""The config topic: where min.insync.racks values set through the Admin API live,
shared by every rackguard in front of the cluster.

A compacted topic with one partition (default ``__rackguard_configs``), created when
missing with a replica in every rack and min.insync.replicas=1 (see
:mod:`.topic_layout` for the trade-off), so that it takes a change in any outage that
leaves a rack serving. An existing topic is checked at start (and again every 30 s
while something is wrong, :mod:`.topic_health`): what keeps it from taking a change
then is logged and shown in /readyz (``health.problems``), and min.insync.replicas is
set to 1 by the proxy itself unless it is read-only. Every proxy reads it from the
start at start-up, then follows it (:mod:`.topic_follower`: a long-polling Fetch to
the leader the cluster view names, on a connection of the proxy's own); a change is
written with acks=all by an aiokafka producer started at the first change, retried
while the leadership moves (up to ``write_budget_s``), and applied here as soon as the
write is acknowledged; a write that fails raises a StoreError saying which partition,
its leader and ISR, and what would make it writable, and is counted by reason. The
key names the resource, the value is JSON (see :mod:`.state`); a tombstone deletes.

Invariants:
- ``state`` is a frozen :class:`~.state.DynamicConfigs`, replaced whole, never
  changed; ``on_change`` is called after each replacement that changed a value;
- records are applied in offset order per key: a record older than the value
  already applied for its key (our own write, applied on its acknowledgement) is
  skipped, so a value never flips back;
- until the topic has been read to its end once, ``caught_up`` is False (the
  proxy uses its static values and says so in /readyz); a later read failure keeps
  the last values, is counted and shown in ``last_error``, and reading resumes at
  the leader a fresh view names (the poller's view survives a hung rack), or after
  a back-off; a producer whose attempt failed is started afresh from the configured
  brokers, since the brokers it learnt may all be gone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NodeNotReadyError,
    NotLeaderForPartitionError,
    RequestTimedOutError,
)

from proxy.admin.state import (
    CLIENT_HEADER,
    Change,
    DynamicConfigs,
    RecordError,
    decode_record,
    encode_record,
)
from proxy.admin.topic_fetch import Record
from proxy.admin.topic_follower import FollowSettings, PartitionFollower
from proxy.admin.topic_health import ConfigTopicHealth
from proxy.admin.topic_layout import WANTED_CONFIGS, assignment
from proxy.cluster.control_conn import ControlConn
from proxy.cluster.view import ClusterView

log = logging.getLogger("rackguard.admin.store")

TOPIC_ALREADY_EXISTS = 36
# a write is tried again on these (the leadership moves), within write_budget_s
RETRIABLE = (KafkaTimeoutError, RequestTimedOutError, NotLeaderForPartitionError,
             LeaderNotAvailableError, KafkaConnectionError, NodeNotReadyError, TimeoutError)


class OwnRequests(Protocol):
    """What the reader takes from the proxy's poller (:class:`MetadataPoller`)."""

    def open_connection(self, node_id: int) -> Awaitable[ControlConn]: ...

    def refresh_now(self, configs: bool = False) -> Awaitable[bool]: ...


class StoreError(Exception):
    """A change could not be written to the config topic (the message says why)."""


@dataclass(frozen=True, slots=True)
class StoreSettings:
    topic: str
    bootstrap: tuple[str, ...]  # HOST:PORT of the real brokers
    request_timeout_s: float
    retry_backoff_s: float = 0.5
    max_backoff_s: float = 5.0
    client_id: str = "rackguard-configs"
    # how long a change waits for the config topic: Kafka fences a hung leader after
    # broker.session.timeout.ms (9 s by default), then elects another
    write_budget_s: float = 15.0
    fix_settings: bool = True  # set min.insync.replicas=1 on an old topic itself
    # the proxy's own TLS and SASL as aiokafka options (proxy.security)
    security: Mapping[str, Any] = field(default_factory=dict)
    # how long the leader holds a Fetch that finds nothing new (the follower's long poll)
    fetch_wait_s: float = 0.5
    # beyond its wait, how long a Fetch may take before its leader is treated as hung
    # (the app passes the poller's hedge delay)
    fetch_grace_s: float = 0.5


class ConfigTopicStore:
    def __init__(
        self,
        settings: StoreSettings,
        view: Callable[[], ClusterView],
        cluster: OwnRequests,
        on_change: Callable[[DynamicConfigs, DynamicConfigs, Change], None],
        on_read_failure: Callable[[], None],
        on_write_failure: Callable[[str], None] = lambda reason: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``view``: the proxy's cluster view (live brokers, racks of every broker seen,
        the config topic's leader); ``cluster``: the proxy's poller (a connection of
        the proxy's own for the reader to hold, a fresh view on demand);
        ``on_write_failure``: called with the reason of each failed write."""
        self.settings = settings
        self._view = view
        self._on_change = on_change
        self._on_read_failure = on_read_failure
        self._on_write_failure = on_write_failure
        # its settings checked (``problems``: what keeps it from taking a change)
        self.health = ConfigTopicHealth(settings.topic, settings.bootstrap[0],
                                        settings.fix_settings, view, self._admin,
                                        settings.request_timeout_s)
        self.state = DynamicConfigs()
        self.caught_up = False
        self.last_error: str | None = None
        self._offsets: dict[str, int] = {}  # the offset of the value applied per key
        self._follower = PartitionFollower(
            FollowSettings(settings.topic, 0, settings.fetch_wait_s,
                           settings.fetch_wait_s + settings.fetch_grace_s,
                           settings.retry_backoff_s, settings.max_backoff_s,
                           max(3 * settings.request_timeout_s, 5.0)),
            self._leader, cluster.open_connection, cluster.refresh_now, clock, self._absorb,
            self._mark_caught_up, self._silence)
        self._producer: AIOKafkaProducer | None = None
        self._producer_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._check_task: asyncio.Task[None] | None = None
        self._topic_ready = asyncio.Event()
        self._caught_up_event = asyncio.Event()

    # ----- lifecycle
    def start(self) -> None:
        # aiokafka logs every failed connection attempt at ERROR, again at each retry
        # while a rack is out; this store reports what matters itself (a read failure,
        # once per episode; a write that failed, in the client's answer and the log)
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
        self._task = asyncio.ensure_future(self._follow())
        self._check_task = asyncio.ensure_future(self.health.run(self._topic_ready))

    async def wait_caught_up(self, timeout: float) -> bool:
        """True once the topic has been read to its end (False if not within ``timeout``)."""
        try:
            async with asyncio.timeout(timeout):
                await self._caught_up_event.wait()
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        for task in (self._task, self._check_task):
            if task is not None:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping anyway
                    pass
        self._task = self._check_task = None
        if self._producer is not None:
            await _quietly(self._producer.stop())
            self._producer = None

    # ----- writing
    async def write(self, change: Change) -> None:
        """Write ``change`` with acks=all and apply it; raises StoreError on failure (the
        value is then not in force here; a write that timed out may still be stored)."""
        key, value = encode_record(change)
        headers = [(CLIENT_HEADER, change.client.encode())]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(self.settings.write_budget_s,
                                     self.settings.request_timeout_s)
        backoff = self.settings.retry_backoff_s
        while True:
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0.01)):
                    producer = await self._started_producer()
                    metadata = await producer.send_and_wait(self.settings.topic, value, key,
                                                            headers=headers)
                break
            except RETRIABLE as exc:
                if loop.time() + backoff >= deadline:
                    raise await self._failure(exc) from exc
                # the brokers this producer knows may all be gone (it learnt them while
                # other racks were down): start afresh from the configured brokers
                await self._drop_producer()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.settings.max_backoff_s)
            except Exception as exc:  # noqa: BLE001 - every failure is the client's answer
                raise await self._failure(exc) from exc
        self._apply(change, metadata.offset)

    async def _drop_producer(self) -> None:
        async with self._producer_lock:
            producer, self._producer = self._producer, None
        if producer is not None:  # stop() waits for its batches: bounded
            try:
                async with asyncio.timeout(self.settings.request_timeout_s):
                    await _quietly(producer.stop())
            except TimeoutError:
                log.debug("the config topic's producer did not stop in time")

    async def _failure(self, exc: BaseException) -> StoreError:
        """Why the write failed, with the partition's state as a broker tells it now."""
        client = self._producer.client if self._producer is not None else None
        reason, why = await self.health.explain(type(exc).__name__, client,
                                                self.settings.write_budget_s)
        self._on_write_failure(reason)
        return StoreError(f"rackguard could not store the value in {self.settings.topic}: "
                          f"{why}")

    def _live_racks(self) -> dict[int, str]:
        view = self._view()
        return {node: view.rack_of(node) for node in view.brokers}

    async def _started_producer(self) -> AIOKafkaProducer:
        async with self._producer_lock:
            if self._producer is None:
                await self._ensure_topic()
                ms = int(self.settings.request_timeout_s * 1000)
                producer = AIOKafkaProducer(
                    bootstrap_servers=list(self.settings.bootstrap), acks="all",
                    client_id=self.settings.client_id, request_timeout_ms=ms,
                    retry_backoff_ms=int(self.settings.retry_backoff_s * 1000),
                    enable_idempotence=False, linger_ms=0,
                    metadata_max_age_ms=max(ms * 5, 5000), **self.settings.security)
                try:
                    await producer.start()
                except BaseException:
                    await _quietly(producer.stop())
                    raise
                self._producer = producer
            return self._producer

    # ----- reading
    def _apply(self, change: Change, offset: int) -> None:
        key = change.resource.key
        if offset <= self._offsets.get(key, -1):
            return
        self._offsets[key] = offset
        old = self.state
        new = old.apply(change)
        if new.get(change.resource) == old.get(change.resource):
            self.state = new
            return
        self.state = new
        self._on_change(old, new, change)

    async def _follow(self) -> None:
        backoff = self.settings.retry_backoff_s
        while True:
            try:
                await self._ensure_topic()
                await self._follower.run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep the last values, retry
                self.last_error = f"{type(exc).__name__}: {exc}"
                self._on_read_failure()
                log.warning("config topic %s: reading failed (%s); the last values stay in "
                            "force, retrying in %.1f s", self.settings.topic, self.last_error,
                            backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.settings.max_backoff_s)

    def _admin(self) -> AIOKafkaAdminClient:
        return AIOKafkaAdminClient(
            bootstrap_servers=list(self.settings.bootstrap), client_id=self.settings.client_id,
            request_timeout_ms=int(self.settings.request_timeout_s * 1000),
            **self.settings.security)

    async def _ensure_topic(self) -> None:
        if self._topic_ready.is_set():
            return
        configs = dict(WANTED_CONFIGS)
        replicas = assignment(self._live_racks())
        # no metadata yet: Kafka's own rack-aware placement of three replicas (refused
        # where there are fewer brokers: tried again later), never a single replica
        new = (NewTopic(self.settings.topic, -1, -1, replica_assignments={0: replicas},
                        topic_configs=configs) if replicas
               else NewTopic(self.settings.topic, 1, 3, topic_configs=configs))
        admin = self._admin()
        try:
            await admin.start()
            response = await admin.create_topics([new])
        finally:
            await _quietly(admin.close())
        for entry in response.topic_errors:
            code = entry[1]
            if code == TOPIC_ALREADY_EXISTS:
                break
            if code != 0:
                raise StoreError(f"cannot create {self.settings.topic}: error {code} "
                                 f"{entry[2] if len(entry) > 2 else ''}")
            self.health.min_isr = 1
            log.info("created the config topic %s (compacted, replicas on brokers %s, "
                     "min.insync.replicas=1)", self.settings.topic, replicas)
        self._topic_ready.set()

    def _leader(self) -> int | None:
        """The config topic partition's leader as the cluster view names it."""
        row = self._view().partition(self.settings.topic, 0)
        return row[2] if row is not None and row[2] >= 0 else None

    def _silence(self, failure: str | None) -> None:
        """The leader has not answered for the follower's silence bound (counted once, shown
        until it ends), or (None) answers again."""
        if failure is None:
            log.info("config topic %s: reading again", self.settings.topic)
            self.last_error = None
            return
        self.last_error = f"no answer from its leader: {failure}"
        self._on_read_failure()
        log.warning("config topic %s: %s; the last values stay in force",
                    self.settings.topic, self.last_error)

    def _absorb(self, record: Record) -> None:
        try:
            client = next((v for k, v in record.headers if k == CLIENT_HEADER), b"")
            change = decode_record(record.key, record.value, client)
        except RecordError as exc:
            self._on_read_failure()
            log.warning("config topic %s offset %d skipped: %s", self.settings.topic,
                        record.offset, exc)
            return
        self._apply(change, record.offset)

    def _mark_caught_up(self) -> None:
        self.caught_up = True
        self._caught_up_event.set()
        log.info("config topic %s read to its end: %d topic value(s), cluster default %s",
                 self.settings.topic, len(self.state.topics),
                 self.state.cluster_default.value if self.state.cluster_default else "unset")


async def _quietly(pending: Awaitable[object]) -> None:
    try:
        await pending
    except Exception:  # noqa: BLE001 - closing a client that failed
        log.debug("closing an aiokafka client failed", exc_info=True)
