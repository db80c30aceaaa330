"""The ledger's C completion path (proxy.ledger._ledger_native.Pending and Sink).

Invariants under test: a ledger whose forwarded entries complete in C writes
exactly the bytes, in the same order, that the Python completion path
(PendingProduce) writes for the same traffic, whatever mix of requests,
clients, views, answers (malformed ones included), completion orders, chunk
sizes and ages it sees; the usual entry really takes the C path; the queue
bounds hold on it; it leaks no references, and a ledger that is dropped is
collected; a Pending carries the fields the Python encoder reads.
"""

from __future__ import annotations

import gc
import random
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest

import proxy.ledger.recorder as ledger_module
from benchmarks.produce_frames import kp_response
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError
from protocol.produce import walk_produce_request
from proxy.enforce.policy import decide
from proxy.ledger.recorder import DecisionLedger, PendingProduce
from proxy.ledger.rows import ProduceEntry, RowFormatter
from proxy.relay.actions import ClientInfo, Forward
from tests.unit._views import part, snap, topic
from tests.unit.enforce.test_enforcement_hook import (
    CLUSTER,
    CORR,
    TOPICS,
    Playbook,
    key_of,
    produce,
)
from tests.unit.ledger._ledger_lines import partition_rows
from tests.unit.ledger.test_ledger import ledger_for, rows_in

pytestmark = pytest.mark.skipif(ledger_module.Sink is None,
                                reason="proxy.ledger._ledger_native is not built "
                                "(no C compiler)")

PARTITIONS = {"orders": 4, "audit": 2, "payments": 1}
CLIENTS = [ClientInfo("1.2.3.4:5", "bootstrap"), ClientInfo("[::1]:7", "node-1"),
           ClientInfo("10.0.0.9:1", "bootstrap")]
# the same cluster with orders-1 moved onto two racks: a refresh changes decisions
MOVED = [topic("orders", [part(0, (1, 2)), part(1, (1, 2)), part(2, (2, 3)), part(3, (3,))],
               TOPICS[0].topic_id), *TOPICS[1:]]


def answer_for(frame: bytes, version: int, rnd: random.Random) -> bytes:
    """The broker's answer to the forwarded frame: usually well formed, in order; sometimes
    reordered or cut short (which the C encoder declines)."""
    request = walk_produce_request(memoryview(frame), parse_request_header(memoryview(frame)))
    layout = [(t.key, [{"index": p.index, "error_code": rnd.choice([0, 0, 0, 6]),
                        "base_offset": rnd.randrange(10**6)} for p in t.partitions])
              for t in request.topics]
    shape = rnd.choices(["usual", "reordered", "cut"], [8, 1, 1])[0]
    if shape == "reordered" and len(layout) > 1:
        layout.reverse()
    answer = kp_response(version, layout, correlation_id=CORR)
    return answer[:-3] if shape == "cut" else answer


def traffic(play: Playbook, ledger: DecisionLedger, seed: int) -> None:
    """A seeded mix: versions, layouts, clients, interleaved answers, clock steps past the
    flush interval, a metadata refresh, a small chunk now and then."""
    rnd = random.Random(seed)
    waiting: list[tuple[Any, bytes, int]] = []
    chunks = ledger._chunks
    for step in range(300):
        if step == 150:
            play.store.apply_metadata(snap(MOVED, brokers=CLUSTER), full=True)
        if step % 70 == 69 and chunks is not None:
            chunks._chunk_bytes = rnd.choice([700, 4096, 1 << 20])
            chunks._pool.clear()
        version = rnd.choice([3, 9, 13])
        names = rnd.sample(sorted(PARTITIONS), rnd.randint(1, 2))
        layout = [(n, sorted(rnd.sample(range(PARTITIONS[n]), rnd.randint(1, PARTITIONS[n]))))
                  for n in names]
        frame = produce(version, layout)
        client = rnd.choice(CLIENTS)
        action = play.enforcer(client, memoryview(frame), 0, version, CORR)
        if isinstance(action, Forward) and action.transform is not None:
            waiting.append((action.transform, action.frame, version))
        while waiting and (len(waiting) > 4 or rnd.random() < 0.5):
            transform, sent, v = waiting.pop(rnd.randrange(len(waiting)))
            play.clock.t += rnd.choices([0.001, 0.01, 0.3], [10, 5, 1])[0]
            complete(transform, answer_for(bytes(sent), v, rnd), v)
    for transform, sent, v in waiting:
        complete(transform, answer_for(bytes(sent), v, rnd), v)


def complete(transform: Any, answer: bytes, version: int) -> None:
    try:
        transform(memoryview(answer), version)
    except ProtocolError:  # a cut answer to a mixed request: the merge refuses it, as
        pass  # the proxy does (the connection closes); the ledger recorded it before


def run_traffic(tmp_path: Path, seed: int, observe: bool, fast: bool,
                monkeypatch: pytest.MonkeyPatch, no_c: bool = False) -> tuple[bytes, int]:
    """(the decision files' bytes, entries done in C). ``fast``: with the C completion;
    ``no_c``: as if the C module were not built (the writer encodes every entry)."""
    with monkeypatch.context() as patch:
        if not fast:
            patch.setattr(ledger_module, "Sink", None)
        if no_c:
            patch.setattr(ledger_module, "NATIVE_ROWS", None)
        play = Playbook(observe=observe)
        ledger, _ = ledger_for(play, tmp_path)
    tmp_path.mkdir()
    traffic(play, ledger, seed)
    ledger.flush()
    sink = ledger._sink
    assert (sink is not None) == fast and (ledger._chunks is None) == no_c
    return (b"".join(p.read_bytes() for p in ledger.decision_files),
            sink.fast_entries if sink is not None else 0)


@pytest.mark.parametrize("observe", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_c_completion_writes_what_the_python_completion_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, observe: bool
) -> None:
    fast, in_c = run_traffic(tmp_path / "c", seed, observe, True, monkeypatch)
    slow, _ = run_traffic(tmp_path / "py", seed, observe, False, monkeypatch)
    assert fast == slow
    assert fast.count(b"\n") > 100
    # most forwarded entries are usual (in observe mode all are forwarded; enforcing, a
    # mixed request's forwarded part goes to the Python path)
    assert in_c > (100 if observe else 20)


def test_without_the_c_module_the_same_lines_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no C compiler was found, every entry is encoded on the writer thread in
    completion order (with chunks, a declined entry's line may come before rows still in
    the open chunk: the same lines, another order)."""
    with_c, _ = run_traffic(tmp_path / "c", 4, True, True, monkeypatch)
    python, in_c = run_traffic(tmp_path / "py", 4, True, False, monkeypatch, no_c=True)
    assert in_c == 0 and with_c.count(b"\n") > 100
    assert sorted(with_c.splitlines()) == sorted(python.splitlines())


def test_the_usual_entry_completes_in_c(tmp_path: Path) -> None:
    """After the first entry (which publishes the view's context cache and the client),
    every usual entry is added by the C path; the Python path is not called for them."""
    play = Playbook(observe=True)
    ledger, _ = ledger_for(play, tmp_path)
    sink = ledger._sink
    assert sink is not None
    calls: list[object] = []
    python_path = sink.slow
    sink.slow = lambda entry: (calls.append(entry), python_path(entry))
    answer = kp_response(9, [("orders", [{"index": 0, "error_code": 0, "base_offset": 5}])],
                         correlation_id=CORR)
    for _ in range(10):
        action = play(produce(9, [("orders", [0])]), 9)
        assert isinstance(action, Forward) and action.transform is not None
        out = action.transform(memoryview(answer), 9)
        assert bytes(out) == answer  # type: ignore[arg-type]
    assert len(calls) == 1 and sink.fast_entries == 9
    assert sink.prepared_entries == 9  # encoded when recorded, but for the answer
    assert play.transform_calls == [(answer, 9)] * 10
    ledger.flush()
    assert sum(p.read_bytes().count(b"\n") for p in ledger.decision_files) == 10


def test_a_prepared_entry_lets_go_of_its_request(tmp_path: Path) -> None:
    """Once the view's contexts and the client are known, an entry is encoded when it is
    recorded and keeps none of the request's objects for the round trip; the answer is
    filled in later, in C, or in Python when the C code declines it (here: reordered)."""
    play = Playbook(observe=True)
    ledger, _ = ledger_for(play, tmp_path)
    layout = [("orders", [0, 2]), ("payments", [0])]
    ordered = kp_response(9, [
        ("orders", [{"index": 0, "error_code": 0, "base_offset": 1},
                    {"index": 2, "error_code": 0, "base_offset": 2}]),
        ("payments", [{"index": 0, "error_code": 0, "base_offset": 3}])], correlation_id=CORR)
    first = play(produce(9, layout), 9)
    first.transform(memoryview(ordered), 9)  # publishes the contexts and the client
    assert first.transform.prepared is None and first.transform.decisions is not None
    second, third = play(produce(9, layout), 9), play(produce(9, layout), 9)
    pending = second.transform
    assert pending.prepared is not None and pending.rows == 3
    assert (pending.request, pending.frame, pending.decisions) == (None, None, None)
    second.transform(memoryview(ordered), 9)
    reordered = kp_response(9, [
        ("payments", [{"index": 0, "error_code": 6, "base_offset": -1}]),
        ("orders", [{"index": 2, "error_code": 0, "base_offset": 9},
                    {"index": 0, "error_code": 0, "base_offset": 8}])], correlation_id=CORR)
    third.transform(memoryview(reordered), 9)
    assert ledger._sink is not None and ledger._sink.fast_entries == 1
    ledger.flush()
    rows = [(r["req"], r["topic"], r["partition"], r["broker_error"], r["base_offset"])
            for r in rows_in(ledger.decision_files)]
    assert sorted(rows) == [(1, "orders", 0, 0, 1), (1, "orders", 2, 0, 2),
                            (1, "payments", 0, 0, 3), (2, "orders", 0, 0, 1),
                            (2, "orders", 2, 0, 2), (2, "payments", 0, 0, 3),
                            (3, "orders", 0, 0, 8), (3, "orders", 2, 0, 9),
                            (3, "payments", 0, 6, -1)]


def test_the_c_path_keeps_the_queue_bounds(tmp_path: Path) -> None:
    play = Playbook(observe=True)
    ledger, registry = ledger_for(play, tmp_path, queue_size=7)
    answer = kp_response(9, [("orders", [{"index": i, "error_code": 0, "base_offset": 5}
                                         for i in (0, 1)])], correlation_id=CORR)
    for _ in range(10):
        action = play(produce(9, [("orders", [0, 1])]), 9)
        action.transform(memoryview(answer), 9)
    assert ledger._sink is not None and ledger._sink.fast_entries == 2
    assert registry.get_sample_value("rackguard_ledger_rows_dropped_total",
                                     {"reason": "queue_full"}) == 14
    assert ledger.flush() == 6


def test_a_completion_leaks_no_references(tmp_path: Path) -> None:
    play = Playbook(observe=True)
    ledger, _ = ledger_for(play, tmp_path)
    frame = produce(9, [("orders", [0, 2])])
    answer = memoryview(kp_response(9, [("orders", [
        {"index": i, "error_code": 0, "base_offset": 5} for i in (0, 2)])], correlation_id=CORR))
    sink = ledger._sink
    play(frame, 9).transform(answer, 9)  # the first publishes the caches
    ledger.flush()
    before = (sys.getrefcount(answer), sys.getrefcount(sink), sys.getrefcount(play.store.view))
    for _ in range(200):
        play(frame, 9).transform(answer, 9)
    ledger.flush()
    play.transform_calls.clear()
    assert sink is not None and sink.fast_entries == 199  # the first opens a chunk, in Python
    assert (sys.getrefcount(answer), sys.getrefcount(sink),
            sys.getrefcount(play.store.view)) == before


def test_a_dropped_ledger_is_collected(tmp_path: Path) -> None:
    """The sink refers back to the ledger (its Python path), and a declined Pending in the
    queue to the sink: the cycle is the garbage collector's to break."""
    play = Playbook(observe=True)
    ledger, registry = ledger_for(play, tmp_path)
    action = play(produce(9, [("orders", [0])]), 9)
    action.transform(memoryview(b"\x00\x00\x00\x01\x00"), 9)  # unreadable: queued as it is
    assert len(ledger._queue) == 1
    gone = weakref.ref(ledger)
    del ledger, action, registry  # (the registry's queue gauge reads the sink)
    play.enforcer = None  # type: ignore[assignment]
    gc.collect()
    assert gone() is None


def test_a_pending_entry_has_the_fields_the_python_encoder_reads(tmp_path: Path) -> None:
    play = Playbook(observe=True)
    ledger, _ = ledger_for(play, tmp_path)
    frame = memoryview(produce(13, [("orders", [0, 1]), ("payments", [0])]))
    header = parse_request_header(frame)
    request = walk_produce_request(frame, header)
    view = play.store.view
    decisions = decide(request, view, play.settings.rule, play.clock())
    args = (1_700_000_000.25, 42, header.client_id, "1.2.3.4:5", request, frame, decisions,
            view, True, None)
    pending = ledger.record(ClientInfo("1.2.3.4:5", "bootstrap"), header, request, frame,
                            decisions, view, True, None, play.clock())
    assert type(pending) is not PendingProduce  # the C twin
    reference = ProduceEntry(*args)
    pending.wall, pending.req = args[0], args[1]
    answer = memoryview(kp_response(13, [
        (key_of("orders", 13), [{"index": i, "error_code": 0, "base_offset": 9}
                                for i in (0, 1)]),
        (key_of("payments", 13), [{"index": 0, "error_code": 0, "base_offset": 3}])],
        correlation_id=CORR))
    for e in (pending, reference):
        e.answer, e.version, e.latency_ms = answer, 13, 12.5
    lines: list[list[bytes]] = [[], []]
    RowFormatter("i").python_lines(pending, lines[0])
    RowFormatter("i").python_lines(reference, lines[1])
    assert lines[0] == lines[1] and len(partition_rows(lines[0][0].decode())) == 3


def test_misuse_of_a_pending_entry_raises(tmp_path: Path) -> None:
    play = Playbook(observe=True)
    ledger, _ = ledger_for(play, tmp_path)
    assert ledger_module.Pending is not None
    with pytest.raises(TypeError):
        ledger_module.Pending(1.0, 2)
    frame = memoryview(produce(9, [("orders", [0])]))
    header = parse_request_header(frame)
    request = walk_produce_request(frame, header)
    pending = ledger.record(ClientInfo("1.2.3.4:5", "b"), header, request, frame,
                            decide(request, play.store.view, play.settings.rule, play.clock()),
                            play.store.view, True, None, play.clock())
    with pytest.raises(RuntimeError):
        pending(frame, 9)  # no transform wrapped
    wrapped = pending.wrap(play.transform)
    assert wrapped is pending
    with pytest.raises(TypeError):
        pending(frame)
    with pytest.raises(TypeError):
        pending(frame, "9")
