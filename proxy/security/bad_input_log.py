"""Rate-limited logging of bad input: one line per peer and reason per interval.

A client that sends garbage is closed and counted by the relay; this decides
what reaches the log. The first occurrence of a (peer address, reason) in an
interval is logged with its details; the rest of that interval are counted,
and :meth:`flush` (called every interval) writes one summary line per pair
with its count. So 3,000 garbage connections from one address write two
lines, not 3,000.

Invariants: no I/O beyond the logger; the clock is injected; at most
``max_keys`` pairs are tracked per interval, further pairs are folded into
one "other peers" entry per reason, so memory stays bounded whatever the
number of peers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

OTHER = "(other peers)"


@dataclass(slots=True)
class _Tally:
    count: int = 0  # occurrences not logged in full


class BadInputLog:
    def __init__(
        self,
        logger: logging.Logger,
        clock: Callable[[], float],
        interval_s: float,
        max_keys: int = 1000,
    ) -> None:
        self._log = logger
        self._clock = clock
        self.interval_s = interval_s
        self._max_keys = max_keys
        self._window: dict[tuple[str, str], _Tally] = {}
        self._started = clock()

    def report(self, peer: str, reason: str, message: str) -> None:
        """One bad input from ``peer`` (an address, no port) for ``reason``."""
        if self._clock() - self._started >= self.interval_s:
            self.flush()
        key = (peer, reason)
        tally = self._window.get(key)
        if tally is not None:
            tally.count += 1
            return
        if len(self._window) >= self._max_keys:
            other = self._window.setdefault((OTHER, reason), _Tally())
            other.count += 1
            return
        self._window[key] = _Tally()
        self._log.warning("%s (further such input from %s is summarised every %g s)",
                          message, peer, self.interval_s)

    def flush(self) -> None:
        """Write one summary line per (peer, reason) seen again since the last flush."""
        now = self._clock()
        span = now - self._started
        for (peer, reason), tally in self._window.items():
            if tally.count:
                self._log.warning("bad input from %s: %d more %s in the last %.0f s "
                                  "(connections closed)", peer, tally.count,
                                  reason.replace("_", " "), span)
        self._window.clear()
        self._started = now
