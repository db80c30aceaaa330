"""Per-connection ordering of responses (sans-IO: no sockets, no event loop).

Kafka answers a connection's requests in the order they were sent, and a
client matches responses by that order as well as by correlation id. The
proxy adds responses of its own (rejections, errors) and transforms some
upstream ones asynchronously, so every request that expects an answer gets a
slot here, in request order, and bytes leave only from the head.

Invariant: ``drain`` returns filled slots from the head and stops at the first
unfilled one; upstream responses are matched strictly first-in first-out
against the slots that wait for upstream, and a correlation id that does not
match is a protocol error (the connection must be closed). The one exception:
a response to a recent acks=0 produce (which Kafka never sends, but some
Kafka-compatible brokers do) is recognised and dropped, since the client
expects none. A request of the proxy's own on the client's connection (see
``expect_internal``) waits for upstream in order like any other but has no
slot the client sees: its answer goes to the caller's ``waiter``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from protocol.primitives import ProtocolError

# (response frame, api version) -> new frame bytes, or an awaitable of them
ResponseTransform = Callable[[memoryview, int], object]
# (response frame, api version) -> nothing: a hook that reads an answer, never changes it,
# and never raises (the loss watch's reader of Produce answers)
AnswerReader = Callable[[memoryview, int], None]


class ByteCount:
    """Bytes of the upstream answers to the requests forwarded with this count: the relay
    adds each answer frame's size (prefix included) as it arrives, before any transform
    (an attribute update, where a transform would cost a call per answer)."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        self.total = 0


class Slot:
    """One response position. ``data`` is set once the bytes for it are known."""

    __slots__ = ("correlation_id", "api_key", "api_version", "transform", "count", "data",
                 "waiter", "read")

    def __init__(
        self,
        correlation_id: int,
        api_key: int,
        api_version: int,
        transform: ResponseTransform | None = None,
        waiter: Callable[[bytes], None] | None = None,
        count: ByteCount | None = None,
        read: AnswerReader | None = None,
    ) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.transform = transform
        self.count = count
        self.read = read  # given the upstream answer before any transform
        self.data: bytes | memoryview | None = None
        self.waiter = waiter  # set: the proxy's own request; the answer goes there

    def fill(self, data: bytes | memoryview) -> None:
        if self.data is not None:
            raise RuntimeError("slot filled twice")
        self.data = data


# How many acks=0 correlation ids are remembered for the check above.
_UNANSWERED_MEMORY = 256


class ResponseQueue:
    __slots__ = ("_slots", "_awaiting_upstream", "_unanswered", "_last_was_unanswered")

    def __init__(self) -> None:
        self._slots: deque[Slot] = deque()
        self._awaiting_upstream: deque[Slot] = deque()
        self._unanswered: deque[int] = deque(maxlen=_UNANSWERED_MEMORY)
        self._last_was_unanswered = False

    def expect_none(self, correlation_id: int) -> None:
        """A request that gets no answer (acks=0 produce): no slot, but remembered."""
        self._unanswered.append(correlation_id)
        self._last_was_unanswered = True

    @property
    def unanswered_waiting(self) -> bool:
        """True while a remembered acks=0 request has not been answered (by a broker
        that answers them; Kafka never does)."""
        return bool(self._unanswered)

    @property
    def unanswered_recently(self) -> bool:
        """True when the latest request sent upstream expects no answer."""
        return self._last_was_unanswered

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def awaiting_upstream(self) -> int:
        return len(self._awaiting_upstream)

    def expect_upstream(
        self,
        correlation_id: int,
        api_key: int,
        api_version: int,
        transform: ResponseTransform | None = None,
        count: ByteCount | None = None,
        read: AnswerReader | None = None,
    ) -> Slot:
        slot = Slot(correlation_id, api_key, api_version, transform, None, count, read)
        self._slots.append(slot)
        self._awaiting_upstream.append(slot)
        self._last_was_unanswered = False
        return slot

    def expect_internal(self, correlation_id: int, api_key: int, api_version: int,
                        waiter: Callable[[bytes], None]) -> Slot:
        """A request of the proxy's own: answered upstream in order, never drained to the
        client; ``match_upstream`` returns its slot and the caller hands the answer to
        ``slot.waiter``."""
        slot = Slot(correlation_id, api_key, api_version, None, waiter)
        self._awaiting_upstream.append(slot)
        self._last_was_unanswered = False
        return slot

    def local(self, correlation_id: int, api_key: int, api_version: int, data: bytes) -> Slot:
        """A response the proxy makes itself, queued behind those in flight."""
        slot = Slot(correlation_id, api_key, api_version)
        slot.fill(data)
        self._slots.append(slot)
        return slot

    def match_upstream(self, correlation_id: int) -> Slot | None:
        """The slot an upstream response with this correlation id answers.

        None: it answers an acks=0 produce and must be dropped.
        """
        head = self._awaiting_upstream[0] if self._awaiting_upstream else None
        if (head is None or head.correlation_id != correlation_id) and (
            correlation_id in self._unanswered
        ):
            self._unanswered.remove(correlation_id)
            return None
        if head is None:
            raise ProtocolError(f"unexpected response with correlation id {correlation_id}")
        slot = self._awaiting_upstream.popleft()
        if slot.correlation_id != correlation_id:
            raise ProtocolError(
                f"response correlation id {correlation_id} does not match the oldest "
                f"request in flight ({slot.correlation_id})"
            )
        return slot

    def drain(self) -> list[bytes | memoryview]:
        out: list[bytes | memoryview] = []
        slots = self._slots
        while slots and slots[0].data is not None:
            out.append(slots.popleft().data)  # type: ignore[arg-type]
        return out
