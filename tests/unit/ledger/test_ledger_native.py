"""proxy.ledger._ledger_native: the C row encoder against the Python reference,
differentially.

Invariant under test: for any entry (Produce v3-v13 request, decisions on a view,
any broker answer, well-formed or not), whenever the C encoder does not decline
(return None) its bytes equal ``RowFormatter.python_lines``' byte for byte and
Python reads the answer as readable; and it never declines the usual case: no
answer, or a well-formed answer whose partitions are exactly the entry's
forwarded decisions, in order, each (topic, partition) once.
"""

from __future__ import annotations

import functools
import random
import shutil
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from benchmarks.produce_frames import kp_request, kp_response, make_batch
from protocol.headers import parse_request_header
from protocol.primitives import encode_uvarint
from protocol.produce import TopicKey, walk_produce_request
from proxy.cluster.view import ClusterViewStore
from proxy.enforce.policy import REJECTING, RackRule, decide
from proxy.ledger.rows import NATIVE_ROWS, ContextCache, ProduceEntry, RowFormatter
from tests.unit._views import Clock, broker, part, snap, tid, topic
from tests.unit.ledger._ledger_lines import partition_rows

Tags = list[tuple[int, bytes]]
Part = tuple[int, int, int, list[tuple[int, bytes | None]], bytes | None, Tags]
Topic = tuple[bytes, list[Part], Tags]  # key: UTF-8 name (v3-v12) or 16-byte id (v13)

NAMES = ['t"ö', "plain", "ü\\\n\u2028x"]
RULE = RackRule(default_min_racks=2, topic_min_racks={"plain": 1}, max_metadata_age_s=10.0)
REFRESHED = ClusterViewStore(Clock(100.0))
REFRESHED.apply_metadata(snap(
    [topic(n, [part(0, (1, 2)), part(1, (1, 3)), part(2, ())], tid(i + 1))
     for i, n in enumerate(NAMES)],
    brokers=(broker(1, "rack-a"), broker(2, "rack-b"), broker(3, "rack-a"))), full=True)
REFRESHED.apply_min_insync_replicas({NAMES[2]: 3})
NEVER = ClusterViewStore(Clock(100.0))  # never refreshed: metadata age is infinite
AGES = [0.0, -0.0, -1.0, 5e-7, 0.0005, 12.3456789, 1e300, float("inf"), float("nan")]
USUAL_AGES = [0.0, 5e-7, 0.0005, 12.3456789, 86_400.5, float("inf")]  # 1e300 s: C declines
ANSWERS = ["ok", "shuffle", "missing", "extra", "duplicate", "split", "empty_topic",
           "truncate", "trailing", "random", "size", "flip", "version"]
needs_c = pytest.mark.skipif(NATIVE_ROWS is None,
                             reason="proxy.ledger._ledger_native is not built "
                             "(no C compiler at install; see test_the_c_encoder_is_built)")


def _arr(n: int, flex: bool) -> bytes:
    return encode_uvarint(n + 1) if flex else struct.pack(">i", n)


def _str(raw: bytes | None, flex: bool) -> bytes:
    if raw is None:
        return b"\x00" if flex else b"\xff\xff"
    return (encode_uvarint(len(raw) + 1) if flex else struct.pack(">h", len(raw))) + raw


def _tags(fields: Tags) -> bytes:
    return encode_uvarint(len(fields)) + b"".join(
        encode_uvarint(t) + encode_uvarint(len(d)) + d for t, d in fields)


def encode_answer(version: int, topics: list[Topic], header: Tags, body: Tags) -> bytes:
    """A Produce response frame built field by field (tagged fields wherever flexible)."""
    flex = version >= 9
    out = [struct.pack(">i", 42), _tags(header) if flex else b"", _arr(len(topics), flex)]
    for key, parts, ttags in topics:
        out += [key if version >= 13 else _str(key, flex), _arr(len(parts), flex)]
        for index, code, offset, errors, message, ptags in parts:
            out.append(struct.pack(">ihqq", index, code, offset, -1))
            out.append(struct.pack(">q", -1) if version >= 5 else b"")
            if version >= 8:
                out.append(_arr(len(errors), flex))
                for batch, text in errors:
                    out += [struct.pack(">i", batch), _str(text, flex), _tags([]) if flex else b""]
                out.append(_str(message, flex))
            out.append(_tags(ptags) if flex else b"")
        out.append(_tags(ttags) if flex else b"")
    out += [struct.pack(">i", 0), _tags(body) if flex else b""]
    return refix(b"\x00\x00\x00\x00" + b"".join(out))


def refix(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame) - 4) + frame[4:]


@functools.cache
def batch(n: int) -> bytes:
    return make_batch(n)


tags: st.SearchStrategy[Tags] = st.one_of(
    st.just([]), st.lists(st.tuples(st.integers(0, 300), st.binary(max_size=5)), max_size=2))
texts = st.one_of(st.none(), st.text(max_size=6).map(str.encode))
parts = st.tuples(
    st.integers(-(2**15), 2**15 - 1) | st.sampled_from([0, 6, 19]),
    st.integers(-(2**63), 2**63 - 1) | st.sampled_from([-1, 0, 2**63 - 1]),
    st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), texts), max_size=2), texts, tags)


@st.composite
def record_sets(draw: st.DrawFn) -> bytes | None:
    kind = draw(st.sampled_from(["none", "empty", "garbage", "batches", "batches", "batches"]))
    if kind != "batches":
        return {"none": None, "empty": b"", "garbage": draw(st.binary(max_size=80))}[kind]
    sets = [bytearray(batch(draw(st.integers(0, 4)))) for _ in range(draw(st.integers(1, 3)))]
    b = sets[draw(st.integers(0, len(sets) - 1))]
    corrupt = draw(st.sampled_from(["", "", "", "magic", "count", "length", "cut"]))
    if corrupt == "magic":
        b[16] = draw(st.integers(0, 255).filter(lambda m: m != 2))
    elif corrupt == "count":
        b[57:61] = struct.pack(">i", draw(st.integers(-(2**31), -1)))
    elif corrupt == "length":
        b[8:12] = struct.pack(">i", draw(st.integers(-(2**31), 2**31 - 1)))
    out = b"".join(sets)
    return out[:-draw(st.integers(1, 70))] if corrupt == "cut" else out


@st.composite
def entries(draw: st.DrawFn, usual: bool) -> tuple[ProduceEntry, bool]:
    """An entry and whether its answer is none or in order: with ``usual`` (distinct topics,
    only those two answers) that is the usual case, which C must not decline."""
    version = draw(st.integers(3, 13))
    known: list[TopicKey] = [tid(i + 1) for i in range(3)] if version >= 13 else [*NAMES]
    unknown: st.SearchStrategy[TopicKey] = (
        st.integers(50, 2**128 - 1).map(tid) if version >= 13 else st.text(min_size=1, max_size=6))
    keys = st.lists(st.sampled_from(known) | unknown, min_size=1, max_size=3, unique=usual)
    request_topics = [(k, [(i, draw(record_sets())) for i in draw(
        st.lists(st.integers(0, 5), max_size=3, unique=True))]) for k in draw(keys)]
    client_id = draw(st.none() | st.text(max_size=5))
    mv = memoryview(kp_request(version, request_topics, client_id=client_id))
    request = walk_produce_request(mv, parse_request_header(mv))
    store = draw(st.sampled_from([REFRESHED, REFRESHED, NEVER]))
    decisions = decide(request, store.view, RULE, draw(st.floats(100.0, 125.0)), draw(
        st.booleans()))
    if draw(st.booleans()):
        ages = USUAL_AGES if usual else AGES
        decisions = [d._replace(metadata_age_s=draw(st.sampled_from(ages))) for d in decisions]
    subset = draw(st.sampled_from(["all", "all", "rejected", "forwarded", "some"]))
    if subset == "some":
        decisions = [d for d in decisions if draw(st.booleans())]
    elif subset != "all":
        decisions = [d for d in decisions if (d.verdict in REJECTING) == (subset == "rejected")]
    observe = draw(st.booleans())
    e = ProduceEntry(draw(st.floats(0, 2e9)), draw(st.integers(0, 2**40)), client_id,
                     "[::1]:5000", request, mv, decisions, store.view, observe,
                     draw(st.sampled_from([None, 87, -1, 2**31 - 1])))
    e.version, e.latency_ms = version, draw(st.none() | st.floats(0, 1e6))
    answer = draw(st.sampled_from(["none", "ok"] if usual else ["none", *ANSWERS]))
    event(f"answer: {answer}")
    if answer == "none":
        return e, True
    flat: list[tuple[bytes, Part]] = [
        (d.topic_key.encode() if isinstance(d.topic_key, str) else d.topic_key,
         (d.partition, *draw(parts)))
        for d in decisions if observe or d.verdict not in REJECTING]  # those the broker answers
    rnd = random.Random(draw(st.integers(0, 2**32)))
    if answer == "shuffle":
        rnd.shuffle(flat)
    elif answer == "missing" and flat:
        del flat[rnd.randrange(len(flat))]
    elif answer in ("extra", "duplicate"):
        key = (rnd.choice(flat)[0] if flat and answer == "duplicate" else
               draw(st.sampled_from([*[k if isinstance(k, bytes) else k.encode() for k in known],
                                     bytes(16)])))
        index = rnd.choice(flat)[1][0] if flat and answer == "duplicate" else draw(
            st.integers(0, 9))
        flat.insert(rnd.randint(0, len(flat)), (key, (index, *draw(parts))))
    grouped: list[Topic] = []
    for key, p in flat:
        if grouped and grouped[-1][0] == key and answer != "split":
            grouped[-1][1].append(p)
        else:
            grouped.append((key, [p], draw(tags)))
    if answer == "empty_topic":
        name = draw(st.sampled_from([b"\xff\xfe", b"", b"\xed\xa0\x80", "ö".encode()]))
        grouped.insert(rnd.randint(0, len(grouped)), (bytes(16) if version >= 13 else name, [], []))
    frame = encode_answer(version, grouped, draw(tags), draw(tags))
    if answer == "truncate":
        frame = frame[:rnd.randrange(len(frame))]
        frame = refix(frame) if len(frame) >= 4 and rnd.random() < 0.7 else frame
    elif answer == "trailing":
        frame = refix(frame + draw(st.binary(min_size=1, max_size=8)))
    elif answer == "random":
        frame = draw(st.binary(max_size=60))
        frame = refix(frame) if len(frame) >= 4 and rnd.random() < 0.7 else frame
    elif answer == "size":
        frame = struct.pack(">i", len(frame) - 4 + draw(st.sampled_from([-5, -1, 1, 2, 300]))) + \
            frame[4:]
    elif answer == "flip":
        buf = bytearray(frame)
        for _ in range(draw(st.integers(1, 3))):
            buf[rnd.randrange(4, len(buf))] = rnd.randrange(256)
        frame = bytes(buf)
    elif answer == "version":
        e.version = draw(st.integers(0, 15).filter(lambda v: v != version))
    e.answer = memoryview(frame)
    return e, answer == "ok"


def run(e: ProduceEntry) -> tuple[bytes, bool, int | None, bytes, bool]:
    """(C rows, C readable, what NATIVE_ROWS returned, Python rows, Python readable), each
    from a fresh formatter; NATIVE_ROWS gets exactly the arguments ``lines`` passes it."""
    assert NATIVE_ROWS is not None
    native = NATIVE_ROWS
    if currently_in_test_context():
        note(f"v{e.version} observe={e.observe} code={e.dedicated_code} "
             f"decisions={e.decisions} answer={None if e.answer is None else bytes(e.answer)!r}")
    returned: list[int | None] = []

    def spy(*args: Any) -> int | None:
        returned.append(native(*args))
        return returned[-1]

    c_out: list[bytes] = []
    c_ok = RowFormatter('i/1 "x"', spy).lines(e, c_out)
    py_out: list[bytes] = []
    py_ok = RowFormatter('i/1 "x"', None).python_lines(e, py_out)
    assert returned and all(r == -1 for r in returned[:-1])  # -1: retried with more room
    return b"".join(c_out), c_ok, returned[-1], b"".join(py_out), py_ok


@needs_c
@settings(max_examples=700, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=entries(usual=False))
def test_c_rows_equal_python_rows_byte_for_byte(case: tuple[ProduceEntry, bool]) -> None:
    e, _ = case
    c_rows, c_ok, returned, py_rows, py_ok = run(e)
    assert (c_rows, c_ok) == (py_rows, py_ok)
    event(f"C {'declined' if returned is None else 'encoded'}, readable={py_ok}")
    if returned is not None:  # not declined: the bytes compared above are the C encoder's
        assert py_ok


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=entries(usual=True))
def test_c_does_not_decline_the_usual_case(case: tuple[ProduceEntry, bool]) -> None:
    e, usual = case
    assert usual
    c_rows, c_ok, returned, py_rows, py_ok = run(e)
    assert returned is not None, "the C encoder declined a usual entry"
    assert (c_rows, c_ok) == (py_rows, py_ok)
    assert py_ok


@pytest.mark.parametrize("version", range(3, 14))
def test_the_hand_built_answer_equals_kafka_pythons(version: int) -> None:
    """The tests' answer encoder (which adds tagged fields kafka-python cannot) is exact."""
    key: TopicKey = tid(5) if version >= 13 else 't"ö'
    raw = key if isinstance(key, bytes) else key.encode()
    ours = encode_answer(version, [(raw, [(0, 6, 7, [(1, b"e")], b"m", []),
                                          (1, 0, -1, [], None, [])], [])], [], [])
    fields: list[dict[str, Any]] = [
        {"index": 0, "error_code": 6, "base_offset": 7, "record_errors": [(1, "e")],
         "error_message": "m"},  # kafka-python drops fields its version lacks
        {"index": 1, "error_code": 0, "base_offset": -1}]
    common: dict[str, Any] = {"log_append_time_ms": -1, "log_start_offset": -1}
    theirs = kp_response(version, [(key, [{**common, **f} for f in fields])])
    assert ours == theirs


def test_the_c_encoder_is_built() -> None:
    """Where a C compiler exists, an install that silently skipped the extension fails here."""
    source = Path(__file__).resolve().parents[3] / "proxy" / "ledger" / "_ledger_native.c"
    if not (shutil.which("cc") or shutil.which("gcc")) or not source.exists():
        pytest.skip("no C compiler or no C source: the Python encoder does every entry")
    assert NATIVE_ROWS is not None, (
        "proxy.ledger._ledger_native is not built: reinstall (pip install -e .) "
        "to build it")


@needs_c
@pytest.mark.parametrize("repeat", [False, True])
def test_many_topics_in_one_request(repeat: bool) -> None:
    """Beyond the pairwise check (16 topics) the answer's topics are compared sorted: 40
    distinct topics are the usual case; one named twice (its partitions distinct) is not,
    and the Python encoder then gives the same rows."""
    names = [f"t{i:02d}" for i in range(40)]
    store = ClusterViewStore(Clock(100.0))
    store.apply_metadata(snap([topic(n, [part(0, (1, 2)), part(1, (1, 2))], tid(i + 50))
                               for i, n in enumerate(names)],
                              brokers=(broker(1, "rack-a"), broker(2, "rack-b"))), full=True)
    wanted = [(n, 0) for n in names] + ([(names[7], 1)] if repeat else [])
    mv = memoryview(kp_request(9, [(n, [(p, make_batch(1))]) for n, p in wanted]))
    request = walk_produce_request(mv, parse_request_header(mv))
    e = ProduceEntry(1_700_000_000.25, 7, "c", "10.0.0.1:5000", request, mv,
                     decide(request, store.view, RULE, 101.0), store.view, True, None)
    answer = kp_response(9, [(n, [{"index": p, "error_code": 0, "base_offset": 5}])
                             for n, p in wanted])
    e.answer, e.version, e.latency_ms = memoryview(answer), 9, 1.0
    c_rows, c_ok, returned, py_rows, py_ok = run(e)
    assert (c_rows, c_ok) == (py_rows, py_ok) and py_ok
    assert len(partition_rows(py_rows.decode())) == len(wanted)
    assert (returned is None) == repeat


@needs_c
@pytest.mark.parametrize("answered", [True, False])
def test_the_c_encoder_leaks_no_references(answered: bool) -> None:
    """Reference counts of everything the encoder touches are unchanged after many calls
    (encoded, declined, and retried for room), and its contexts are reused, not remade."""
    store = REFRESHED
    mv = memoryview(kp_request(9, [(NAMES[0], [(0, make_batch(2)), (1, make_batch(1))])]))
    request = walk_produce_request(mv, parse_request_header(mv))
    decisions = decide(request, store.view, RULE, 101.0)
    e = ProduceEntry(1_700_000_000.25, 7, "c", "10.0.0.1:5000", request, mv, decisions,
                     store.view, True, None)
    good = kp_response(9, [(NAMES[0], [{"index": 0, "error_code": 0, "base_offset": 5},
                                       {"index": 1, "error_code": 0, "base_offset": 6}])])
    reordered = kp_response(9, [(NAMES[0], [{"index": 1, "error_code": 0, "base_offset": 6},
                                            {"index": 0, "error_code": 0, "base_offset": 5}])])
    formatter = RowFormatter("x")
    # the encoder walks the request's own partitions here (every one is a decision)
    watched = [decisions[0], decisions[0].topic_key, decisions[1], mv, e.view,
               request.topics[0].partitions, request.topics[0].partitions[1].records]
    small, big = bytearray(100), bytearray(1 << 16)
    results = []

    def once(answer: bytes) -> None:
        e.answer, e.version, e.latency_ms = (memoryview(answer) if answered else None), 9, 1.0
        results.append((formatter.native_into(e, big, 0), formatter.native_into(e, small, 0)))

    once(good)  # fill the caches
    assert formatter._cache is not None
    watched += [good, formatter._cache.table[NAMES[0]][0]]  # an answer, a cached context
    e.answer = None
    before = [sys.getrefcount(o) for o in watched]
    made = formatter._cache.made if formatter._cache else 0
    for _ in range(2000):
        once(good)
        once(reordered)
    e.answer = None
    assert [sys.getrefcount(o) for o in watched] == before
    assert formatter._cache is not None and formatter._cache.made == made
    encoded = {big_end for big_end, _ in results if big_end is not None}
    assert len(encoded) == 1 and encoded.pop() > len(small)  # the same rows every time
    # too small a buffer: -1 (no room); a reordered answer: declined (None)
    assert {small_end for _, small_end in results} == {-1}
    assert any(big_end is None for big_end, _ in results) == answered


@needs_c
@pytest.mark.parametrize("change", ["fewer", "more"])
def test_walking_the_request_checks_it_holds_one_partition_per_decision(change: str) -> None:
    """Given the request's topics instead of spans, the C encoder reads one partition per
    decision; a request with fewer or more partitions than decisions is a caller's bug,
    raised (the ledger then encodes the entry in Python), never rows paired wrongly."""
    assert NATIVE_ROWS is not None
    mv = memoryview(kp_request(9, [(NAMES[0], [(0, make_batch(1)), (1, make_batch(1))]),
                                   (NAMES[1], [])]))
    request = walk_produce_request(mv, parse_request_header(mv))
    decisions = decide(request, REFRESHED.view, RULE, 101.0)
    decisions = decisions[:1] if change == "more" else [*decisions, decisions[0]]
    cache = ContextCache(REFRESHED.view, True, None)
    with pytest.raises(ValueError, match=f"{change} partitions than decisions"):
        NATIVE_ROWS(bytearray(1 << 16), 0, b"{", 1.0, 1, b"", None, decisions, request.topics,
                    mv, None, 9, cache.table, cache.make)
    # the same call with the spans listed is accepted: the walk was the only fault
    spans = [p.records for t in request.topics for p in t.partitions][:len(decisions)]
    if change == "more":
        assert NATIVE_ROWS(bytearray(1 << 16), 0, b"{", 1.0, 1, b"", None, decisions, spans,
                           mv, None, 9, cache.table, cache.make) > 0
