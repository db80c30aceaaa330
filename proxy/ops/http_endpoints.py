"""The operations HTTP endpoint: /metrics, /healthz, /readyz on one port (and the JSON
documents other concerns give it, such as /streams).

Invariant: it runs in its own thread with its own stdlib server, so a scrape
never runs as a task on the proxy's event loop, and it holds no state of its
own: /metrics calls the injected renderer at request time, /healthz and
/readyz call the injected checks (200 when ok, else 503), each answering with
one line of text. Any other path is 404. It binds only the given host.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST

from proxy.ops.health import Health

log = logging.getLogger("rackguard.http")

Check = Callable[[], Health]
Render = Callable[[], bytes]  # the whole /metrics body, Prometheus text format 0.0.4


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    timeout = 0.0  # handle_request: a connection said ready is taken, never waited for

    def serve_until_woken(self, wake: socket.socket) -> None:
        """``serve_forever`` without its poll twice a second (an idle sidecar's thread
        would wake for nothing): it waits for a connection or for a byte on ``wake``."""
        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            while True:
                ready = selector.select()
                if any(key.fileobj is wake for key, _ in ready):
                    return
                self.handle_request()


class _Server6(_Server):
    address_family = socket.AF_INET6


class OpsHttpServer:
    def __init__(
        self,
        host: str,
        port: int,
        metrics: Render,
        alive: Check,
        ready: Check,
        documents: Mapping[str, Render] | None = None,
    ) -> None:
        self._host = host
        self._port = port
        self._metrics = metrics
        self._alive = alive
        self._ready = ready
        self._documents = dict(documents or {})
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._wake: tuple[socket.socket, socket.socket] | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("not started")
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Bind (raises OSError if the port is taken) and serve in a daemon thread."""
        cls = _Server6 if ":" in self._host else _Server
        self._server = cls((self._host, self._port), self._handler())
        self._wake = socket.socketpair()
        self._thread = threading.Thread(target=self._server.serve_until_woken,
                                        args=(self._wake[0],), name="rackguard-http",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._wake is not None:
            self._wake[1].send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._server is not None:
            self._server.server_close()
            self._server = None
        if self._wake is not None:
            for end in self._wake:
                end.close()
            self._wake = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        ops = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "rackguard"

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                path = self.path.split("?", 1)[0]
                try:
                    if path == "/metrics":
                        self._send(200, ops._metrics(), CONTENT_TYPE_LATEST)
                    elif path == "/healthz":
                        self._health(ops._alive())
                    elif path == "/readyz":
                        self._health(ops._ready())
                    elif path in ops._documents:
                        self._send(200, ops._documents[path](), "application/json")
                    else:
                        self._send(404, b"not found: try /metrics, /healthz or /readyz\n")
                except Exception as exc:  # a failing collector must not kill the thread
                    log.exception("%s failed", path)
                    self._send(500, f"internal error: {exc}\n".encode())

            def _health(self, health: Health) -> None:
                self._send(200 if health.ok else 503, (health.reason + "\n").encode())

            def _send(self, code: int, body: bytes,
                      content_type: str = "text/plain; charset=utf-8") -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                log.debug("%s %s", self.address_string(), format % args)

        return Handler
