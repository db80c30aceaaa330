"""The config topic's own health, for the store: its settings checked at start (and
fixed where the proxy may), and the partition's state when a write failed.

Invariant: ``problems`` holds, at any time, the texts of what keeps the topic from
taking a change while only one rack serves, as last read (empty when nothing is
wrong or nothing was read yet); each text is logged once when it first appears.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient

from proxy.admin import topic_check
from proxy.admin.topic_layout import PartitionLayout, Problem, explain_failure, problems
from proxy.cluster.view import ClusterView

log = logging.getLogger("rackguard.admin.store")

CHECK_INTERVAL_S = 30.0


class ConfigTopicHealth:
    def __init__(self, topic: str, bootstrap_hint: str, may_fix: bool,
                 view: Callable[[], ClusterView], admin: Callable[[], AIOKafkaAdminClient],
                 timeout_s: float) -> None:
        """``bootstrap_hint``: a broker address for the commands the texts suggest;
        ``may_fix``: set min.insync.replicas itself; ``admin``: a new (unstarted) aiokafka
        admin client on the configured brokers."""
        self.topic = topic
        self._hint = bootstrap_hint
        self._may_fix = may_fix
        self._view = view
        self._admin = admin
        self._timeout = timeout_s
        self.problems: tuple[str, ...] = ()
        self.min_isr: int | None = None  # the topic's min.insync.replicas, as last known

    async def run(self, ready: asyncio.Event) -> None:
        """Once ``ready`` (the topic exists), then every CHECK_INTERVAL_S while
        something is wrong or the topic could not be read."""
        await ready.wait()
        while True:
            try:
                found = await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - checked again later
                log.debug("config topic %s: check failed: %s", self.topic, exc)
                found = None
            if found == ():
                return
            await asyncio.sleep(CHECK_INTERVAL_S)

    async def check_once(self) -> tuple[str, ...] | None:
        """Read the topic's layout, fix what the proxy may, set ``problems``; None: the
        topic could not be read."""
        admin = self._admin()
        try:
            await admin.start()
            layout = await topic_check.read_layout(admin, self.topic)
            if layout is None:
                return None
            self.min_isr = layout.min_insync_replicas
            view = self._view()
            found = problems(self.topic, layout, view.rack_of, view.rack_names(), self._hint)
            left = [await self._fix(admin, p) for p in found]
        finally:
            await _quietly(admin.close())
        texts = tuple(t for t in left if t is not None)
        for text in texts:
            if text not in self.problems:
                log.warning("%s", text)
        self.problems = texts
        return texts

    async def _fix(self, admin: AIOKafkaAdminClient, problem: Problem) -> str | None:
        """Set the problem's configs when allowed; the text left to show (None: fixed)."""
        if problem.fix is None:
            return problem.text
        if not self._may_fix:
            return problem.text + " (this proxy is read-only: it does not change it)"
        refusal = await topic_check.set_configs(admin, self.topic, problem.fix)
        if refusal is not None:
            return f"{problem.text} (rackguard could not set it: {refusal})"
        self.min_isr = int(problem.fix.get("min.insync.replicas", self.min_isr or 1))
        log.warning("config topic %s: set %s (it had old settings: it would take no "
                    "change while only one rack serves)", self.topic,
                    ", ".join(f"{k}={v}" for k, v in problem.fix.items()))
        return None

    async def explain(self, error: str, client: Any, budget_s: float) -> tuple[str, str]:
        """(reason, message) for a failed write: ``error``, the exception's class name;
        ``client``: the producer's started aiokafka client, or None."""
        view = self._view()
        layout = await self._layout_now(client)
        return explain_failure(self.topic, error, layout, view.rack_of, set(view.brokers),
                               budget_s)

    async def _layout_now(self, client: Any) -> PartitionLayout | None:
        """The partition as a broker describes it now (None: none answered in time):
        asked through ``client``, else through a new client on the configured brokers."""
        if client is not None:
            layout = await topic_check.ask_layout(client, self.topic, self._timeout,
                                                  self.min_isr)
            if layout is not None:
                return layout
        admin = self._admin()
        try:
            async with asyncio.timeout(2 * self._timeout):
                await admin.start()
                return await topic_check.ask_layout(
                    admin._client, self.topic, self._timeout, self.min_isr)  # noqa: SLF001
        except Exception:  # noqa: BLE001 - no broker answered: said so in the message
            return None
        finally:
            await _quietly(admin.close())


async def _quietly(pending: Awaitable[object]) -> None:
    try:
        await pending
    except Exception:  # noqa: BLE001 - closing a client that failed
        log.debug("closing an aiokafka client failed", exc_info=True)
