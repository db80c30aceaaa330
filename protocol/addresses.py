"""Broker addresses as the address-rewriting codecs see them.

Invariant: a :class:`BrokerAddress` returned by a rewriting codec always holds
the *upstream* address that was read from the broker's response (the one that
must never reach a client); the address that was written in its place is
whatever the :data:`AddressMapper` returned for it. Data only, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

AddressMapper = Callable[[int, str, int], tuple[str, int]]
"""``(node_id, upstream host, upstream port) -> (advertised host, advertised port)``."""


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int
    rack: str | None = None
