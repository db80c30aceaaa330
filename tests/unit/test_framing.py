"""protocol.framing.FrameSplitter: a byte stream cut into size-prefixed frames.

Invariant under test: however the stream is chunked, ``feed`` returns exactly
the frames that were sent (size prefix included), each complete, in order, as
memoryviews over immutable bytes; ``buffered`` counts the bytes of the frame
still incomplete; a negative or oversized size raises FrameError (a
ProtocolError) and poisons the splitter.
"""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.framing import DEFAULT_MAX_FRAME_SIZE, FrameError, FrameSplitter, frame
from protocol.primitives import ProtocolError

FAST = settings(max_examples=200, deadline=None)


def feed_all(splitter: FrameSplitter, chunks: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for chunk in chunks:
        for f in splitter.feed(chunk):
            assert isinstance(f, memoryview)
            assert isinstance(f.obj, bytes), "a frame must be a view over immutable bytes"
            out.append(bytes(f))
    return out


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


def test_large_frame_in_many_chunks_is_joined_once() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    whole = frame(body)
    step = 4096
    chunks = [whole[i : i + step] for i in range(0, len(whole), step)]
    s = FrameSplitter()
    for k, chunk in enumerate(chunks[:-1], start=1):
        assert s.feed(chunk) == []
        assert s.buffered == k * step
        # the pending chunks are kept as they came, not re-joined on every feed
        assert len(s._chunks) == k
    out = s.feed(chunks[-1])
    assert len(out) == 1
    assert out[0].obj is not None and len(out[0].obj) == len(whole)  # one buffer
    assert out[0] == whole
    assert s.buffered == 0
    assert s._chunks == []


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
