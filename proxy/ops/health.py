"""Liveness and readiness of the running proxy, for /healthz and /readyz.

Invariant: readiness is a pure function of values handed in (the current
cluster view, the poller's last error, the time and the age bound in force),
so it is tested with plain values; liveness asks the proxy's own event loop
to run a callback, so "alive" means the loop that serves clients still turns,
not merely that the HTTP thread answers. Neither blocks the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

from proxy.cluster.view import ClusterView


@dataclass(frozen=True, slots=True)
class Health:
    ok: bool
    reason: str  # one line, served as the response body


def readiness(
    view: ClusterView, last_poll_error: str | None, now: float, max_age_s: float
) -> Health:
    """Ready: the poller's last poll succeeded and the view is younger than ``max_age_s``."""
    if last_poll_error is not None:
        return Health(False, f"upstream unreachable: last metadata poll failed: "
                      f"{last_poll_error}")
    if view.refreshed_at is None:
        return Health(False, "no cluster metadata yet")
    age = view.age(now)
    if age > max_age_s:
        return Health(False, f"metadata is {age:.1f} s old, above max_metadata_age_ms "
                      f"({max_age_s * 1000:.0f} ms)")
    return Health(True, f"ready: metadata {age:.1f} s old, {len(view.brokers)} broker(s), "
                  f"{view.partition_count} partition(s)")


class LoopProbe:
    """Liveness: the event loop runs a callback posted from another thread in time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float = 2.0) -> None:
        self._loop = loop
        self._timeout = timeout_s

    def __call__(self) -> Health:
        done = threading.Event()
        try:
            self._loop.call_soon_threadsafe(done.set)
        except RuntimeError:
            return Health(False, "event loop is closed")
        if done.wait(self._timeout):
            return Health(True, "alive")
        return Health(False, f"event loop did not respond within {self._timeout:.1f} s")
