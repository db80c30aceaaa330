"""partition_rows: a walked Produce request's partitions as packed numbers, the counts read
the way record_counts reads them."""

from __future__ import annotations

import pytest

from benchmarks.produce_frames import kp_request, make_batch
from protocol.headers import parse_request_header
from protocol.produce import PARTITION_ROW, record_counts, walk_produce_request
from protocol.produce_partitions import partition_rows


def rows_of(frame: bytes) -> list[tuple[int, ...]]:
    view = memoryview(frame)
    request = walk_produce_request(view, parse_request_header(view))
    return list(PARTITION_ROW.iter_unpack(partition_rows(view, request)))


def test_counts_records_however_they_are_batched() -> None:
    two_batches = make_batch(2) + make_batch(3)
    garbage = b"\xff" * 70
    frame = kp_request(9, [("t", [(0, make_batch(4)), (1, two_batches), (2, garbage)]),
                           ("u", [(5, make_batch(1))])])
    assert rows_of(frame) == [
        (0, 0, 4, len(make_batch(4))), (0, 1, 5, len(two_batches)), (0, 2, -1, 70),
        (1, 5, 1, len(make_batch(1)))]


@pytest.mark.parametrize("version", [3, 9, 13])
@pytest.mark.parametrize("records", [None, b"", "batch", "two", "garbage", "cut"])
def test_one_partition_as_the_general_case_reads_it(version: int, records: object) -> None:
    batch = {"batch": make_batch(7), "two": make_batch(1) + make_batch(2),
             "garbage": b"\xff" * 70, "cut": make_batch(7)[:-1]}.get(str(records), records)
    key: str | bytes = bytes(range(16)) if version >= 13 else "t"
    one = kp_request(version, [(key, [(3, batch)])])  # type: ignore[list-item]
    # the same partition behind another in a second topic: the general loop reads it
    two = kp_request(version, [(key, [(3, batch)]),  # type: ignore[list-item]
                               (b"\x01" * 16 if version >= 13 else "u", [(0, None)])])
    view = memoryview(one)
    request = walk_produce_request(view, parse_request_header(view))
    span = request.topics[0].partitions[0].records
    expected = (0, 3, record_counts(view, (span,))[0], span[1] - span[0] if span else 0)
    assert rows_of(one) == [expected]
    assert rows_of(two)[0] == expected
