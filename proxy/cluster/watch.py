"""The watched set: the topics this sidecar's clients use, which its view is scoped to.

A topic joins when a request that passes through names it (a Produce the rule decides,
a Fetch, a Metadata request for named topics, an admin request) and leaves when none
has named it for ``idle_s`` (``watch_idle_ms``); a pinned topic (the config topic,
which the proxy itself reads) never leaves. The poller asks Metadata and
DescribeConfigs for these topics only (``view_scope = "watched"``), so what a sidecar
costs the cluster, and itself, grows with its clients' topics, never with the
cluster's size. Other parts (the ledger's snapshots) read :meth:`WatchedTopics.names`.

Invariants: the clock is injected; :meth:`use` costs one dict write per named topic and
allocates nothing for a topic already watched; :meth:`names` returns the same frozenset
object until a topic joins or leaves, so a reader can compare it by identity. Topic ids
(Produce v13+, Fetch v13+, Metadata v10+) are resolved to names through ``resolve``
(the view's ids); an id the view does not know joins nothing (a client learns ids from
a Metadata answer, whose request named the topic).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

log = logging.getLogger("rackguard.cluster")


def _no_ids(topic_id: bytes) -> str | None:
    return None


class WatchedTopics:
    """Topic name -> when a request last named it; expiring after ``idle_s``."""

    def __init__(self, clock: Callable[[], float], idle_s: float,
                 resolve: Callable[[bytes], str | None] = _no_ids) -> None:
        self._clock = clock
        self._idle_s = idle_s
        self._resolve = resolve
        self._last_used: dict[str, float] = {}
        self._names: frozenset[str] = frozenset()
        self.joined = 0  # topics that joined, ever (a counter for metrics)
        self.left = 0  # topics that expired, ever

    def use(self, keys: Iterable[str | bytes]) -> bool:
        """A request named these topics (names or ids); True if one of them is new."""
        now = self._clock()
        last_used = self._last_used
        new = False
        for key in keys:
            name = key if isinstance(key, str) else self._resolve(key)
            if name is None:
                continue
            if name not in last_used:
                new = True
                self.joined += 1
            last_used[name] = now
        if new:
            self._names = frozenset(last_used)
        return new

    def pin(self, name: str) -> None:
        """Watch ``name`` for good (the config topic: the proxy's own reader follows it)."""
        self.use([name])
        self._last_used[name] = float("inf")

    def names(self) -> frozenset[str]:
        """The watched topics now: those named within ``idle_s`` (the rest leave)."""
        horizon = self._clock() - self._idle_s
        last_used = self._last_used
        idle = [name for name, at in last_used.items() if at < horizon]
        if idle:
            for name in idle:
                del last_used[name]
            self.left += len(idle)
            self._names = frozenset(last_used)
            log.debug("%d topic(s) left the watched set after %.0f s unused: %s",
                      len(idle), self._idle_s, ", ".join(sorted(idle)[:10]))
        return self._names

    def __contains__(self, name: object) -> bool:
        return name in self._last_used

    def __len__(self) -> int:
        return len(self._last_used)
