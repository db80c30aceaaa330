"""proxy.relay.response_queue: per-connection response order, without sockets.

Invariant under test: ``drain`` releases filled slots from the head in request
order and stops at the first unfilled one; upstream responses are matched
first-in first-out against only the slots that wait for upstream; a
correlation id out of order is a ProtocolError.
"""

from __future__ import annotations

import pytest

from protocol.primitives import ProtocolError
from proxy.relay.response_queue import ByteCount, ResponseQueue, Slot


def test_empty_queue() -> None:
    q = ResponseQueue()
    assert len(q) == 0
    assert q.awaiting_upstream == 0
    assert q.drain() == []


def test_upstream_only_in_order() -> None:
    q = ResponseQueue()
    for corr in (1, 2, 3):
        q.expect_upstream(corr, 0, 9)
    assert (len(q), q.awaiting_upstream) == (3, 3)
    q.match_upstream(1).fill(b"r1")
    assert q.drain() == [b"r1"]
    q.match_upstream(2).fill(b"r2")
    q.match_upstream(3).fill(b"r3")
    assert q.drain() == [b"r2", b"r3"]
    assert (len(q), q.awaiting_upstream) == (0, 0)


def test_local_slot_waits_behind_requests_in_flight() -> None:
    q = ResponseQueue()
    q.expect_upstream(1, 3, 12)
    q.local(2, 0, 9, b"local-2")
    assert q.drain() == []  # the upstream answer for 1 must go first
    q.match_upstream(1).fill(b"up-1")
    assert q.drain() == [b"up-1", b"local-2"]


def test_local_slot_at_head_drains_at_once() -> None:
    q = ResponseQueue()
    slot = q.local(5, 0, 9, b"now")
    assert slot.data == b"now"
    assert q.drain() == [b"now"]


def test_mixed_local_and_upstream() -> None:
    q = ResponseQueue()
    q.expect_upstream(1, 3, 12)             # upstream
    q.local(2, 0, 9, b"L2")                 # local
    q.expect_upstream(4, 1, 12)             # upstream
    q.local(5, 0, 9, b"L5")                 # local
    assert q.awaiting_upstream == 2         # local slots do not wait upstream
    assert len(q) == 4

    # upstream 4 cannot be matched before 1 (FIFO among upstream slots only)
    u1 = q.match_upstream(1)
    u4 = q.match_upstream(4)
    assert (u1.correlation_id, u4.correlation_id) == (1, 4)
    assert q.awaiting_upstream == 0

    u4.fill(b"U4")
    assert q.drain() == []                  # head (1) unfilled: nothing leaves
    u1.fill(b"U1")
    assert q.drain() == [b"U1", b"L2", b"U4", b"L5"]
    assert len(q) == 0


def test_drain_stops_at_first_unfilled_even_if_later_ones_are_filled() -> None:
    q = ResponseQueue()
    for c in range(5):
        q.expect_upstream(c, 0, 9)
    slots = [q.match_upstream(c) for c in range(5)]
    for s in slots[1:]:
        assert s is not None
        s.fill(f"r{s.correlation_id}".encode())
    assert q.drain() == []
    assert slots[0] is not None
    slots[0].fill(b"r0")
    assert q.drain() == [b"r0", b"r1", b"r2", b"r3", b"r4"]


def test_upstream_response_skips_local_slots() -> None:
    q = ResponseQueue()
    q.local(2, 0, 9, b"L2")
    q.expect_upstream(3, 3, 12)
    slot = q.match_upstream(3)
    assert slot is not None and slot.correlation_id == 3


def test_mismatched_correlation_id_raises() -> None:
    q = ResponseQueue()
    q.expect_upstream(10, 3, 12)
    q.expect_upstream(11, 3, 12)
    with pytest.raises(ProtocolError, match="11"):
        q.match_upstream(11)


def test_response_with_nothing_in_flight_raises() -> None:
    q = ResponseQueue()
    q.local(1, 0, 9, b"L")
    with pytest.raises(ProtocolError):
        q.match_upstream(1)
    q.expect_upstream(3, 3, 12)
    q.match_upstream(3)
    with pytest.raises(ProtocolError):
        q.match_upstream(3)  # answered already


def test_slot_keeps_request_facts_and_transform() -> None:
    def transform(frame: memoryview, version: int) -> bytes:
        return bytes(frame)

    q = ResponseQueue()
    slot = q.expect_upstream(42, 3, 12, transform)
    assert (slot.correlation_id, slot.api_key, slot.api_version) == (42, 3, 12)
    assert slot.transform is transform
    assert slot.data is None
    assert q.local(43, 0, 9, b"x").transform is None
    count = ByteCount()
    assert q.expect_upstream(44, 1, 12, None, count).count is count
    assert slot.count is None and count.total == 0


def test_slot_filled_twice_raises() -> None:
    slot = Slot(1, 0, 9)
    slot.fill(b"a")
    with pytest.raises(RuntimeError):
        slot.fill(b"b")
    assert slot.data == b"a"


def test_memoryview_data_passes_through_unchanged() -> None:
    q = ResponseQueue()
    view = memoryview(b"frame-bytes")
    q.expect_upstream(1, 0, 9)
    q.match_upstream(1).fill(view)
    out = q.drain()
    assert out[0] is view


def test_empty_bytes_count_as_filled() -> None:
    q = ResponseQueue()
    q.expect_upstream(1, 0, 9)
    slot = q.match_upstream(1)
    assert slot is not None
    slot.fill(b"")
    q.local(2, 0, 9, b"x")
    assert q.drain() == [b"", b"x"]


def test_internal_request_waits_in_order_and_is_never_drained() -> None:
    q = ResponseQueue()
    got: list[bytes] = []
    q.expect_upstream(1, 3, 12)
    internal = q.expect_internal(-1, 44, 0, got.append)
    q.expect_upstream(2, 3, 12)
    assert (len(q), q.awaiting_upstream) == (2, 3)  # no slot the client sees
    q.match_upstream(1).fill(b"r1")
    slot = q.match_upstream(-1)
    assert slot is internal and slot.waiter is not None
    slot.waiter(b"mine")
    q.match_upstream(2).fill(b"r2")
    assert q.drain() == [b"r1", b"r2"] and got == [b"mine"]
    q.expect_internal(-2, 44, 0, got.append)
    with pytest.raises(ProtocolError):
        q.match_upstream(3)  # the proxy's own request is answered first
