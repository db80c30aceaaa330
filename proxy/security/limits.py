"""Connection limits: how many client connections in total and per client address.

Invariants: a pure counter, no I/O; :meth:`admit` either counts the connection
and returns None, or counts nothing and returns the limit that refused it;
every admitted connection is released exactly once by its owner. 0 means no
limit.
"""

from __future__ import annotations

from typing import Literal

Refusal = Literal["max_connections", "max_connections_per_client"]


class ConnectionLimits:
    __slots__ = ("max_total", "max_per_address", "total", "_per_address")

    def __init__(self, max_total: int, max_per_address: int) -> None:
        self.max_total = max_total
        self.max_per_address = max_per_address
        self.total = 0
        self._per_address: dict[str, int] = {}

    def admit(self, address: str) -> Refusal | None:
        if self.max_total and self.total >= self.max_total:
            return "max_connections"
        held = self._per_address.get(address, 0)
        if self.max_per_address and held >= self.max_per_address:
            return "max_connections_per_client"
        self.total += 1
        self._per_address[address] = held + 1
        return None

    def release(self, address: str) -> None:
        held = self._per_address.get(address, 0)
        if held <= 1:
            self._per_address.pop(address, None)
        else:
            self._per_address[address] = held - 1
        if held:
            self.total -= 1

    def held(self, address: str) -> int:
        return self._per_address.get(address, 0)
