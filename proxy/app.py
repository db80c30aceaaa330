"""The assembled proxy: server, cluster view, poller, rack enforcement, reloads.

Invariants: the pieces get their dependencies (settings, clock, metrics
registry) from here, never from globals; start-up refuses a rack rule that
cannot hold (min.insync.racks > 1 while a broker has no rack), and a reload
that would introduce one is refused while the old settings stay in force.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from protocol.addresses import BrokerAddress
from protocol.apis import api_name
from proxy.admin.rules import StaticValues
from proxy.admin.service import AdminConfigs
from proxy.cluster.poller import MetadataPoller, PollError
from proxy.cluster.upstream_health import UpstreamHealth
from proxy.cluster.view import ClusterView, ClusterViewStore
from proxy.cluster.watch import WatchedTopics
from proxy.cluster.watch_hooks import watch_hooks
from proxy.enforce.dimensions import RackDimensions
from proxy.enforce.enforcement import EnforcementSettings, RackEnforcer
from proxy.enforce.metrics import EnforcementMetrics
from proxy.enforce.policy import RackRule
from proxy.enforce.recheck import AckRecheck
from proxy.ledger.recorder import ledger_from_settings
from proxy.locality.hooks import RackHints
from proxy.locality.metrics import LocalityMetrics
from proxy.locality.source import RackSourceError, resolve_client_rack
from proxy.losswatch.report import ledger_sink
from proxy.losswatch.watch import loss_watch_from_settings
from proxy.ops.config_watch import FileWatch
from proxy.ops.health import Health, LoopProbe, readiness
from proxy.ops.http_endpoints import OpsHttpServer
from proxy.ops.kip_metrics import RackCoverageCollector
from proxy.ops.metrics import ProxyMetrics
from proxy.placement.creation_hook import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    CreationGuard,
    GuardSettings,
)
from proxy.placement.metrics import PlacementCollector
from proxy.relay.hook_chain import chain
from proxy.relay.server import ProxyServer
from proxy.settings import Settings, SettingsError
from proxy.streams.metrics import StreamsCollector, streams_document
from proxy.streams.watch import JOIN_GROUP, STREAMS_GROUP_HEARTBEAT, SYNC_GROUP, StreamsWatch

log = logging.getLogger("rackguard")

# Settings a SIGHUP reload applies; any other change needs a restart.
RELOADABLE = frozenset({
    "min_insync_racks", "topic_min_insync_racks", "topic_prefix_min_insync_racks",
    "error_mode", "not_enough_racks_code", "observe", "max_metadata_age_ms", "fail_open",
    "unknown_partition_wait_ms", "log_level",
    "rack_dimensions", "min_insync_racks_by_dimension", "topic_min_insync_racks_by_dimension",
})


class StartupError(Exception):
    """A condition under which the proxy must not start; the message is one line."""


def rack_rule(settings: Settings) -> RackRule:
    prefixes = tuple(sorted(settings.topic_prefix_min_insync_racks.items(),
                            key=lambda item: -len(item[0])))
    by_topic: dict[str, dict[str, int]] = {}
    for key, n in settings.topic_min_insync_racks_by_dimension.items():
        topic, _, dimension = key.rpartition("/")
        by_topic.setdefault(topic, {})[dimension] = n
    return RackRule(
        default_min_racks=settings.min_insync_racks,
        topic_min_racks=dict(settings.topic_min_insync_racks),
        prefix_min_racks=prefixes,
        max_metadata_age_s=settings.max_metadata_age_ms / 1000,
        fail_open=settings.fail_open,
        dimensions=(RackDimensions.parse(settings.rack_dimensions)
                    if settings.rack_dimensions else None),
        dimension_minimums=dict(settings.min_insync_racks_by_dimension) or None,
        topic_dimension_minimums=by_topic or None,
    )


def enforcement_settings(settings: Settings) -> EnforcementSettings:
    return EnforcementSettings(
        rule=rack_rule(settings),
        dedicated_code=settings.not_enough_racks_code if settings.error_mode == "dedicated"
        else None,
        observe=settings.observe,
        unknown_wait_s=settings.unknown_partition_wait_ms / 1000,
    )


def check_racks(rule: RackRule, view: ClusterView, observe: bool) -> list[str]:
    """Problems of ``rule`` on ``view``: errors (raised by callers) unless observing.

    Returns warnings; raises StartupError for what the KIP calls an error.
    """
    warnings = []
    highest = max(rule.all_values())
    rackless = view.rackless_brokers()
    if highest > 1 and rackless:
        text = (f"min.insync.racks={highest} but broker(s) {rackless} have no rack "
                "(set broker.rack, or give --broker-rack ID=RACK)")
        if not observe:
            raise StartupError(text)
        warnings.append(text + " [observe mode: not enforced]")
    racks = len(view.rack_names())
    if view.brokers and highest > racks:
        warnings.append(f"min.insync.racks={highest} exceeds the {racks} rack(s) in the "
                        "cluster: every acks=all produce to such topics will be rejected")
    return warnings


class Rackguard:
    def __init__(
        self,
        settings: Settings,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
        rack_source: Callable[[Settings], str | None] = resolve_client_rack,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self._rack_source = rack_source
        self.streams: StreamsWatch | None = None  # set at start unless streams_audit=off
        self.rack_hints: RackHints | None = None  # set at start when client_rack is
        self.metrics = ProxyMetrics(registry)
        registry = self.metrics.registry
        self.store = ClusterViewStore(clock, settings.broker_racks,
                                      settings.broker_racks_override)
        self.refresh_failures = Counter(
            "rackguard_metadata_refresh_failures",
            "Failed metadata refreshes of the proxy's own poller",
            registry=registry,
        )
        self.rackless = Gauge("rackguard_rackless_brokers",
                              "Brokers in the cluster view that report no rack",
                              registry=registry)
        self.server = ProxyServer(settings, self.metrics,
                                  metadata_observers=[self._observe_metadata])
        self.broker_up = Gauge(
            "rackguard_upstream_broker_up",
            "1 while a broker answers the proxy's own requests, 0 while it is backed off "
            "after failing one", ["broker", "rack"], registry=registry)
        self.poll_duration = Gauge(
            "rackguard_metadata_poll_duration_seconds",
            "How long the proxy's last successful metadata poll took, failovers and hedges "
            "included", registry=registry)
        # The topics this proxy's clients use (view_scope "watched"), which the view and
        # the poller are scoped to; None: the whole cluster. Other parts (the ledger's
        # snapshots) read ``watched.names()``.
        self.watched: WatchedTopics | None = None
        if settings.view_scope == "watched":
            self.watched = WatchedTopics(clock, settings.watch_idle_ms / 1000,
                                         lambda topic_id: self.store.view.topic_ids.get(topic_id))
            if settings.config_topic:  # its reader takes the leader from the view
                self.watched.pin(settings.config_topic)
        if self.watched is not None:
            watched = self.watched
            Gauge("rackguard_watched_topics",
                  "Topics in the watched set the view and the polls are scoped to",
                  registry=registry).set_function(lambda: len(watched))
        own_bytes = Counter(
            "rackguard_own_request_bytes",
            "Bytes of the proxy's own requests to the cluster (metadata and config polls), "
            "by API and direction (sent, received)", ["api", "direction"], registry=registry)
        self.poller = MetadataPoller(settings, self.store, self._learn_addresses,
                                     self.refresh_failures.inc, clock,
                                     on_health=self._report_upstream_health,
                                     watched=self.watched,
                                     count_bytes=lambda api, direction, n: own_bytes.labels(
                                         api_name(api), direction).inc(n))
        # The decision ledger (None unless ledger_dir is set): rows and snapshots are
        # written by its own thread, never on the event loop.
        self.ledger = ledger_from_settings(settings, registry, clock, lambda: self.store.view,
                                           lambda: self.enforcer.settings.rule)
        self.enforcer = RackEnforcer(
            enforcement_settings(settings),
            self.store,
            self.poller.refresh_now,
            self.server.produce_transform,
            EnforcementMetrics(registry, clock),
            clock,
            self.ledger,
            self.watched,
            lambda: self.poller.refresh_now(configs=True),
        )
        self.server.set_produce_hook(self.enforcer)
        if settings.ack_recheck_after_ms > 0:  # withdraws acks the shrunk ISR gave
            self.enforcer.recheck_answers(AckRecheck(
                settings.ack_recheck_after_ms / 1000, self.store, self.poller.refresh_now,
                clock, settings.unknown_partition_wait_ms / 1000, registry))
        # The loss watch (None when off): reads every acknowledged Produce answer, checks
        # the leader after leader changes, reports acknowledged records the cluster lost.
        self.loss_watch = loss_watch_from_settings(settings, registry, clock,
                                                   lambda: self.store.view,
                                                   self.poller.call_broker)
        if self.loss_watch is not None:
            self.enforcer.watch_answers(self.loss_watch.expect)
            self.store.subscribe(self.loss_watch.view_changed)
            if self.ledger is not None:  # each confirmed loss is a ledger row as well
                self.loss_watch.reporter.add_sink(ledger_sink(self.ledger.record_loss))
        # min.insync.racks set through the Admin API (the config topic): the enforcer's
        # rule is the static one (file/flags) with the dynamic values over it.
        self._static = StaticValues(self.enforcer.settings.rule,
                                    "min_insync_racks" in settings.model_fields_set)
        self.admin = AdminConfigs(settings, registry, lambda: self.store.view,
                                  lambda: self._static, self._apply_dynamic, self.poller)
        self.admin.install(self.server)
        # Rendered by /metrics after the registry, not registered in it: its own text
        # writer is ~20x faster than prometheus_client's for 100,000s of series.
        self.coverage = RackCoverageCollector(
            lambda: self.store.view, lambda: self.enforcer.settings.rule, clock,
            settings.metrics_partition_series)
        self.placement = PlacementCollector(
            lambda: self.store.view, lambda: self.enforcer.settings.rule)
        guarded = Counter(
            "rackguard_placement_guard_topics",
            "Topics with explicit replica assignments checked against min.insync.racks by "
            "the creation guard, by API and decision (refused, observed_refusal, passed)",
            ["api", "decision"], registry=registry)
        guard = CreationGuard(lambda: self.store.view, self._guard_settings,
                              lambda api, decision: guarded.labels(api, decision).inc())
        # After any other hook of these APIs (admin configs): it sees what the guard forwards.
        for key in (CREATE_TOPICS, CREATE_PARTITIONS):
            earlier = self.server.request_hook(key)
            self.server.set_request_hook(key, guard if earlier is None else chain(guard, earlier))
        self._ops_http: OpsHttpServer | None = None
        self._draining = False  # set on SIGTERM: /readyz answers not ready from then on
        self._background: set[asyncio.Task[None]] = set()
        self.store.subscribe(self._on_view_change)

    def _apply_dynamic(self) -> None:
        """A dynamic value changed: the enforcer's settings are replaced with the new rule."""
        rule = self.admin.effective(self._static.rule)
        self.enforcer.replace_settings(replace(self.enforcer.settings, rule=rule))

    def _guard_settings(self) -> GuardSettings:
        settings = self.enforcer.settings
        return GuardSettings(settings.rule.required_racks, settings.observe)

    def _report_upstream_health(self, health: UpstreamHealth) -> None:
        self.poll_duration.set(self.poller.last_poll_s)
        for broker, up in health.states().items():
            self.broker_up.labels(str(broker.node_id), broker.rack or "").set(1 if up else 0)

    # ----- view feeding
    def _observe_metadata(self, frame: memoryview, version: int) -> None:
        self.poller.feeder.absorb_soon(frame, version)

    def _learn_addresses(self, brokers: tuple[BrokerAddress, ...]) -> None:
        self.server.book.learn(brokers)
        self._open_listeners(b.node_id for b in brokers)

    def _on_view_change(self, old: ClusterView, new: ClusterView) -> None:
        rackless = new.rackless_brokers()
        self.rackless.set(len(rackless))
        appeared = set(rackless) - set(old.rackless_brokers()) if old.brokers else set()
        rule = self.enforcer.settings.rule
        if appeared and rule.enabled:
            level = logging.WARNING if self.enforcer.settings.observe else logging.ERROR
            log.log(level, "broker(s) %s joined without a rack while min.insync.racks is up to "
                    "%d: their replicas count as the rack \"\"", sorted(appeared),
                    max(rule.all_values()))

    # ----- lifecycle
    async def _install_rack_hints(self) -> None:
        """Find client_rack (a file or command may be slow: off the loop) and, when there
        is one, hook Fetch, JoinGroup and ConsumerGroupHeartbeat (docs/locality.md)."""
        try:
            rack = await asyncio.to_thread(self._rack_source, self.settings)
        except RackSourceError as exc:
            raise StartupError(str(exc)) from None
        if rack is None:
            return
        mode = self.settings.client_rack_mode
        def view() -> ClusterView:
            return self.store.view

        self.rack_hints = RackHints(rack, mode == "fill", view,
                                    LocalityMetrics(self.metrics.registry, rack, mode, view))
        self.store.subscribe(self.rack_hints.view_changed)
        self.server.add_request_hooks(self.rack_hints.request_hooks())
        log.info("client rack %r (%s): %s", rack, mode,
                 "filled into Fetch, JoinGroup and ConsumerGroupHeartbeat requests that name "
                 "none" if mode == "fill" else "fetch bytes counted by locality, nothing changed")

    def _install_watch_hooks(self) -> None:
        """Topics named by Metadata and admin requests join the watched set (after every
        other hook is installed: the watch hook goes first in each API's chain)."""
        if self.watched is None:
            return
        hooks = watch_hooks(self.watched, self.server.request_hook,
                            self.server.rewriter.transforms())
        for api_key, hook in hooks.items():
            self.server.set_request_hook(api_key, hook)

    def _install_streams_watch(self) -> None:
        """Read Kafka Streams' JoinGroup and SyncGroup as they pass (docs/streams.md):
        before any other hook of those APIs (the rack fill), so it reads what the client
        sent."""
        if self.settings.streams_audit != "on":
            return
        rack = self.rack_hints.rack if self.rack_hints is not None else None
        self.streams = StreamsWatch(rack, self.settings.streams_zone_tag,
                                    self.settings.streams_tags)
        self.metrics.registry.register(StreamsCollector(self.streams))
        watch = self.streams
        for key, hook in ((JOIN_GROUP, watch.join_group), (SYNC_GROUP, watch.sync_group),
                          (STREAMS_GROUP_HEARTBEAT, watch.streams_group_heartbeat)):
            earlier = self.server.request_hook(key)
            self.server.set_request_hook(key, hook if earlier is None else chain(hook, earlier))

    async def start(self) -> None:
        if self.settings.security_protocol in ("SSL", "SASL_SSL") and \
                self.settings.ssl_skip_hostname_check:
            log.warning("ssl_skip_hostname_check: brokers' certificates are not checked "
                        "against their host names (only against ssl_cafile): anyone with a "
                        "certificate from that CA can pose as a broker")
        await self._install_rack_hints()
        self._install_streams_watch()
        self._install_watch_hooks()
        try:
            await self.poller.poll_once()
        except PollError as exc:
            self.refresh_failures.inc()
            log.warning("cluster metadata unavailable at start (%s); serving anyway: acks=all "
                        "produces to rack-checked topics fail closed until it arrives", exc)
        else:
            for warning in check_racks(self.enforcer.settings.rule, self.store.view,
                                       self.settings.observe):
                log.warning("%s", warning)
            self._learn_addresses_from_view()
        # polling from here on: the config topic's reader takes its leader from the view
        # (one the store has just created is in the view after a refresh)
        self.poller.start()
        await self.admin.start(self._config_wait_s())
        await self.server.start()
        await self._listeners_of_view()
        self._keep(self._housekeeping())
        if self.loss_watch is not None:
            self._keep(self.loss_watch.run())
        if self.ledger is not None:
            self.ledger.start()
        if self.settings.metrics_port is not None:
            self._ops_http = OpsHttpServer(
                self.settings.metrics_host or self.settings.listen_host,
                self.settings.metrics_port, self.metrics_text,
                alive=LoopProbe(asyncio.get_running_loop()), ready=self.readiness,
                documents=self._documents())
            self._ops_http.start()
            log.info("metrics on http://%s:%d/metrics (also /healthz, /readyz)",
                     self.settings.advertised, self.metrics_port)

    def _documents(self) -> dict[str, Callable[[], bytes]]:
        watch = self.streams
        return {} if watch is None else {"/streams": lambda: streams_document(watch)}

    def _config_wait_s(self) -> float:
        """How long start-up waits for the config topic before serving on static values:
        two failed attempts, as a metadata poll may take."""
        return 2 * (self.settings.admin_connect_timeout_ms
                    + self.settings.admin_request_timeout_ms) / 1000

    def metrics_text(self) -> bytes:
        """The /metrics body: the registry's counters, then rack coverage, and placement
        when the view is the whole cluster's (view_scope "cluster")."""
        text = generate_latest(self.metrics.registry) + self.coverage.exposition()
        if self.watched is None:
            text += self.placement.exposition()
        return text

    def readiness(self) -> Health:
        """Ready: the last metadata poll succeeded, the view is young enough and the config
        topic has been read to its end once; not while draining."""
        if self._draining:
            return Health(False, "draining: stopping after the requests in flight")
        return self.admin.health(readiness(self.store.view, self.poller.last_error,
                                           self.clock(),
                                           self.enforcer.settings.rule.max_metadata_age_s))

    @property
    def metrics_port(self) -> int | None:
        return self._ops_http.port if self._ops_http is not None else None

    async def _listeners_of_view(self) -> None:
        """The listeners of the brokers known at start are open when ``start`` returns
        (a watched view's first poll is quick: they may still be binding)."""
        try:
            await self.server.ensure_listeners(list(self.store.view.brokers))
        except OSError as exc:
            log.error("opening broker listeners failed: %s", exc)

    def _learn_addresses_from_view(self) -> None:
        self._open_listeners(self.store.view.brokers)

    def _open_listeners(self, node_ids: Iterable[int]) -> None:
        """Open the listeners of brokers that have none yet, in a task this object keeps
        (the loop holds tasks only weakly) until it ends; a failure is logged."""
        missing = [n for n in node_ids if not self.server.has_listener(n)]
        if not missing:
            return
        task = asyncio.ensure_future(self.server.ensure_listeners(missing))
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _keep(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    async def _housekeeping(self) -> None:
        """Every few seconds: look for a new certificate; summarise bad input."""
        tls = self.server.tls
        interval = self.settings.tls_reload_interval_ms / 1000 if tls is not None else None
        flush_every = self.settings.bad_input_log_interval_ms / 1000
        step = min(interval or flush_every, flush_every)
        since_flush = 0.0
        while True:
            await asyncio.sleep(step)
            if tls is not None:
                tls.check()
            since_flush += step
            if since_flush >= flush_every:
                self.server.bad_input.flush()
                since_flush = 0.0

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("opening broker listeners failed: %s", task.exception())

    async def stop(self) -> str:
        """Drain the clients' connections first (their in-flight decisions still have the
        poller and the config topic), then stop the rest. Returns the drain's outcome."""
        self._draining = True
        result = await self.server.stop()
        for task in list(self._background):
            task.cancel()
        await self.admin.stop()
        await self.poller.stop()
        if self.ledger is not None:
            await asyncio.to_thread(self.ledger.stop)  # writes what is queued, then closes
        if self._ops_http is not None:
            await asyncio.to_thread(self._ops_http.stop)  # waits for its serve loop
            self._ops_http = None
        return result

    def reload(self, new: Settings) -> bool:
        """Apply the reloadable part of ``new``; refuse it whole if it cannot hold."""
        candidate = enforcement_settings(new)
        try:
            warnings = check_racks(candidate.rule, self.store.view, new.observe)
        except StartupError as exc:
            log.error("reload refused, previous settings stay in force: %s", exc)
            return False
        for warning in warnings:
            log.warning("%s", warning)
        ignored = sorted(
            name for name in type(new).model_fields
            if name not in RELOADABLE and getattr(new, name) != getattr(self.settings, name)
        )
        if ignored:
            log.warning("reload: %s change(s) need a restart and were not applied",
                        ", ".join(ignored))
        self._static = StaticValues(candidate.rule, "min_insync_racks" in new.model_fields_set)
        self.enforcer.replace_settings(
            replace(candidate, rule=self.admin.effective(candidate.rule)))
        logging.getLogger("rackguard").setLevel(new.log_level)
        log.info("reload applied: min.insync.racks=%d, overrides %s, prefixes %s, "
                 "error_mode=%s, observe=%s", new.min_insync_racks,
                 dict(new.topic_min_insync_racks), dict(new.topic_prefix_min_insync_racks),
                 new.error_mode, new.observe)
        return True

    def reload_from(self, load: Callable[[], Settings]) -> None:
        """SIGHUP, or a new content of the settings file: the certificates and the
        reloadable settings; settings that do not load are refused, the old stay."""
        if self.server.tls is not None:
            self.server.tls.reload()
        try:
            self.reload(load())
        except SettingsError as exc:
            log.error("reload refused: %s", exc)

    def watch_config(self, path: Path, load: Callable[[], Settings]) -> None:
        """Reload when the settings file's content changes (a mounted ConfigMap), checked
        every ``config_watch_interval_ms``; 0 turns the watch off."""
        interval = self.settings.config_watch_interval_ms / 1000
        if interval <= 0:
            return
        watch = FileWatch(path)

        async def watching() -> None:
            while True:
                await asyncio.sleep(interval)
                if watch.changed():
                    log.info("%s changed: reloading", path)
                    self.reload_from(load)

        self._keep(watching())

    async def run_until_signalled(self, load: Callable[[], Settings],
                                  config_file: Path | None = None) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, lambda: self.reload_from(load))
        await self.start()
        if config_file is not None:
            self.watch_config(config_file, load)
        await stop.wait()
        log.info("signal received: draining (up to %.1f s for in-flight requests)",
                 self.settings.drain_timeout_ms / 1000)
        await self.stop()
