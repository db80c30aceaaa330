"""The proxy server: listeners, upstream connections, graceful stop.

One bootstrap listener, plus one listener per broker node id at
``broker_port_base + node_id``, opened on demand the first time a response
names the node. A client of the bootstrap listener is paired with a connection
to one of the configured upstream bootstrap servers; a client of node N's
listener with a connection to broker N's upstream address.

Invariants: this module and ``connection.py`` are the only places that touch
sockets; protocol decisions are made by hooks handed to the connections. All
connections of one server read into one :class:`~protocol.framing.ReadMemory`,
so a server belongs to one event loop (one thread).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from protocol.api_versions import MAX_VERSION as API_VERSIONS_MAX
from protocol.api_versions import PROXY_VERSION_CAPS, unsupported_version_response
from protocol.apis import ApiKey
from protocol.framing import ReadMemory
from protocol.produce import peek_acks
from protocol.produce_response import FIRST_LEADER_HINT_VERSION
from proxy.ops.metrics import ProxyMetrics
from proxy.relay.actions import (
    Action,
    ClientInfo,
    Forward,
    Hooks,
    Limits,
    Reply,
    RequestHook,
)
from proxy.relay.addressing import AddressBook, AddressRewriter
from proxy.relay.connection import ClientConnection, UpstreamConnection
from proxy.security.bad_input_log import BadInputLog
from proxy.security.client_guard import Guards
from proxy.security.limits import ConnectionLimits
from proxy.security.reload import ReloadingServerContext
from proxy.security.settings_map import relays_client_sasl, server_tls, upstream_tls
from proxy.security.tls import upstream_context
from proxy.settings import Settings

log = logging.getLogger("rackguard.server")

BOOTSTRAP = "bootstrap"


class ProxyServer:
    def __init__(
        self,
        settings: Settings,
        metrics: ProxyMetrics | None = None,
        produce_hook: RequestHook | None = None,
        metadata_observers: Iterable[Callable[[memoryview, int], None]] = (),
    ) -> None:
        self.settings = settings
        self.metrics = metrics if metrics is not None else ProxyMetrics()
        self.book = AddressBook()
        self._upstreams = settings.upstream_addresses()
        if not self._upstreams:
            raise ValueError("no upstream bootstrap address configured")
        self._next_upstream = 0
        self._servers: dict[int | str, asyncio.Server] = {}
        self._binding: dict[int, asyncio.Future[None]] = {}
        self._connections: set[ClientConnection] = set()
        self._limits = Limits(settings.max_frame_size, settings.write_high_water)
        # TLS toward clients (a TlsError here refuses the start) and toward brokers
        listener_tls = server_tls(settings)
        self.tls: ReloadingServerContext | None = None
        if listener_tls is not None:
            self.tls = ReloadingServerContext(
                listener_tls, lambda ok: self.metrics.tls_reloads.labels(
                    "ok" if ok else "failed").inc())
        to_brokers = upstream_tls(settings)
        self._upstream_ssl = upstream_context(to_brokers) if to_brokers is not None else None
        self.connection_limits = ConnectionLimits(settings.max_connections,
                                                  settings.max_connections_per_client)
        self.bad_input = BadInputLog(logging.getLogger("rackguard.connection"), time.monotonic,
                                     settings.bad_input_log_interval_ms / 1000)
        self._guards = Guards(
            sasl=relays_client_sasl(settings),
            first_request_timeout_s=settings.first_request_timeout_ms / 1000,
            admit=self.connection_limits.admit,
            report=self.bad_input.report,
        )
        # What every connection reads into: a scratch buffer for small frames (copied
        # out before the read returns) and a pool of large frame buffers (one event loop).
        self._read_memory = ReadMemory()
        self.rewriter = AddressRewriter(
            self.book,
            settings.advertised,
            settings.broker_port,
            self.has_listener,
            self.ensure_listeners,
            self.metrics,
            metadata_observers,
        )
        rewriters = self.rewriter.transforms()
        self.produce_transform = rewriters[ApiKey.PRODUCE]
        # ApiVersions responses are capped by the transform its request hook names.
        rewriters.pop(ApiKey.API_VERSIONS, None)
        self._hooks = Hooks(
            request_hooks={
                ApiKey.PRODUCE: produce_hook or self.forward_produce,
                ApiKey.API_VERSIONS: self.negotiate_api_versions,
            },
            response_rewriters=rewriters,
            max_versions={key: cap for key, cap in PROXY_VERSION_CAPS.items()
                          if key != ApiKey.API_VERSIONS},
        )
        self._stopping = False
        self._drained = asyncio.Event()  # set when the last connection closes while stopping

    def set_produce_hook(self, hook: RequestHook) -> None:
        """Install the Produce hook (before ``start``: connections keep the hooks they got)."""
        self.set_request_hook(ApiKey.PRODUCE, hook)

    def set_request_hook(self, api_key: int, hook: RequestHook) -> None:
        """Install the hook of one API (before ``start``: connections keep their hooks)."""
        self._hooks = replace(
            self._hooks, request_hooks={**self._hooks.request_hooks, api_key: hook})

    def add_request_hooks(self, hooks: Mapping[int, RequestHook]) -> None:
        """Install request hooks of further concerns (before ``start``) for APIs no hook
        claims yet; claiming one twice is a programming error. A hook's ``Forward`` names
        the response transform of its request: the response rewriter this server keeps
        for that API (if any) then runs only if the hook names it."""
        taken = set(hooks) & set(self._hooks.request_hooks)
        if taken:
            raise ValueError(f"request hooks for api keys {sorted(taken)} are installed")
        self._hooks = replace(
            self._hooks, request_hooks={**self._hooks.request_hooks, **hooks})

    # ----- hooks
    def forward_produce(
        self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int, corr: int
    ) -> Action:
        """Produce with no policy: forward as is; acks=0 expects no response.

        Before v10 a Produce response carries no broker address, so it needs no
        transform (the address rewriter would hand it back untouched)."""
        return Forward(frame, peek_acks(frame) != 0,
                       self.produce_transform if api_version >= FIRST_LEADER_HINT_VERSION
                       else None)

    def negotiate_api_versions(
        self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int, corr: int
    ) -> Action:
        """A newer ApiVersions than the proxy reads is answered as a broker would: with
        UNSUPPORTED_VERSION in v0 format, and the client retries with a version it names."""
        if api_version > API_VERSIONS_MAX:
            return Reply(unsupported_version_response(corr))
        return Forward(frame, True, self.rewriter.api_versions)

    # ----- listeners
    @property
    def bootstrap_port(self) -> int:
        server = self._servers[BOOTSTRAP]
        return int(server.sockets[0].getsockname()[1])

    def request_hook(self, api_key: int) -> RequestHook | None:
        """The hook installed for one API, if any (to chain another before it)."""
        return self._hooks.request_hooks.get(api_key)

    def has_listener(self, node_id: int) -> bool:
        return node_id in self._servers

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: self._new_client(BOOTSTRAP),
            self.settings.listen_host,
            self.settings.bootstrap_port,
            reuse_address=True,
            ssl=self._listener_ssl,
            ssl_handshake_timeout=self._handshake_timeout,
        )
        self._servers[BOOTSTRAP] = server
        log.info("bootstrap listener on %s:%d, upstream %s", self.settings.listen_host,
                 self.settings.bootstrap_port,
                 ",".join(f"{h}:{p}" for h, p in self._upstreams))

    async def ensure_listeners(self, node_ids: list[int]) -> None:
        await asyncio.gather(*(self._ensure_listener(n) for n in node_ids))

    async def _ensure_listener(self, node_id: int) -> None:
        if node_id in self._servers:
            return
        pending = self._binding.get(node_id)
        if pending is None:
            pending = asyncio.ensure_future(self._bind(node_id))
            self._binding[node_id] = pending
        await asyncio.shield(pending)

    async def _bind(self, node_id: int) -> None:
        if self._stopping:  # draining: no new listener
            self._binding.pop(node_id, None)
            return
        port = self.settings.broker_port(node_id)
        loop = asyncio.get_running_loop()
        try:
            server = await loop.create_server(
                lambda: self._new_client(f"node-{node_id}"),
                self.settings.listen_host,
                port,
                reuse_address=True,
                ssl=self._listener_ssl,
                ssl_handshake_timeout=self._handshake_timeout,
            )
        except OSError as exc:
            self._binding.pop(node_id, None)
            log.error("cannot open the listener for broker %d on %s:%d: %s", node_id,
                      self.settings.listen_host, port, exc)
            raise
        if self._stopping:  # the drain began while binding
            self._binding.pop(node_id, None)
            server.close()
            return
        self._servers[node_id] = server
        self._binding.pop(node_id, None)
        log.info("listener for broker %d on %s:%d", node_id, self.settings.listen_host, port)

    @property
    def _listener_ssl(self) -> ssl.SSLContext | None:
        return self.tls.listener if self.tls is not None else None

    @property
    def _handshake_timeout(self) -> float | None:
        return self.settings.first_request_timeout_ms / 1000 if self.tls is not None else None

    # ----- connections
    def _new_client(self, listener: str) -> ClientConnection:
        conn = ClientConnection(
            listener, self._connect_upstream, self._hooks, self._limits, self.metrics,
            self._client_closed, self._read_memory, self._guards, self._client_opened,
        )
        return conn

    def _client_opened(self, conn: ClientConnection) -> None:
        # not before: a TLS handshake that fails never reaches the connection (nor its close)
        self._connections.add(conn)
        self.metrics.connections_open.labels(conn.listener).inc()
        self.metrics.connections_total.labels(conn.listener).inc()
        if self._stopping:  # a TLS handshake that completed after the drain began
            asyncio.get_running_loop().call_soon(conn.drain)

    def _client_closed(self, conn: ClientConnection) -> None:
        if conn in self._connections:
            self._connections.discard(conn)
            self.metrics.connections_open.labels(conn.listener).dec()
            if conn.admitted is not None:
                self.connection_limits.release(conn.admitted)
            if self._stopping and not self._connections:
                self._drained.set()

    async def _connect_upstream(self, client: ClientConnection) -> asyncio.Transport:
        if client.listener == BOOTSTRAP:
            candidates = self._bootstrap_order()
        else:
            node_id = int(client.listener.removeprefix("node-"))
            address = self.book.get(node_id)
            if address is None:
                raise ConnectionError(f"address of broker {node_id} is not known yet")
            candidates = [address]
        loop = asyncio.get_running_loop()
        timeout = self.settings.connect_timeout_ms / 1000
        errors = []
        for host, port in candidates:
            try:
                async with asyncio.timeout(timeout):  # (3.11's wait_for can lose a cancel)
                    transport, _ = await loop.create_connection(
                        lambda: UpstreamConnection(client),
                        host, port, ssl=self._upstream_ssl,
                        server_hostname=host if self._upstream_ssl is not None else None,
                    )
                return transport
            except (TimeoutError, OSError) as exc:
                errors.append(f"{host}:{port}: {exc or 'timeout'}")
        raise ConnectionError("; ".join(errors))

    def _bootstrap_order(self) -> list[tuple[str, int]]:
        start = self._next_upstream
        self._next_upstream = (start + 1) % len(self._upstreams)
        return self._upstreams[start:] + self._upstreams[:start]

    # ----- stop
    async def stop(self, timeout: float | None = None) -> str:
        """Drain, then close: stop accepting; read no further request on any connection;
        close each connection once the requests it has read are answered (an idle one at
        once); past ``timeout`` (default ``drain_timeout_ms``) close the rest. Returns the
        outcome, counted in ``rackguard_drain_total{result}``: ``clean`` (every request
        read was answered) or ``timeout`` (some were cut off)."""
        if self._stopping:
            return "repeated"
        self._stopping = True
        timeout = self.settings.drain_timeout_ms / 1000 if timeout is None else timeout
        for server in self._servers.values():
            server.close()
        for conn in list(self._connections):
            conn.drain()
        if self._connections:
            try:
                async with asyncio.timeout(timeout):
                    await self._drained.wait()
            except TimeoutError:
                pass
        busy = len(self._connections)
        result = "timeout" if busy else "clean"
        if busy:
            log.warning("drain: closing %d connection(s) with requests still in flight after "
                        "%.1f s", busy, timeout)
            for conn in list(self._connections):
                conn.close()
        self.metrics.drains.labels(result).inc()
        try:  # (from Python 3.12 this also waits for connections a stalled peer holds open)
            async with asyncio.timeout(1.0):
                for server in self._servers.values():
                    await server.wait_closed()
        except TimeoutError:
            log.warning("drain: a connection's peer is not reading; exiting without it")
        log.info("stopped (drain %s)", result)
        return result
