"""A stand-in for the proxy's poller where a store is tested without a cluster: no broker
can be reached, and a refresh changes nothing."""

from __future__ import annotations

import asyncio

from proxy.cluster.control_conn import ControlConn


class NoCluster:
    refreshes = 0

    async def open_connection(self, node_id: int) -> ControlConn:
        raise ConnectionRefusedError(f"broker {node_id}: no cluster here")

    async def refresh_now(self, configs: bool = False) -> bool:
        self.refreshes += 1
        await asyncio.sleep(0)
        return False
