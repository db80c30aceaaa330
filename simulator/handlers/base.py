"""What every request handler of the simulator (a TEST DOUBLE) receives and returns.

Invariant: a handler is `async (Ctx, decoded request) -> response object or
None` (None only for acks=0 Produce); it reads and mutates SimCore on the
event-loop thread and never touches sockets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from simulator import errors
from simulator.core import SimCore


@dataclass(frozen=True)
class Ctx:
    core: SimCore
    node_id: int  # the broker the request arrived at
    version: int
    client_id: str | None
    principal: str | None = None  # the authenticated user (SASL listeners)

    @property
    def is_coordinator(self) -> bool:
        return self.core.state.coordinator() == self.node_id

    def coordinator_error(self) -> int:
        """0 on the coordinator broker, else NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE."""
        if self.core.state.coordinator() is None:
            return errors.COORDINATOR_NOT_AVAILABLE
        return errors.NONE if self.is_coordinator else errors.NOT_COORDINATOR


Handler = Callable[[Ctx, Any], Awaitable[Any]]
