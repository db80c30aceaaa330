"""A client connection and its upstream connection: the proxy's only data path I/O.

One client connection is paired with exactly one upstream connection to the
broker its listener stands for. Requests go upstream in the order the client
sent them; a request whose hook needs to wait (an asynchronous decision) holds
back every later request of the same connection, so upstream order is never
changed. Responses return in request order through a :class:`ResponseQueue`,
including responses the proxy makes itself.

Both sides are ``asyncio.BufferedProtocol``s reading into a shared
:class:`~protocol.framing.ReadMemory` (one per event loop): a large frame is
read straight into a buffer of its own size and forwarded from there, so its
bytes are copied by the kernel on the way in and out and nowhere else.

Invariants:
- bytes of a request that no hook claims are forwarded as they arrived;
- backpressure both ways: while one side's write buffer is above the high
  water mark, the other side is not read;
- bad input on either side closes this pair only, with one counter raised and
  one log line naming the peer and the reason (rate-limited: further ones from
  the same address and for the same reason are summarised with a count);
- with SASL relayed (:class:`Guards.sasl`), a request other than ApiVersions,
  SaslHandshake and SaslAuthenticate is neither read nor forwarded until the
  broker has authenticated the client (:mod:`proxy.security.client_guard`);
- a connection refused by a limit is closed at once; one that has not completed
  a request within ``first_request_timeout_s`` is closed as bad input;
- when the broker disconnects, the client is disconnected too (in-flight
  requests have no answer; the client reconnects through metadata).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, cast

from protocol.apis import API_NAMES, api_name
from protocol.framing import FrameSplitter, ReadMemory
from protocol.headers import peek_request, response_correlation_id
from protocol.primitives import ProtocolError
from proxy.relay.actions import (
    Action,
    ClientInfo,
    Forward,
    Hooks,
    Limits,
    Reply,
)
from proxy.relay.response_queue import ResponseQueue
from proxy.security.client_guard import ClientGuard, Guards, Refuse

if TYPE_CHECKING:
    from proxy.ops.metrics import ProxyMetrics

log = logging.getLogger("rackguard.connection")

# Requests queued behind one awaiting a decision before the client stops being read.
_MAX_HELD_FRAMES = 64
# How long the upstream connection outlives a client that left right after acks=0 produces;
# longer for a broker seen answering acks=0 (some Kafka-compatible ones do, and drop what
# they have not processed when the connection closes): there it ends at the last answer.
_ACKS0_LINGER_S = 0.5
_ACKS0_ANSWERED_LINGER_S = 5.0


_ACTIONS = (Forward, Reply)  # checked before the slower inspect.isawaitable
_FRAMES = (bytes, memoryview, bytearray)


class ClientConnection(asyncio.BufferedProtocol):
    def __init__(
        self,
        listener: str,
        connect_upstream: Callable[[ClientConnection], Awaitable[asyncio.Transport]],
        hooks: Hooks,
        limits: Limits,
        metrics: ProxyMetrics,
        on_closed: Callable[[ClientConnection], None],
        read_memory: ReadMemory | None = None,
        guards: Guards | None = None,
        on_open: Callable[[ClientConnection], None] = lambda conn: None,
    ) -> None:
        self.listener = listener
        self._guards = guards = guards if guards is not None else Guards()
        self._guard: ClientGuard | None = ClientGuard() if guards.sasl else None
        self._first_request: asyncio.TimerHandle | None = None
        self.admitted: str | None = None  # the address counted by the limits, if any
        self._connect_upstream = connect_upstream
        self._hooks = hooks
        self._limits = limits
        self._metrics = metrics
        self._on_closed = on_closed
        self._on_open = on_open  # called once the connection is up (after a TLS handshake)
        self._read_memory = read_memory if read_memory is not None else ReadMemory()
        self._splitter = FrameSplitter(limits.max_frame_size, self._read_memory)
        self._queue = ResponseQueue()
        self._held: deque[memoryview] = deque()
        self._outbox: list[bytes | memoryview] = []  # forwarded, not yet written upstream
        self._holding = True  # until the upstream connection is up
        self._transport: asyncio.Transport | None = None
        self._upstream: asyncio.Transport | None = None
        self._read_pauses: set[str] = set()
        self._closed = False
        self._draining = False  # the proxy is stopping: no further request is read
        self._client_gone = False
        self._unregistered = False
        self._lingering: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._asking: set[asyncio.Future[bytes]] = set()  # the proxy's own requests
        self._next_own_corr = -1  # counted down: never a client's (they count up from 0)
        self.info = ClientInfo("?", listener, self.ask_upstream)

    # ----- lifecycle
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is duck-typed
        self._on_open(self)
        peer = transport.get_extra_info("peername")
        self.info = ClientInfo(f"{peer[0]}:{peer[1]}" if peer else "?", self.listener,
                               self.ask_upstream)
        host = str(peer[0]) if peer else "?"
        refusal = self._guards.admit(host)
        if refusal is not None:
            self._closed = True
            self._metrics.connections_refused.labels(refusal).inc()
            self._guards.report(host, refusal, f"refusing client {self.info.peer} on "
                                f"{self.listener}: {refusal.replace('_', ' ')} reached")
            self._transport.abort()
            return
        self.admitted = host
        timeout = self._guards.first_request_timeout_s
        if timeout is not None:
            self._first_request = asyncio.get_running_loop().call_later(
                timeout, self._no_first_request, timeout)
        self._transport.set_write_buffer_limits(high=self._limits.high_water)
        self._pause_client("connecting")
        self._spawn(self._open_upstream())

    async def _open_upstream(self) -> None:
        try:
            upstream = await self._connect_upstream(self)
        except Exception as exc:  # noqa: BLE001 - any failure means this client must go
            self._metrics.upstream_failures.inc()
            log.warning("client %s on %s: upstream unavailable: %s", self.info.peer,
                        self.listener, exc)
            self.close()
            return
        if self._closed:
            upstream.close()
            return
        self._upstream = upstream
        upstream.set_write_buffer_limits(high=self._limits.high_water)
        self._holding = False
        self._release_held()
        self._resume_client("connecting")

    def _no_first_request(self, timeout: float) -> None:
        self._first_request = None
        self._bad_input("client", "no_request", ProtocolError(
            f"no complete request within {timeout:g} s of connecting"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._client_gone = True
        if not self._closed and (self._holding or self._held):
            # Requests the client sent before leaving still go upstream, as they would
            # have without a proxy (an acks=0 producer may close right after sending).
            return
        self._shutdown()

    def close(self) -> None:
        """Close both sides now (bad input, broker gone, proxy stopping)."""
        self._send_upstream()  # requests read before the reason to close still go, in order
        self._closed = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()  # its connection_lost completes the shutdown
        if self._client_gone:
            self._shutdown()
        elif self._upstream is not None and not self._upstream.is_closing():
            self._upstream.close()

    def _end_linger(self) -> None:
        if self._lingering is not None:
            self._lingering.cancel()
            self._lingering = None
        if self._upstream is not None and not self._upstream.is_closing():
            self._upstream.close()

    def _shutdown(self) -> None:
        self._closed = True
        if self._first_request is not None:
            self._first_request.cancel()
            self._first_request = None
        upstream = self._upstream
        if upstream is not None and not upstream.is_closing():
            # known from any connection: a client may send its acks=0 produces and leave
            # before the broker has answered even the first of them
            answers = self._metrics.upstream_answers_acks0
            answered_all = answers and not self._queue.unanswered_waiting
            if self._client_gone and self._queue.unanswered_recently and not answered_all:
                # Requests that get no answer (acks=0) were the last thing sent: give the
                # broker a moment to act on them before it sees the connection go, as it
                # would have without the extra hop.
                linger = _ACKS0_ANSWERED_LINGER_S if answers else _ACKS0_LINGER_S
                self._lingering = asyncio.get_running_loop().call_later(
                    linger, self._end_linger)
            else:
                upstream.close()  # data already written is still delivered
        for waiter in self._asking:
            if not waiter.done():
                waiter.set_exception(ConnectionError("the connection closed"))
        self._asking.clear()
        if not self._unregistered:
            self._unregistered = True
            for task in self._tasks:
                task.cancel()
            self._on_closed(self)

    def _finish_if_client_gone(self) -> None:
        if self._client_gone and not self._holding and not self._held:
            self._shutdown()

    @property
    def idle(self) -> bool:
        """True when no request is waiting for an answer or a decision."""
        return not self._queue and not self._held and not self._holding

    def drain(self) -> None:
        """The proxy is stopping: read no further request from the client, answer those
        already read, then close (at once when none is in flight). A request the client
        sent that was not read yet was never forwarded: the client retries it elsewhere."""
        if self._closed:
            return
        self._draining = True
        self._pause_client("draining")
        self._close_if_drained()

    def _close_if_drained(self) -> None:
        if self._draining and not self._closed and self.idle:
            self.close()  # answers already written are still delivered

    # ----- client -> upstream
    def get_buffer(self, sizehint: int) -> memoryview:
        return self._splitter.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._metrics.bytes_from_client.inc(nbytes)
        try:
            frames = self._splitter.buffer_updated(nbytes)
        except ProtocolError as exc:
            self._bad_input("client", "bad_frame", exc)
            return
        if not frames:
            return
        if self._first_request is not None:
            self._first_request.cancel()
            self._first_request = None
        for frame in frames:
            if self._closed:
                return
            if self._holding:
                self._held.append(frame)
                continue
            self._handle_request(frame)
        self._send_upstream()
        if len(self._held) > _MAX_HELD_FRAMES:
            self._pause_client("held")

    def eof_received(self) -> bool | None:
        if self._splitter.buffered:
            self._bad_input("client", "truncated_frame",
                            ProtocolError(f"{self._splitter.buffered} bytes of a partial frame"))
        return None

    def _handle_request(self, frame: memoryview) -> None:
        try:
            api_key, api_version, corr = peek_request(frame)
        except ProtocolError as exc:
            self._bad_input("client", "bad_header", exc)
            return
        if api_key not in API_NAMES:
            self._bad_input("client", "unknown_api_key",
                            ProtocolError(f"unknown api key {api_key}"))
            return
        self._metrics.request(api_key)
        hooks = self._hooks
        highest = hooks.max_versions.get(api_key)
        if highest is not None and api_version > highest:
            self._bad_input("client", "unsupported_version", ProtocolError(
                f"{api_name(api_key)} v{api_version} (the proxy reads up to v{highest}, "
                "as its ApiVersions answer says)"))
            return
        guard = self._guard
        if guard is not None and not guard.open:
            verdict = guard.screen(api_key, api_version, frame)
            if isinstance(verdict, Refuse):
                self._bad_input("client", verdict.reason, ProtocolError(verdict.detail))
                return
            if verdict is not None:  # SASL: forwarded unchanged, never read
                self._apply(Forward(frame, True, guard.answered if verdict.reads_answer
                                    else None), api_key, api_version, corr)
                return
        hook = hooks.request_hooks.get(api_key)
        if hook is None:
            self._apply(Forward(frame, True, hooks.response_rewriters.get(api_key)),
                        api_key, api_version, corr)
            return
        try:
            action = hook(self.info, frame, api_key, api_version, corr)
        except ProtocolError as exc:
            self._bad_input("client", "bad_request", exc)
            return
        if not isinstance(action, _ACTIONS) and inspect.isawaitable(action):
            self._holding = True
            self._spawn(self._await_action(action, api_key, api_version, corr))
        else:
            self._apply(action, api_key, api_version, corr)

    async def _await_action(
        self, pending: Awaitable[Action], api_key: int, api_version: int, corr: int
    ) -> None:
        try:
            action = await pending
        except ProtocolError as exc:
            self._bad_input("client", "bad_request", exc)
            return
        if self._closed:
            return
        self._holding = False
        self._apply(action, api_key, api_version, corr)
        self._release_held()

    def ask_upstream(self, build: Callable[[int], bytes], api_key: int, api_version: int
                     ) -> asyncio.Future[bytes]:
        """A request of the proxy's own, sent upstream now, behind what was forwarded;
        the future gets its answer frame (a copy), or ConnectionError if the pair closes."""
        waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if self._closed or self._upstream is None:
            waiter.set_exception(ConnectionError("no upstream connection"))
            return waiter
        corr = self._next_own_corr
        self._next_own_corr = corr - 1 if corr > -0x7FFFFFFF else -1
        self._asking.add(waiter)

        def answered(frame: bytes) -> None:
            self._asking.discard(waiter)
            if not waiter.done():
                waiter.set_result(frame)

        self._queue.expect_internal(corr, api_key, api_version, answered)
        self._outbox.append(build(corr))
        self._send_upstream()
        return waiter

    def _send_upstream(self) -> None:
        """Write the frames forwarded since the last call, in one write when several."""
        outbox = self._outbox
        if not outbox or self._upstream is None:
            return
        if len(outbox) == 1:
            self._upstream.write(outbox[0])
        else:
            self._upstream.writelines(outbox)
        self._outbox = []

    def _release_held(self) -> None:
        while self._held and not self._holding and not self._closed:
            self._handle_request(self._held.popleft())
        self._send_upstream()
        if not self._held:
            self._resume_client("held")
        self._finish_if_client_gone()
        self._close_if_drained()

    def _apply(self, action: Action, api_key: int, api_version: int, corr: int) -> None:
        if isinstance(action, Forward):
            if action.expect_response:
                self._queue.expect_upstream(corr, api_key, api_version, action.transform,
                                            action.count, action.read)
            else:
                self._queue.expect_none(corr)
            self._outbox.append(action.frame)
        elif isinstance(action, Reply):
            self._queue.local(corr, api_key, api_version, action.frame)
            self._flush()

    # ----- upstream -> client
    def upstream_splitter(self) -> FrameSplitter:
        """A splitter for the upstream side, reading into this connection's memory."""
        return FrameSplitter(self._limits.max_frame_size, self._read_memory)

    def upstream_data(self, nbytes: int, splitter: FrameSplitter) -> None:
        """``nbytes`` arrived from the broker into ``splitter``'s buffer."""
        try:
            frames = splitter.buffer_updated(nbytes)
            if not frames:
                return
            queue = self._queue
            for frame in frames:
                slot = queue.match_upstream(response_correlation_id(frame))
                if slot is None:
                    self._metrics.unsolicited_response()
                    if self._lingering is not None and not queue.unanswered_waiting:
                        self._end_linger()  # the broker has acted on every acks=0 request
                    continue
                if slot.waiter is not None:
                    slot.waiter(bytes(frame))  # the proxy's own request: not the client's
                    continue
                count = slot.count
                if count is not None:
                    count.total += len(frame)
                read = slot.read
                if read is not None:
                    read(frame, slot.api_version)
                transform = slot.transform
                if transform is None:
                    slot.fill(frame)
                    continue
                result = transform(frame, slot.api_version)
                if not isinstance(result, _FRAMES) and inspect.isawaitable(result):
                    self._spawn(self._fill_later(slot, result))
                else:
                    slot.fill(result)  # type: ignore[arg-type]
        except ProtocolError as exc:
            self._bad_input("broker", "bad_response", exc)
            return
        self._flush()

    async def _fill_later(self, slot: object, pending: Awaitable[bytes]) -> None:
        try:
            data = await pending
        except ProtocolError as exc:
            self._bad_input("broker", "bad_response", exc)
            return
        slot.fill(data)  # type: ignore[attr-defined]
        self._flush()

    def _flush(self) -> None:
        ready = self._queue.drain()
        if ready and self._transport is not None and not self._closed and not self._client_gone:
            n = 0
            for chunk in ready:
                n += len(chunk)
            self._metrics.bytes_to_client.inc(n)
            if len(ready) == 1:
                self._transport.write(ready[0])
            else:
                self._transport.writelines(ready)
        if self._draining:
            self._close_if_drained()

    def upstream_lost(self, exc: Exception | None) -> None:
        if self._closed:
            return
        if self._queue.awaiting_upstream or exc is not None:
            log.info("client %s on %s: broker closed the connection with %d request(s) in "
                     "flight; closing the client", self.info.peer, self.listener,
                     self._queue.awaiting_upstream)
        self._flush()
        self.close()

    # ----- backpressure
    def pause_writing(self) -> None:  # the client's buffer is full: stop reading upstream
        if self._upstream is not None:
            self._upstream.pause_reading()

    def resume_writing(self) -> None:
        if self._upstream is not None and not self._upstream.is_closing():
            self._upstream.resume_reading()

    def upstream_paused(self) -> None:  # the broker's buffer is full: stop reading the client
        self._pause_client("upstream")

    def upstream_resumed(self) -> None:
        self._resume_client("upstream")

    def _pause_client(self, reason: str) -> None:
        if not self._read_pauses and self._transport is not None:
            self._transport.pause_reading()
        self._read_pauses.add(reason)

    def _resume_client(self, reason: str) -> None:
        if reason not in self._read_pauses:
            return
        self._read_pauses.discard(reason)
        if not self._read_pauses and self._transport is not None and not self._closed:
            self._transport.resume_reading()

    # ----- helpers
    def _bad_input(self, side: str, reason: str, exc: Exception) -> None:
        if self._closed:
            return
        self._metrics.bad_frames.labels(side, reason).inc()
        peer = self.info.peer if side == "client" else f"broker behind {self.listener}"
        source = self.info.peer.rpartition(":")[0] or self.info.peer
        if side != "client":
            source = f"broker behind {self.listener}"
        self._guards.report(source, reason, f"closing connection of client {self.info.peer} "
                            f"on {self.listener}: {reason.replace('_', ' ')} from {peer}: {exc}")
        self.close()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("client %s on %s: internal error, closing the connection: %r",
                      self.info.peer, self.listener, exc, exc_info=exc)
            self.close()


class UpstreamConnection(asyncio.BufferedProtocol):
    """The broker side of a pair: hands every byte to its client connection."""

    def __init__(self, client: ClientConnection) -> None:
        self._client = client
        self._splitter = client.upstream_splitter()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._splitter.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._client.upstream_data(nbytes, self._splitter)

    def connection_lost(self, exc: Exception | None) -> None:
        self._client.upstream_lost(exc)

    def pause_writing(self) -> None:
        self._client.upstream_paused()

    def resume_writing(self) -> None:
        self._client.upstream_resumed()
