"""Tiny HTTP control endpoint of the simulator (a TEST DOUBLE), for demos.

Invariant: one request per connection, JSON out, every action delegated to
SimulatedCluster on the same loop. Routes:
  GET  /state
  POST /racks/{rack}/kill      POST /racks/{rack}/restore
  POST /brokers/{id}/kill      POST /brokers/{id}/restore
  POST /racks/{rack}/fault     POST /brokers/{id}/fault
                               body {"mode": hang|slow|partition-proxy|blackhole,
                                     "delay_s": for slow}; {"mode": null} heals
  POST /topics                 body {"name", "partitions", "replication_factor", "configs"}
  POST /topics/{t}/partitions/{p}/isr   body [node ids]
  POST /topics/{t}/config      body {"key": k, "value": v or null}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from simulator.faults import Fault
from simulator.state import StateError

if TYPE_CHECKING:
    from simulator.cluster import SimulatedCluster

log = logging.getLogger(__name__)
MAX_BODY = 1 << 20


class ControlServer:
    def __init__(self, cluster: SimulatedCluster, host: str, port: int) -> None:
        self.cluster = cluster
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status: int = 400
        payload: Any = {"error": "bad request"}
        try:
            request_line = (await asyncio.wait_for(reader.readline(), 5)).decode("latin-1")
            method, path, _ = request_line.split(" ", 2)
            length = 0
            while True:
                line = (await asyncio.wait_for(reader.readline(), 5)).decode("latin-1").strip()
                if not line:
                    break
                name, _, value = line.partition(":")
                if name.lower() == "content-length":
                    length = min(int(value.strip()), MAX_BODY)
            raw = await asyncio.wait_for(reader.readexactly(length), 5) if length else b""
            body = json.loads(raw) if raw.strip() else None
            status, payload = await self.route(method.upper(), path, body)
        except StateError as exc:
            status, payload = 409, {"error": exc.message, "code": exc.code}
        except (ValueError, KeyError, TypeError) as exc:
            status, payload = 400, {"error": str(exc)}
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            writer.close()
            return
        data = json.dumps(payload, indent=1).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 409: "Conflict"}[status]
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    async def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        parts = [unquote(p) for p in path.split("?", 1)[0].strip("/").split("/") if p]
        c = self.cluster
        if method == "GET" and parts == ["state"]:
            return 200, c.snapshot()
        if method != "POST":
            return 404, {"error": f"no route {method} {path}"}
        match parts:
            case ["racks", rack, "kill"]:
                return 200, {"killed": await c.kill_rack(rack)}
            case ["racks", rack, "restore"]:
                return 200, {"restored": await c.restore_rack(rack)}
            case ["brokers", node, "kill"]:
                await c.kill_broker(int(node))
                return 200, {"killed": [int(node)]}
            case ["brokers", node, "restore"]:
                await c.restore_broker(int(node))
                return 200, {"restored": [int(node)]}
            case ["racks", rack, "fault"]:
                return 200, {"faulted": await c.fault_rack(rack, _fault(body))}
            case ["brokers", node, "fault"]:
                await c.fault_broker(int(node), _fault(body))
                return 200, {"faulted": [int(node)]}
            case ["topics"]:
                topic = await c.create_topic(
                    body["name"], int(body.get("partitions", 3)),
                    int(body.get("replication_factor", 3)), body.get("configs") or {},
                )
                return 200, {"created": topic.name}
            case ["topics", topic, "partitions", index, "isr"]:
                part = await c.set_isr(topic, int(index), [int(n) for n in body])
                return 200, {"isr": part.isr, "leader": part.leader}
            case ["topics", topic, "config"]:
                await c.set_topic_config(topic, body["key"], body.get("value"))
                return 200, {"configs": c.core.state.topics[topic].configs}
        return 404, {"error": f"no route {method} {path}"}


def _fault(body: Any) -> Fault | None:
    mode = (body or {}).get("mode")
    return None if mode is None else Fault(str(mode), float(body.get("delay_s", 0.0)))
