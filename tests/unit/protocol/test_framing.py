"""protocol.framing.FrameSplitter: a byte stream cut into size-prefixed frames.

Invariant under test: however the stream is chunked, and whether it is fed
(``feed``) or read into the splitter's memory (``get_buffer`` /
``buffer_updated``), it returns exactly the frames that were sent (size prefix
included), each complete, in order, as read-only memoryviews that later reads
never change; ``buffered`` counts the bytes of the frame still incomplete; a
negative or oversized size raises FrameError (a ProtocolError) and poisons the
splitter.
"""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import protocol.framing
from protocol.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    DIRECT_READ_MIN,
    EAGER_MAX,
    POOL_MIN,
    FrameError,
    FrameSplitter,
    ReadMemory,
    frame,
)
from protocol.primitives import ProtocolError

FAST = settings(max_examples=200, deadline=None)


def feed_all(splitter: FrameSplitter, chunks: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for chunk in chunks:
        for f in splitter.feed(chunk):
            assert isinstance(f, memoryview)
            assert f.readonly, "a frame must be a read-only view"
            out.append(bytes(f))
    return out


def read_all(splitter: FrameSplitter, chunks: list[bytes]) -> list[bytes]:
    """As a BufferedProtocol transport does: each chunk read into get_buffer()'s memory
    (in several reads when it does not fit). Frames are checked once all is read, so a
    frame whose memory a later read reused would show up as corrupt."""
    got: list[memoryview] = []
    for chunk in chunks:
        pos = 0
        while pos < len(chunk):
            buf = splitter.get_buffer()
            assert len(buf) > 0 and not buf.readonly
            n = min(len(buf), len(chunk) - pos)
            buf[:n] = chunk[pos : pos + n]
            pos += n
            for f in splitter.buffer_updated(n):
                assert isinstance(f, memoryview) and f.readonly
                got.append(f)
    return [bytes(f) for f in got]


def cut(stream: bytes, points: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(points)), len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


def test_frame_prefixes_size() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"


def test_one_chunk_many_frames() -> None:
    frames = [frame(b"a"), frame(b""), frame(b"xyz" * 10)]
    s = FrameSplitter()
    assert feed_all(s, [b"".join(frames)]) == frames
    assert s.buffered == 0


def test_every_single_cut_and_every_pair_of_cuts() -> None:
    frames = [frame(b"hello"), frame(b""), frame(b"\x00\x01\x02"), frame(b"world!")]
    stream = b"".join(frames)
    for i in range(len(stream) + 1):
        assert feed_all(FrameSplitter(), cut(stream, [i])) == frames, i
    for i, j in itertools.combinations(range(1, len(stream)), 2):
        assert feed_all(FrameSplitter(), cut(stream, [i, j])) == frames, (i, j)


def test_byte_by_byte_buffered_counts() -> None:
    frames = [frame(b"abcdef"), frame(b"gh")]
    stream = b"".join(frames)
    s = FrameSplitter()
    got: list[bytes] = []
    pending = 0
    boundaries = {len(frames[0]), len(stream)}
    for i in range(len(stream)):
        out = s.feed(stream[i : i + 1])
        pending += 1
        if i + 1 in boundaries:
            assert len(out) == 1
            got.append(bytes(out[0]))
            pending = 0
        else:
            assert out == []
        assert s.buffered == pending
    assert got == frames


BODIES = st.lists(st.binary(max_size=40), min_size=0, max_size=6)


@FAST
@given(BODIES, st.data())
def test_any_chunking_yields_the_frames(bodies: list[bytes], data: st.DataObject) -> None:
    frames = [frame(b) for b in bodies]
    stream = b"".join(frames)
    points = data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=12))
    s = FrameSplitter(max_frame_size=64)
    assert feed_all(s, cut(stream, points)) == frames
    assert s.buffered == 0


@FAST
@given(BODIES)
def test_byte_by_byte_yields_the_frames(bodies: list[bytes]) -> None:
    frames = [frame(b) for b in bodies]
    stream = b"".join(frames)
    s = FrameSplitter()
    assert feed_all(s, [stream[i : i + 1] for i in range(len(stream))]) == frames
    assert s.buffered == 0


@FAST
@given(BODIES, st.binary(min_size=1, max_size=30))
def test_incomplete_tail_stays_buffered(bodies: list[bytes], tail_body: bytes) -> None:
    frames = [frame(b) for b in bodies]
    tail = frame(tail_body)[:-1]
    s = FrameSplitter()
    assert feed_all(s, [b"".join(frames) + tail]) == frames
    assert s.buffered == len(tail)
    assert feed_all(s, [frame(tail_body)[-1:]]) == [frame(tail_body)]
    assert s.buffered == 0


def test_large_frame_in_many_chunks_gets_one_buffer() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    whole = frame(body)
    step = 4096
    chunks = [whole[i : i + step] for i in range(0, len(whole), step)]
    s = FrameSplitter()
    for k, chunk in enumerate(chunks[:-1], start=1):
        assert s.feed(chunk) == []
        assert s.buffered == k * step
        # one buffer of the frame's full size from its first piece on, never re-joined
        assert s._frame_view is not None and len(s._frame_view) == len(whole)
    out = s.feed(chunks[-1])
    assert len(out) == 1
    assert out[0].obj is not None and len(out[0].obj) == len(whole)  # one buffer
    assert out[0] == whole
    assert s.buffered == 0
    assert s._frame_view is None


def test_large_frame_is_read_into_its_own_buffer() -> None:
    whole = frame(bytes(range(256)) * 4096)
    memory = ReadMemory()
    scratch = memory.scratch.obj
    s = FrameSplitter(memory=memory)
    first = s.get_buffer()
    assert first.obj is scratch  # size unknown: the shared scratch
    first[:1000] = whole[:1000]
    assert s.buffer_updated(1000) == []
    pos = 1000
    direct = 0
    while True:
        buf = s.get_buffer()
        if buf.obj is not scratch:
            direct += 1
        n = min(len(buf), 100_000, len(whole) - pos)
        buf[:n] = whole[pos : pos + n]
        pos += n
        out = s.buffer_updated(n)
        if out:
            break
    assert direct > 0 and pos == len(whole)
    assert out == [whole] and out[0].readonly
    assert s.get_buffer().obj is scratch


def test_shared_scratch_between_splitters() -> None:
    memory = ReadMemory()
    a, b = FrameSplitter(memory=memory), FrameSplitter(memory=memory)
    fa, fb = frame(b"from a" * 10), frame(b"from b" * 10)
    got_a = read_all(a, [fa[:7]]) + read_all(b, [fb]) + read_all(a, [fa[7:]])
    assert got_a == [fb, fa]
    assert a.buffered == 0 and b.buffered == 0


@FAST
@given(st.lists(st.binary(max_size=40), max_size=6), st.data())
def test_reading_into_the_buffer_yields_the_frames(
    bodies: list[bytes], data: st.DataObject
) -> None:
    big = data.draw(st.sampled_from([b"", b"L" * (DIRECT_READ_MIN + 3), b"M" * 100_000]))
    frames = [frame(b) for b in [*bodies, big, *bodies]]
    stream = b"".join(frames)
    points = data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=12))
    s = FrameSplitter(max_frame_size=200_000, memory=ReadMemory(scratch_size=1024))
    assert read_all(s, cut(stream, points)) == frames
    assert s.buffered == 0


def test_failed_splitter_still_gives_a_buffer() -> None:
    s = FrameSplitter(max_frame_size=1024)
    buf = s.get_buffer()
    buf[:4] = struct.pack(">i", -1)
    with pytest.raises(FrameError):
        s.buffer_updated(4)
    assert len(s.get_buffer()) > 0
    with pytest.raises(FrameError):
        s.buffer_updated(1)


def test_large_frame_followed_by_small_ones() -> None:
    big = frame(b"x" * 100_000)
    small = [frame(b"a"), frame(b"bc")]
    stream = big + b"".join(small)
    s = FrameSplitter()
    chunks = [stream[i : i + 7000] for i in range(0, len(stream), 7000)]
    assert feed_all(s, chunks) == [big, *small]


def test_zero_length_frame() -> None:
    s = FrameSplitter()
    assert feed_all(s, [b"\x00\x00", b"\x00\x00"]) == [b"\x00\x00\x00\x00"]


@pytest.mark.parametrize("pieces", [[b"\xff\xff\xff\xff"], [b"\xff\xff", b"\xff\xfe"],
                                    [b"\xff", b"\xff", b"\xff", b"\xff"]])
def test_negative_size_raises(pieces: list[bytes]) -> None:
    s = FrameSplitter()
    with pytest.raises(FrameError, match="negative"):
        for piece in pieces:
            s.feed(piece)


def test_negative_size_after_a_good_frame() -> None:
    s = FrameSplitter()
    assert feed_all(s, [frame(b"ok")]) == [frame(b"ok")]
    with pytest.raises(FrameError):
        s.feed(struct.pack(">i", -5))


def test_oversized_detected_from_the_prefix_alone() -> None:
    s = FrameSplitter(max_frame_size=1024)
    assert feed_all(FrameSplitter(max_frame_size=1024), [frame(b"a" * 1024)]) == [
        frame(b"a" * 1024)
    ]
    with pytest.raises(FrameError, match="exceeds"):
        s.feed(struct.pack(">i", 1025))  # no body needed to refuse it


def test_oversized_when_prefix_arrives_in_pieces() -> None:
    s = FrameSplitter(max_frame_size=1024)
    assert s.feed(b"\x00\x00") == []
    with pytest.raises(FrameError):
        s.feed(b"\x04\x01")


def test_default_max_frame_size() -> None:
    s = FrameSplitter()
    with pytest.raises(FrameError):
        s.feed(struct.pack(">i", DEFAULT_MAX_FRAME_SIZE + 1))


@pytest.mark.parametrize("bad", [struct.pack(">i", -1), struct.pack(">i", 1 << 30)])
def test_poisoned_after_error(bad: bytes) -> None:
    s = FrameSplitter(max_frame_size=1024)
    with pytest.raises(FrameError):
        s.feed(bad)
    for good in (frame(b"fine"), b"", b"\x00"):
        with pytest.raises(FrameError):
            s.feed(good)


def test_frame_error_is_a_protocol_error() -> None:
    assert issubclass(FrameError, ProtocolError)


def test_frames_stay_valid_after_more_feeding() -> None:
    s = FrameSplitter()
    later = frame(b"two-more")
    first = s.feed(frame(b"one") + later[:5])
    assert [bytes(f) for f in first] == [frame(b"one")]
    assert s.buffered == 5
    second = s.feed(later[5:])
    assert [bytes(f) for f in second] == [later]
    assert bytes(first[0]) == frame(b"one")


def test_pooled_buffer_reused_only_when_no_view_is_left() -> None:
    memory = ReadMemory()
    size = POOL_MIN * 4
    a = memory.frame_buffer(size)
    assert len(a) >= size
    view = memoryview(a)[:size].toreadonly()
    del a
    b = memory.frame_buffer(size)  # ``a`` is still seen through ``view``
    assert b is not view.obj
    del b
    del view
    c = memory.frame_buffer(size)  # both free now: one of them comes back
    assert any(c is b for b in memory._pool)
    assert len(memory.frame_buffer(POOL_MIN - 1)) == POOL_MIN - 1  # small: never pooled


def test_pool_is_bounded() -> None:
    memory = ReadMemory(pool_bytes=POOL_MIN * 3)
    held = [memoryview(memory.frame_buffer(POOL_MIN)) for _ in range(5)]  # as frames are
    assert sum(len(b) for b in memory._pool) <= POOL_MIN * 3
    assert len({id(b.obj) for b in held}) == 5
    del held
    big = memory.frame_buffer(POOL_MIN * 3)  # free ones of the wrong size make room
    assert len(big) >= POOL_MIN * 3
    assert memory._pool == [big]


def test_frames_from_pooled_buffers_survive_later_reads() -> None:
    memory = ReadMemory(pool_bytes=POOL_MIN * 8)
    frames = [frame(bytes([i]) * (POOL_MIN + 10 * i)) for i in range(6)]
    s = FrameSplitter(memory=memory)
    assert read_all(s, [f[:3000] + f[3000:] for f in frames]) == frames
    kept = []
    for f in frames:
        kept.extend(s.feed(f[:100]) + s.feed(f[100:]))
    assert [bytes(k) for k in kept] == frames


def test_a_size_prefix_alone_claims_at_most_eager_max() -> None:
    s = FrameSplitter()
    assert s.feed(struct.pack(">i", 50 * 1024 * 1024)) == []
    assert s._frame_view is not None and len(s._frame_view) == EAGER_MAX


def test_frame_above_eager_max_grows_as_it_arrives() -> None:
    whole = frame(bytes(range(256)) * (EAGER_MAX // 256 * 2 + 100))
    s = FrameSplitter(memory=ReadMemory())
    buf = s.get_buffer()
    buf[:10] = whole[:10]
    assert s.buffer_updated(10) == []
    pos, sizes = 10, []
    while True:
        buf = s.get_buffer()
        sizes.append(len(s._frame_view))  # type: ignore[arg-type]
        n = min(len(buf), 300_000, len(whole) - pos)
        buf[:n] = whole[pos : pos + n]
        pos += n
        out = s.buffer_updated(n)
        if out:
            break
    assert sizes[0] == EAGER_MAX and max(sizes) == len(whole) and sizes == sorted(sizes)
    assert out == [whole]


@FAST
@given(st.lists(st.binary(max_size=300), max_size=5), st.data())
def test_growing_frames_any_chunking(bodies: list[bytes], data: st.DataObject) -> None:
    frames = [frame(b) for b in bodies]
    stream = b"".join(frames)
    points = data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=12))
    eager = protocol.framing.EAGER_MAX
    protocol.framing.EAGER_MAX = 7  # every frame above 7 bytes grows
    try:
        assert read_all(FrameSplitter(memory=ReadMemory(scratch_size=64)),
                        cut(stream, points)) == frames
        assert feed_all(FrameSplitter(), cut(stream, points)) == frames
    finally:
        protocol.framing.EAGER_MAX = eager
