"""CPU cost of the decision ledger per acks=all produce.

    .venv/bin/python benchmarks/ledger_overhead.py [--requests 200000]

First the parts, in one thread, for 1, 10 and 50 partitions per request:
what the event loop pays per request (recording the decisions, then the
broker's answer, and encoding the rows with the C encoder into a chunk), the
C encoder alone per row, and the Python encoder (the reference, and what
does entries the C encoder declines) per row. Then the whole: the Produce
hook (RackEnforcer) and the response transform driven as fast as one thread
can, without sockets, with the ledger off and on (the writer thread running
and writing to a temporary directory): the driving thread's CPU per request
and the whole process's, and the rows dropped (at that rate the disk can
fall behind). Reported, not asserted.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry  # noqa: E402

from benchmarks.micro import snapshot  # noqa: E402
from benchmarks.produce_frames import kp_request, kp_response, make_batch  # noqa: E402
from protocol.headers import parse_request_header  # noqa: E402
from protocol.produce import ProduceRequest, walk_produce_request  # noqa: E402
from proxy.cluster.view import ClusterView, ClusterViewStore  # noqa: E402
from proxy.enforce.enforcement import EnforcementSettings, RackEnforcer  # noqa: E402
from proxy.enforce.metrics import EnforcementMetrics  # noqa: E402
from proxy.enforce.policy import (
    Decision,  # noqa: E402
    RackRule,  # noqa: E402
    decide,  # noqa: E402
)
from proxy.ledger.recorder import DecisionLedger, LedgerConfig  # noqa: E402
from proxy.ledger.rows import NATIVE_ROWS, ProduceEntry, RowFormatter  # noqa: E402
from proxy.relay.actions import ClientInfo, Forward  # noqa: E402

CLIENT = ClientInfo("10.0.0.1:40000", "node-1")


def run(partitions: int, requests: int, ledger_dir: Path | None) -> tuple[float, float, float]:
    """(loop-thread CPU µs/request, process CPU µs/request, rows dropped)."""
    store = ClusterViewStore(time.monotonic)
    store.apply_metadata(snapshot(1, 50), full=True)
    settings = EnforcementSettings(RackRule(default_min_racks=2, max_metadata_age_s=1e9), None,
                                   False, 2.0)
    registry = CollectorRegistry()
    ledger = None
    if ledger_dir is not None:
        ledger = DecisionLedger(LedgerConfig(ledger_dir, "bench"), registry,
                                view_source=lambda: store.view,
                                rule_source=lambda: settings.rule)
        ledger.start()
    enforcer = RackEnforcer(settings, store, _never, lambda f, v: f,
                            EnforcementMetrics(CollectorRegistry(), time.monotonic),
                            time.monotonic, ledger)
    frame = memoryview(kp_request(9, [("topic-0", [(p, make_batch(5)) for p in
                                                   range(partitions)])], correlation_id=1))
    response = memoryview(kp_response(9, [("topic-0", [
        {"index": p, "error_code": 0, "base_offset": 1000} for p in range(partitions)])],
        correlation_id=1))
    thread0, proc0 = time.thread_time(), time.process_time()
    for _ in range(requests):
        action = enforcer(CLIENT, frame, 0, 9, 1)
        assert isinstance(action, Forward) and action.transform is not None
        action.transform(response, 9)
    thread1 = time.thread_time()
    dropped = 0.0
    if ledger is not None:
        ledger.stop(timeout=120)  # let the writer finish: its CPU counts too
        dropped = registry.get_sample_value("rackguard_ledger_rows_dropped_total",
                                            {"reason": "queue_full"}) or 0.0
    proc1 = time.process_time()
    return ((thread1 - thread0) / requests * 1e6, (proc1 - proc0) / requests * 1e6, dropped)


def parts(partitions: int, requests: int) -> tuple[float, float | None, float]:
    """(event loop us per request, C encoder us per row (None: not built), Python
    encoder us per row)."""
    store = ClusterViewStore(time.monotonic)
    store.apply_metadata(snapshot(1, 50), full=True)
    rule = RackRule(default_min_racks=2, max_metadata_age_s=1e9)
    tmp = Path(tempfile.mkdtemp(prefix="rg-ledger-parts-"))
    ledger = DecisionLedger(LedgerConfig(tmp, "bench", queue_size=10**12, queue_bytes=10**15),
                            CollectorRegistry())
    frame = memoryview(kp_request(9, [("topic-0", [(p, make_batch(5)) for p in
                                                   range(partitions)])], correlation_id=1))
    response = memoryview(kp_response(9, [("topic-0", [
        {"index": p, "error_code": 0, "base_offset": 1000} for p in range(partitions)])],
        correlation_id=1))
    header = parse_request_header(frame)
    request = walk_produce_request(frame, header)
    decisions = decide(request, store.view, rule, time.monotonic())
    entries: list[ProduceEntry] = []
    spent = 0.0
    for i in range(requests):
        start = time.thread_time()
        pending = ledger.record(CLIENT, header, request, frame, decisions, store.view, True,
                                None, 0.0)
        assert pending is not None
        pending.wrap(_ignore)(response, 9)
        spent += time.thread_time() - start
        entries.append(pending)
        if i % 20 == 19:  # untimed: what the writer thread does (chunks back to the pool)
            ledger.flush()
    loop_us = spent / requests * 1e6
    # the encoders, on whole entries (the ledger's own are prepared when recorded and
    # let go of their request: finishing one is not encoding it)
    entries = [_whole(e, request, frame, decisions, store.view) for e in entries]
    rows = len(entries) * len(decisions)
    formatter, buf = RowFormatter("bench"), bytearray(1 << 20)
    c_us = None
    if NATIVE_ROWS is not None:
        start = time.thread_time()
        for entry in entries:
            formatter.native_into(entry, buf, 0)
        c_us = (time.thread_time() - start) / rows * 1e6
    lines: list[bytes] = []
    start = time.thread_time()
    for entry in entries:
        formatter.python_lines(entry, lines)
    python_us = (time.thread_time() - start) / rows * 1e6
    shutil.rmtree(tmp, ignore_errors=True)
    return loop_us, c_us, python_us


def _whole(pending: ProduceEntry, request: ProduceRequest, frame: memoryview,
           decisions: list[Decision], view: ClusterView) -> ProduceEntry:
    entry = ProduceEntry(pending.wall, pending.req, pending.client_id, pending.peer, request,
                         frame, decisions, view, pending.observe, pending.dedicated_code)
    entry.answer, entry.version, entry.latency_ms = (pending.answer, pending.version,
                                                     pending.latency_ms)
    return entry


def _ignore(frame: object, version: int) -> None:
    return None


async def _never() -> bool:
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args(argv)
    for partitions in (1, 10, 50):
        loop_us, c_us, python_us = parts(partitions, max(1000, args.requests // partitions))
        c_text = "not built" if c_us is None else f"{c_us:.2f} us per row"
        print(f"{partitions:>2} partition(s)/request: event loop {loop_us:.1f} us per request "
              f"(C encoding included); C encoder {c_text}; Python encoder "
              f"{python_us:.2f} us per row")
    for partitions in (1, 10, 50):
        off_loop, off_proc, _ = run(partitions, args.requests, None)
        tmp = Path(tempfile.mkdtemp(prefix="rg-ledger-bench-"))
        try:
            on_loop, on_proc, dropped = run(partitions, args.requests, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"{partitions:>2} partition(s)/request: hook+transform {off_loop:.1f} us off, "
              f"{on_loop:.1f} us on the loop thread (+{on_loop - off_loop:.1f} us); process "
              f"CPU incl. writer {off_proc:.1f} -> {on_proc:.1f} us (+{on_proc - off_proc:.1f} "
              f"us); rows dropped {dropped:.0f} of {partitions * args.requests}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
