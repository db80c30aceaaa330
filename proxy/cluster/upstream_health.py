"""Which broker the proxy asks next for its own requests, and what it knows of each one's
health. Sans-IO: the poller reports outcomes and asks for an order; time comes from an
injected clock.

The rules (the ones Kafka's own clients follow, with a rack twist):
- the bootstrap servers are for the first view, and for when every broker the view
  names has failed; once a view exists, any broker in it is a candidate;
- a broker that failed (refused, timed out, answered garbage) is backed off: not asked
  again before ``backoff_s`` doubled per consecutive failure, capped at
  ``backoff_max_s``; one success clears it;
- candidates come healthy first, then the ones whose back-off ends soonest; among the
  healthy, brokers in a rack that has not just failed come first (a zone that hangs
  takes all its brokers with it), then by how recently each answered;
- the broker answering now is kept at the front while it keeps answering (one
  connection, not a new one per poll).

Invariant: state is replaced whole (``Health`` values are frozen); nothing here
performs I/O or reads a clock of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A broker to ask: its node id (None for a bootstrap server), address and rack."""

    node_id: int | None
    host: str
    port: int
    rack: str | None

    @property
    def address(self) -> Address:
        return self.host, self.port

    @property
    def name(self) -> str:
        who = f"broker {self.node_id}" if self.node_id is not None else "bootstrap"
        return f"{who} ({self.host}:{self.port}{f', {self.rack}' if self.rack else ''})"


@dataclass(frozen=True, slots=True)
class Health:
    failures: int = 0  # consecutive
    retry_at: float = 0.0  # not asked before this time (a clock reading)
    last_ok: float | None = None
    last_error: str | None = None

    @property
    def up(self) -> bool:
        return self.failures == 0


class UpstreamHealth:
    def __init__(self, bootstrap: Iterable[Address], clock: Callable[[], float],
                 backoff_s: float = 0.5, backoff_max_s: float = 10.0) -> None:
        self._bootstrap = tuple(bootstrap)
        self._clock = clock
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._health: dict[Address, Health] = {}
        self._known: tuple[Candidate, ...] = ()
        self._seen: dict[Address, Candidate] = {}  # every broker a view ever named
        self._failed_racks: dict[str | None, float] = {}  # rack -> when it last failed
        self._current: Address | None = None

    # ----- what the view says
    def learn(self, brokers: Iterable[Candidate]) -> None:
        """The brokers of the current view (replaces the previous list)."""
        self._known = tuple(sorted(brokers, key=lambda c: (c.node_id or 0)))
        for c in self._known:
            self._seen[c.address] = c

    # ----- outcomes
    def succeeded(self, c: Candidate) -> None:
        self._health[c.address] = Health(last_ok=self._clock())
        self._current = c.address

    def failed(self, c: Candidate, error: str) -> None:
        now = self._clock()
        old = self._health.get(c.address, Health())
        failures = old.failures + 1
        delay = min(self._backoff_max_s, self._backoff_s * 2 ** (failures - 1))
        self._health[c.address] = replace(old, failures=failures, retry_at=now + delay,
                                          last_error=error)
        self._failed_racks[c.rack] = now
        if self._current == c.address:
            self._current = None

    def health(self, c: Candidate) -> Health:
        return self._health.get(c.address, Health())

    # ----- the order to ask in
    def order(self) -> list[Candidate]:
        """Every candidate, best first (see the module's rules)."""
        now = self._clock()
        known = list(self._known)
        usable = [c for c in known if self.health(c).retry_at <= now]
        if not usable:  # no view yet, or every known broker failed: the bootstrap list too
            known += [Candidate(None, h, p, None) for h, p in self._bootstrap
                      if all(c.address != (h, p) for c in known)]

        def rank(c: Candidate) -> tuple[int, float, int, float, int]:
            h = self.health(c)
            waiting = h.retry_at > now
            current = 0 if c.address == self._current else 1
            rack_failed = self._failed_racks.get(c.rack, -1.0)
            return (int(waiting), h.retry_at if waiting else 0.0, current, rack_failed,
                    -(int(h.last_ok or 0)))

        return sorted(known, key=rank)

    def states(self) -> Mapping[Candidate, bool]:
        """Up or down, for every broker a view ever named (the metric's source): one that
        failed and then left the cluster's broker list stays down."""
        return {c: self.health(c).up for c in self._seen.values()}
