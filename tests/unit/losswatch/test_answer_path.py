"""The Produce answer path to the loss watch: which forwarded requests the enforcer hands
to the watch (acks 1 and all, in every mode; never acks 0, never a request the proxy
answers itself), and that a hook's answer reader sees the upstream answer as it arrived."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.relay.actions import ClientInfo, Forward, Reply
from tests.unit.enforce.test_enforcement_hook import Playbook, produce


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, bool]] = []  # (acks, walked already)
        self.answers: list[bytes] = []

    def __call__(self, client: ClientInfo, frame: memoryview, acks: int, header: Any,
                 request: Any, partitions: bytes | None) -> Any:
        self.calls.append((acks, request is not None))
        return lambda answer, version: self.answers.append(bytes(answer))


def watched(book: Playbook) -> Recorder:
    recorder = Recorder()
    book.enforcer.watch_answers(recorder)
    return recorder


@pytest.mark.parametrize("acks", [1, -1])
def test_no_rule_every_acknowledging_produce_is_watched(acks: int) -> None:
    book = Playbook(default_min_racks=1)
    recorder = watched(book)
    action = book(produce(9, [("orders", [0, 1])], acks=acks), 9)
    assert isinstance(action, Forward) and action.read is not None
    assert recorder.calls == [(acks, False)]  # walked by the watch, not the rule
    action.read(memoryview(b"answer"), 9)
    assert recorder.answers == [b"answer"]


def test_acks_zero_is_never_watched() -> None:
    book = Playbook(default_min_racks=1)
    recorder = watched(book)
    action = book(produce(9, [("orders", [0])], acks=0), 9)
    assert isinstance(action, Forward) and action.read is None and not action.expect_response
    assert recorder.calls == []


def test_observe_and_enforcing_modes_hand_over_the_walk() -> None:
    book = Playbook(observe=True)
    recorder = watched(book)
    action = book(produce(9, [("orders", [0, 1])]), 9)
    assert isinstance(action, Forward) and action.read is not None
    assert recorder.calls == [(-1, True)]
    book = Playbook()
    recorder = watched(book)
    mixed = book(produce(9, [("orders", [0, 1])]), 9)  # 1 is refused, 0 forwarded
    assert isinstance(mixed, Forward) and mixed.read is not None
    refused = book(produce(9, [("orders", [1])]), 9)
    assert isinstance(refused, Reply)  # answered by the proxy: nothing acknowledged


def test_without_a_watch_nothing_changes() -> None:
    book = Playbook(default_min_racks=1)
    action = book(produce(9, [("orders", [0])], acks=1), 9)
    assert isinstance(action, Forward) and action.read is None


@pytest.mark.parametrize("version", [9, 10, 11, 12, 13])
@pytest.mark.parametrize("name", ["t", "x" * 200])
def test_the_one_partition_answer_reader_agrees_with_the_full_parser(
        version: int, name: str) -> None:
    from benchmarks.produce_frames import kp_response
    from protocol.produce_results import produce_results
    from protocol.produce_single import single_partition_result as single_result

    key: str | bytes = bytes(range(16)) if version >= 13 else name
    for error, base, extra in ((0, 77, {}), (6, -1, {"error_message": "not leader"}),
                               (0, 0, {}), (19, -1, {})):
        frame = memoryview(kp_response(version, [(key, [
            {"index": 3, "error_code": error, "base_offset": base, **extra}])]))
        [(got_error, got_base)] = produce_results(frame, version).values()
        expected = got_base if got_error == 0 else None
        assert single_result(frame, version, 3) == expected
        assert single_result(frame, version, 4) is None  # not the partition asked


@pytest.mark.parametrize("version", [9, 10, 11, 12, 13])
def test_the_one_partition_request_reader_agrees_with_the_walker(version: int) -> None:
    from benchmarks.produce_frames import kp_request, make_batch
    from protocol.headers import parse_request_header
    from protocol.produce import record_count, walk_produce_request
    from protocol.produce_single import single_partition_request

    key: str | bytes = bytes(range(16)) if version >= 13 else "orders"
    two_batches = make_batch(3) + make_batch(200, value=b"x" * 300)
    for records, transactional, client in ((make_batch(1), None, "c"),
                                           (two_batches, "tx-1", "a" * 300),
                                           (make_batch(5), None, None)):
        frame = memoryview(kp_request(version, [(key, [(7, records)])],
                                      transactional_id=transactional, client_id=client))
        header = parse_request_header(frame)
        walked = walk_produce_request(frame, header)
        [topic] = walked.topics
        [p] = topic.partitions
        expected = ((client or "").encode(), topic.key, 7, record_count(frame, p.records))
        assert single_partition_request(frame) == expected
    for layout in ([(key, [(0, make_batch(1)), (1, make_batch(1))])],
                   [(key, [(0, None)])]):
        assert single_partition_request(memoryview(kp_request(version, layout))) is None
    assert single_partition_request(memoryview(kp_request(8, [("t", [(0, make_batch(1))])]))) \
        is None
