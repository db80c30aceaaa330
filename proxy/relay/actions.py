"""What the relay and its hooks say to each other: the request hook's signature, what it
gets (:class:`ClientInfo`) and what it answers (:class:`Forward` or :class:`Reply`), and
the hooks and limits a connection is built with.

Invariant: plain values and protocols only; the relay (:mod:`.connection`) acts on them,
the hooks (enforce/, admin/, placement/, locality/) make them, and neither side imports
the other's module for them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from proxy.relay.response_queue import AnswerReader, ByteCount, ResponseTransform


@dataclass(slots=True)
class Forward:
    """Send ``frame`` upstream; queue a slot for its answer unless none is expected; the
    answer's size is added to ``count``, if given, the answer handed to ``read``, if
    given (it reads, never changes, never raises), then ``transform`` applied."""

    frame: bytes | memoryview
    expect_response: bool = True
    transform: ResponseTransform | None = None
    count: ByteCount | None = None
    read: AnswerReader | None = None


@dataclass(slots=True)
class Reply:
    """Answer the client with ``frame`` (a complete response frame); nothing goes upstream."""

    frame: bytes


Action = Forward | Reply


class UpstreamAsk(Protocol):
    """Send a request of the proxy's own on this client's upstream connection (so with
    the client's identity) and await the answer frame. ``build`` gets the correlation id
    to use; the answer never reaches the client."""

    def __call__(self, build: Callable[[int], bytes], api_key: int, api_version: int
                 ) -> Awaitable[bytes]: ...


async def _no_upstream(build: Callable[[int], bytes], api_key: int, api_version: int) -> bytes:
    raise ConnectionError("no upstream connection to ask")


@dataclass(frozen=True, slots=True)
class ClientInfo:
    peer: str
    listener: str  # "bootstrap" or "node-<id>"
    ask: UpstreamAsk = field(default=_no_upstream, compare=False, repr=False)


class RequestHook(Protocol):
    def __call__(
        self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int, corr: int
    ) -> Action | Awaitable[Action]: ...


@dataclass(frozen=True, slots=True)
class Hooks:
    """What the proxy does beyond forwarding: per-API request hooks and response rewriters."""

    request_hooks: dict[int, RequestHook]
    response_rewriters: dict[int, ResponseTransform]
    # Highest version of an API whose messages the proxy must read; above it is bad input.
    max_versions: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Limits:
    max_frame_size: int
    high_water: int
