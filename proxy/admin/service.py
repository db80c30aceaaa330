"""The admin-configs feature assembled: the config topic, the request hooks, the
metrics, and the rule the Produce hook applies.

The app gives it the static rule (rackguard's own settings) and gets back the
effective one (:func:`.rules.effective_rule`) whenever a dynamic value changes
(``on_rule``): the enforcer's settings are replaced whole, never changed.

Invariant: every applied change is logged (old value, new value, resource,
client) and counted in ``rackguard_config_changes_total{resource_type}`` once
per proxy that applies it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

from protocol.apis import ApiKey
from proxy.admin.interceptor import ConfigInterceptor
from proxy.admin.rules import NAME, ClusterFacts, StaticValues, effective_rule
from proxy.admin.state import Change, DynamicConfigs
from proxy.admin.store import ConfigTopicStore, OwnRequests, StoreSettings
from proxy.cluster.view import ClusterView
from proxy.enforce.policy import RackRule
from proxy.ops.health import Health
from proxy.relay.server import ProxyServer
from proxy.security.kafka_clients import aiokafka_options
from proxy.settings import Settings

log = logging.getLogger("rackguard.admin")

CREATE_TOPICS = 19
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44


class AdminConfigs:
    def __init__(
        self,
        settings: Settings,
        registry: CollectorRegistry,
        view: Callable[[], ClusterView],
        static: Callable[[], StaticValues],
        on_rule: Callable[[], None],
        cluster: OwnRequests,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._view = view
        self._static = static
        self._on_rule = on_rule
        self.changes = Counter(
            "rackguard_config_changes",
            "min.insync.racks (and per-dimension) changes applied from the config topic "
            "(Admin API)",
            ["resource_type"], registry=registry)
        self.read_failures = Counter(
            "rackguard_config_topic_read_failures",
            "Failed reads of the config topic, and records in it rackguard could not read",
            registry=registry)
        self.write_failures = Counter(
            "rackguard_config_store_write_failures",
            "min.insync.racks changes the config topic did not take, by reason",
            ["reason"], registry=registry)
        self.store: ConfigTopicStore | None = None
        if settings.config_topic:
            self.store = ConfigTopicStore(
                StoreSettings(settings.config_topic, settings.upstream,
                              # the writer's and the topic check's requests: at least 1 s
                              max(settings.admin_request_timeout_ms, 1000) / 1000,
                              settings.upstream_backoff_ms / 1000 or 0.1,
                              max(settings.upstream_backoff_max_ms / 1000, 0.1),
                              security=aiokafka_options(settings),
                              fix_settings=not settings.config_topic_read_only,
                              # a Fetch later than its wait by the hedge delay: a hung leader
                              fetch_grace_s=settings.metadata_hedge_delay_ms / 1000),
                view, cluster, self._changed, self.read_failures.inc,
                on_write_failure=lambda reason: self.write_failures.labels(reason).inc())
        refusal = None
        if settings.config_topic_read_only:
            refusal = (f"{NAME} is read-only through the Admin API here "
                       "(config_topic_read_only); change it in rackguard's settings")
        self.interceptor = ConfigInterceptor(self.store, static, self._facts, wall_clock,
                                             refusal)

    def install(self, server: ProxyServer) -> None:
        """Install the config API hooks (before the server starts)."""
        hooks = self.interceptor
        server.add_request_hooks({
            ApiKey.DESCRIBE_CONFIGS: hooks.describe,
            ALTER_CONFIGS: hooks.alter,
            INCREMENTAL_ALTER_CONFIGS: hooks.alter,
            CREATE_TOPICS: hooks.create,
        })

    async def start(self, wait_s: float) -> None:
        """Start following the config topic; wait up to ``wait_s`` for its end, so that a
        restarted proxy serves with the values in force (else: static values meanwhile)."""
        if self.store is None:
            return
        self.store.start()
        if not await self.store.wait_caught_up(wait_s):
            log.warning("config topic %s not read to its end within %.1f s: serving with the "
                        "static min.insync.racks values until it is (/readyz: not ready)",
                        self.store.settings.topic, wait_s)

    async def stop(self) -> None:
        if self.store is not None:
            await self.store.stop()

    @property
    def dynamic(self) -> DynamicConfigs:
        return self.store.state if self.store is not None else DynamicConfigs()

    def effective(self, static: RackRule) -> RackRule:
        """The rule in force: ``static`` with the dynamic values over it."""
        return effective_rule(static, self.dynamic)

    def health(self, base: Health) -> Health:
        """/readyz with the config topic: not ready until it has been read to its end
        once; a later read failure is shown (the last values stay in force)."""
        store = self.store
        if store is None or not base.ok:
            return base
        if not store.caught_up:
            why = f": {store.last_error}" if store.last_error else ""
            return Health(False, f"config topic {store.settings.topic} not read to its end "
                          f"yet, static min.insync.racks values in force{why}")
        reason = base.reason
        if store.last_error is not None:
            reason += (f"; config topic {store.settings.topic}: reading failed "
                       f"({store.last_error}), last values in force")
        for problem in store.health.problems:  # old settings: ready, but say what to change
            reason += f"; {problem}"
        return Health(True, reason)

    def _facts(self) -> ClusterFacts:
        view = self._view()
        return ClusterFacts(len(view.rack_names()), tuple(view.rackless_brokers()),
                            self._settings.observe, self._static().rule.dimensions,
                            tuple(sorted(view.rack_names())))

    def _changed(self, old: DynamicConfigs, new: DynamicConfigs, change: Change) -> None:
        before = old.get(change.resource)
        after = new.get(change.resource)
        log.warning("%s of %s: %s -> %s by %s", change.resource.config, change.resource,
                    before.value if before else "unset", after.value if after else "unset",
                    change.client or "?")
        self.changes.labels(change.resource.kind).inc()
        self._on_rule()
