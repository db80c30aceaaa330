"""One simulated broker's TCP listener (a TEST DOUBLE, not a Kafka broker).

Invariants: a BrokerServer listens on exactly one 127.0.0.1-style port, kept
across stop/start (port 0 is resolved once, at the first start). Requests on a
connection are handled one at a time, in order, so responses come back in
request order. `stop` closes the listener and every open connection. A bad
frame closes only its own connection, with one log line. With TLS configured
the listener speaks TLS (requiring client certificates when a client CA is
given); with SASL each connection must authenticate first
(:mod:`simulator.sasl`): any other request before that closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl

from simulator.core import SimCore
from simulator.dispatch import dispatch
from simulator.faults import Fault
from simulator.sasl import SaslSession
from simulator.wire import FrameError, frame_size, peek_header

log = logging.getLogger(__name__)


class BrokerServer:
    def __init__(self, core: SimCore, node_id: int, host: str, port: int) -> None:
        self.core = core
        self.node_id = node_id
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.fault: Fault | None = None
        self._blackhole: socket.socket | None = None
        self._relisten = False

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, reuse_address=True, family=socket.AF_INET,
            ssl=self._ssl_context(),
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def _ssl_context(self) -> ssl.SSLContext | None:
        config = self.core.config
        if config.tls_cert is None:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(str(config.tls_cert), str(config.tls_key or config.tls_cert))
        if config.tls_client_ca is not None:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(str(config.tls_client_ca))
        return ctx

    async def set_fault(self, fault: Fault | None) -> None:
        """Show ``fault`` from now on (None: heal). A blackhole replaces the listener with
        a socket nobody accepts on; healing it listens again on the same port."""
        self.fault = fault
        holing = fault is not None and fault.mode == "blackhole"
        if holing and self._blackhole is None:
            self._relisten = self.listening
            await self.stop()
            hole = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            hole.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            hole.bind((self.host, self.port))
            hole.listen(0)
            self._blackhole = hole
        elif not holing and self._blackhole is not None:
            self._blackhole.close()
            self._blackhole = None
            if self._relisten:
                await self.start()

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._server is None:
            writer.close()
            return
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        users = self.core.config.sasl
        session = SaslSession(users) if users is not None else None
        try:
            while True:
                size = frame_size(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                if session is not None:
                    header = peek_header(frame)
                    if header.api_key in (17, 36):
                        answer, close = session.handle(header, frame)
                        writer.write(answer)
                        await writer.drain()
                        if close:
                            break  # Kafka closes after a failed authentication
                        continue
                    if not session.admits(header.api_key):
                        log.info("broker %d: closing connection from %s: api key %d before "
                                 "authentication", self.node_id, peer, header.api_key)
                        break
                fault = self.fault
                if fault is not None and fault.silences(frame):
                    continue  # read, never answered
                if fault is not None and fault.delay_s:
                    await asyncio.sleep(fault.delay_s)
                response = await dispatch(self.core, self.node_id, frame,
                                          session.principal if session is not None else None)
                if response is not None:
                    writer.write(response)
                    await writer.drain()
        except FrameError as exc:
            log.warning("broker %d: closing connection from %s: %s", self.node_id, peer, exc)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            log.warning("broker %d: request failed, closing connection from %s: %s: %s",
                        self.node_id, peer, type(exc).__name__, exc)
            log.debug("handler traceback", exc_info=True)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                writer.transport.abort()
