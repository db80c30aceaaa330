"""The config topic: where min.insync.racks values set through the Admin API live,
shared by every rackguard in front of the cluster.

A compacted topic with one partition (default ``__rackguard_configs``), created
when missing (cleanup.policy=compact, replication factor min(3, brokers),
min.insync.replicas 2 where the replication factor allows). Every proxy reads it
from the start at start-up, then follows it; a change is written with acks=all on
the proxy's own connections (aiokafka), and applied here as soon as the write is
acknowledged. The key names the resource, the value is JSON (see :mod:`.state`); a
tombstone deletes.

Invariants:
- ``state`` is a frozen :class:`~.state.DynamicConfigs`, replaced whole, never
  changed; ``on_change`` is called after each replacement that changed a value;
- records are applied in offset order per key: a record older than the value
  already applied for its key (our own write, applied on its acknowledgement) is
  skipped, so a value never flips back;
- until the topic has been read to its end once, ``caught_up`` is False (the
  proxy uses its static values and says so in /readyz); a later read failure keeps
  the last values, is counted and shown in ``last_error``, and reading resumes
  after a back-off (aiokafka fails over to another broker as partition leadership
  moves, e.g. when a rack hangs).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from proxy.admin.state import (
    CLIENT_HEADER,
    Change,
    DynamicConfigs,
    RecordError,
    decode_record,
    encode_record,
)

log = logging.getLogger("rackguard.admin.store")

TOPIC_ALREADY_EXISTS = 36


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
    # the proxy's own TLS and SASL as aiokafka options (proxy.security)
    security: Mapping[str, Any] = field(default_factory=dict)


class ConfigTopicStore:
    def __init__(
        self,
        settings: StoreSettings,
        broker_count: Callable[[], int],
        on_change: Callable[[DynamicConfigs, DynamicConfigs, Change], None],
        on_read_failure: Callable[[], None],
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._broker_count = broker_count
        self._on_change = on_change
        self._on_read_failure = on_read_failure
        self._wall = wall_clock
        self.state = DynamicConfigs()
        self.caught_up = False
        self.last_error: str | None = None
        self._offsets: dict[str, int] = {}  # the offset of the value applied per key
        self._read_to = 0  # the next offset to read (kept across reconnections)
        self._producer: AIOKafkaProducer | None = None
        self._producer_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._topic_ready = asyncio.Event()
        self._caught_up_event = asyncio.Event()

    # ----- lifecycle
    def start(self) -> None:
        # aiokafka logs every failed connection attempt at ERROR, again at each retry
        # while a rack is out; this store reports what matters itself (a read failure,
        # once per episode; a write that failed, in the client's answer and the log)
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
        self._task = asyncio.ensure_future(self._follow())

    async def wait_caught_up(self, timeout: float) -> bool:
        """True once the topic has been read to its end (False if not within ``timeout``)."""
        try:
            async with asyncio.timeout(timeout):
                await self._caught_up_event.wait()
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping anyway
                pass
            self._task = None
        if self._producer is not None:
            await _quietly(self._producer.stop())
            self._producer = None

    # ----- writing
    async def write(self, change: Change) -> None:
        """Write ``change`` with acks=all and apply it; raises StoreError on failure."""
        timeout = self.settings.request_timeout_s
        key, value = encode_record(change)
        try:
            async with asyncio.timeout(timeout * 3):
                producer = await self._started_producer()
                metadata = await producer.send_and_wait(
                    self.settings.topic, value, key,
                    headers=[(CLIENT_HEADER, change.client.encode())])
        except Exception as exc:  # noqa: BLE001 - every failure is the client's answer
            raise StoreError(f"rackguard could not store the value in "
                             f"{self.settings.topic}: {exc or type(exc).__name__}") from exc
        self._apply(change, metadata.offset)

    async def _started_producer(self) -> AIOKafkaProducer:
        async with self._producer_lock:
            if self._producer is None:
                await self._ensure_topic()
                ms = int(self.settings.request_timeout_s * 1000)
                producer = AIOKafkaProducer(
                    bootstrap_servers=list(self.settings.bootstrap), acks="all",
                    client_id=self.settings.client_id, request_timeout_ms=ms,
                    retry_backoff_ms=int(self.settings.retry_backoff_s * 1000),
                    enable_idempotence=False, linger_ms=0, **self.settings.security)
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
                await self._read_forever()
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

    async def _ensure_topic(self) -> None:
        if self._topic_ready.is_set():
            return
        brokers = max(1, self._broker_count())
        rf = min(3, brokers)
        configs = {"cleanup.policy": "compact"}
        if rf >= 3:
            configs["min.insync.replicas"] = "2"
        admin = AIOKafkaAdminClient(
            bootstrap_servers=list(self.settings.bootstrap), client_id=self.settings.client_id,
            request_timeout_ms=int(self.settings.request_timeout_s * 1000),
            **self.settings.security)
        try:
            await admin.start()
            response = await admin.create_topics(
                [NewTopic(self.settings.topic, 1, rf, topic_configs=configs)])
        finally:
            await _quietly(admin.close())
        for entry in response.topic_errors:
            code = entry[1]
            if code == TOPIC_ALREADY_EXISTS:
                break
            if code != 0:
                raise StoreError(f"cannot create {self.settings.topic}: error {code} "
                                 f"{entry[2] if len(entry) > 2 else ''}")
            log.info("created the config topic %s (compacted, replication factor %d)",
                     self.settings.topic, rf)
        self._topic_ready.set()

    async def _read_forever(self) -> None:
        tp = TopicPartition(self.settings.topic, 0)
        ms = int(self.settings.request_timeout_s * 1000)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=list(self.settings.bootstrap), client_id=self.settings.client_id,
            group_id=None, enable_auto_commit=False, request_timeout_ms=ms,
            fetch_max_wait_ms=100, retry_backoff_ms=int(self.settings.retry_backoff_s * 1000),
            metadata_max_age_ms=max(ms * 5, 5000), **self.settings.security)
        await consumer.start()
        try:
            consumer.assign([tp])
            if self._read_to:
                consumer.seek(tp, self._read_to)
            else:
                await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            answered = self._wall()  # when the leader last answered a fetch
            while True:
                batches = await consumer.getmany(tp, timeout_ms=500, max_records=1000)
                for record in batches.get(tp, ()):
                    self._absorb(record)
                    self._read_to = record.offset + 1
                if not self.caught_up and await consumer.position(tp) >= end:
                    self._mark_caught_up()
                polled = consumer.last_poll_timestamp(tp)
                if polled is not None:
                    answered = max(answered, polled / 1000)
                self._check_fresh(self._wall() - answered)
        finally:
            await _quietly(consumer.stop())

    def _check_fresh(self, silent_s: float) -> None:
        """A fetch answers at least every 100 ms while the leader is reachable; silence
        beyond a few request timeouts is a read failure (counted once, shown until it
        ends). aiokafka keeps retrying and follows the leadership meanwhile."""
        limit = max(3 * self.settings.request_timeout_s, 5.0)
        if silent_s <= limit:
            if self.last_error is not None:
                log.info("config topic %s: reading again", self.settings.topic)
            self.last_error = None
        elif self.last_error is None:
            self.last_error = f"no answer from its leader for {silent_s:.0f} s"
            self._on_read_failure()
            log.warning("config topic %s: %s; the last values stay in force",
                        self.settings.topic, self.last_error)

    def _absorb(self, record: Any) -> None:
        try:
            client = next((v for k, v in record.headers or () if k == CLIENT_HEADER), b"")
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
