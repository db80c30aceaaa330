"""Where the clients connect: Tansu directly, or rackguard in front of it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from . import leak
from .procs import RackguardProxy, TansuBroker

# The one switch: which targets the integration matrix runs against.
# Override with RGTEST_TARGETS=direct (or =proxy).
TARGETS: tuple[str, ...] = tuple(
    t.strip() for t in os.environ.get("RGTEST_TARGETS", "direct,proxy").split(",") if t
)


@dataclass
class Target:
    name: str  # "direct" | "proxy"
    broker: TansuBroker
    proxy: RackguardProxy | None = None

    @property
    def via_proxy(self) -> bool:
        return self.proxy is not None

    @property
    def bootstrap(self) -> str:
        return self.proxy.bootstrap if self.proxy else self.broker.bootstrap

    @property
    def host(self) -> str:
        return self.bootstrap.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])

    def advertised(self, node_id: int) -> tuple[str, int]:
        """The host:port clients must be told for broker ``node_id``."""
        if self.proxy:
            return self.proxy.broker_address(node_id)
        assert node_id == self.broker.node_id, node_id
        return self.broker.advertised

    @property
    def upstream_address(self) -> tuple[str, int]:
        """What the broker advertises itself; must never reach a client via the proxy."""
        return self.broker.advertised

    def check_connections(self, client_pids: Iterable[int] = (), context: str = "") -> None:
        """Socket-level leak check; call while the clients are still connected.

        Through the proxy: nothing but the proxy may hold a connection to Tansu.
        Direct: the check must *see* the clients' connections (a positive
        control proving the check works), if ``client_pids`` are given.
        """
        if self.proxy:
            assert self.proxy.alive(), self.proxy.describe()
            leak.assert_no_direct_connections(self.broker.port, self.proxy.pid, context)
            return
        pids = set(client_pids)
        if pids:
            seen = set().union(*(s.pids for s in leak.direct_connections(self.broker.port)))
            assert pids & seen, (
                f"leak check blind ({context}): direct clients {pids} hold no visible "
                f"connection to port {self.broker.port} (seen: {seen})"
            )

    def check_bytes(self, data: bytes, context: str = "") -> None:
        """Byte-level check of a raw response received from the target."""
        host, port = self.upstream_address
        found = leak.find_address_leaks(data, host, port)
        if self.proxy:
            assert not found, f"upstream address leaked in {context}: {found}"
        else:
            assert found, f"positive control: {host}:{port} not found in direct {context}"

    def __str__(self) -> str:
        return f"{self.name}({self.bootstrap})"
