"""The decision ledger's cost: CPU per acks=all produce, bytes on disk, snapshot bytes.

    .venv/bin/python benchmarks/ledger_overhead.py [--requests 200000]

First the parts, in one thread, for 1, 10 and 50 partitions per request: what
the event loop pays per request (recording the decisions, then the broker's
answer) and what the writer thread pays per partition-write (reading the answer,
building the Arrow batch, appending it). Then the whole: the Produce hook
(RackEnforcer) and the response transform driven as fast as one thread can,
without sockets, with the ledger off and on (the writer thread running and
writing to a temporary directory): the driving thread's CPU per request and the
whole process's, and the rows dropped. Then the disk: bytes of closed Parquet
per acknowledged partition-write (realistic values: increasing offsets and
times, varied sizes and latencies), and the snapshot bytes written in one hour
in front of an unchanged 100,000-partition view (ticks every 30 s, one file an
hour). Reported, not asserted.
"""

from __future__ import annotations

import argparse
import random
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
from protocol.produce import partition_rows, walk_produce_request  # noqa: E402
from proxy.cluster.view import ClusterViewStore  # noqa: E402
from proxy.enforce.enforcement import EnforcementSettings, RackEnforcer  # noqa: E402
from proxy.enforce.metrics import EnforcementMetrics  # noqa: E402
from proxy.enforce.policy import RackRule, decide  # noqa: E402
from proxy.ledger.buffer import HEAD, PART  # noqa: E402
from proxy.ledger.recorder import DecisionLedger, LedgerConfig  # noqa: E402
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
        dropped = registry.get_sample_value("rackguard_ledger_dropped_rows_total",
                                            {"reason": "queue_full"}) or 0.0
    proc1 = time.process_time()
    return ((thread1 - thread0) / requests * 1e6, (proc1 - proc0) / requests * 1e6, dropped)


def parts(partitions: int, requests: int) -> tuple[float, float]:
    """(event loop us per request, writer us per partition-write)."""
    store = ClusterViewStore(time.monotonic)
    store.apply_metadata(snapshot(1, 50), full=True)
    rule = RackRule(default_min_racks=2, max_metadata_age_s=1e9)
    tmp = Path(tempfile.mkdtemp(prefix="rg-ledger-parts-"))
    ledger = DecisionLedger(LedgerConfig(tmp, "bench", queue_size=10**12, queue_bytes=10**15),
                            CollectorRegistry(), view_source=lambda: store.view,
                            rule_source=lambda: rule)
    frame = memoryview(kp_request(9, [("topic-0", [(p, make_batch(5)) for p in
                                                   range(partitions)])], correlation_id=1))
    response = memoryview(kp_response(9, [("topic-0", [
        {"index": p, "error_code": 0, "base_offset": 1000} for p in range(partitions)])],
        correlation_id=1))
    header = parse_request_header(frame)
    request = walk_produce_request(frame, header)
    decisions = decide(request, store.view, rule, time.monotonic())
    rows = partition_rows(frame, request)  # the rule's caller's, shared with the loss watch
    ledger.flush()
    spent = writer = 0.0
    for i in range(requests):
        start = time.thread_time()
        ledger.record(CLIENT, header, request, rows, decisions, store.view, rule, True, None,
                      0.0, _ignore)(response, 9)
        spent += time.thread_time() - start
        if i % 200 == 199:  # what the writer thread does, every flush interval
            start = time.thread_time()
            ledger.flush()
            writer += time.thread_time() - start
    ledger.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return spent / requests * 1e6, writer / (requests * partitions) * 1e6


def bytes_per_write(requests: int, partitions: int) -> tuple[float, int]:
    """Closed Parquet bytes per partition-write, and the partition-writes, of a ledger of
    ``requests`` realistic requests (5,000 a second, increasing offsets per partition)."""
    rnd = random.Random(7)
    tmp = Path(tempfile.mkdtemp(prefix="rg-ledger-bytes-"))
    try:
        ledger = DecisionLedger(LedgerConfig(tmp, "bench", queue_size=10**12,
                                             queue_bytes=10**15), CollectorRegistry())
        ledger.flush()
        offsets = [rnd.randrange(10**9) for _ in range(partitions)]
        for i in range(requests):
            topic = rnd.randrange(20)
            parts: list[bytes] = []
            errors = []
            for j in range(partitions):
                p = (topic * 7 + j) % 60
                records = rnd.randint(1, 20)
                parts.append(PART.pack(0, p, records, 100 + records * rnd.randint(80, 400)))
                errors.append((p, offsets[p % partitions]))
                offsets[p % partitions] += records
            head = HEAD.pack(1.7e9 + i / 5000 + rnd.random() * 1e-4, i + 1, 1 + i // 100_000,
                             1, 9, partitions, 1, 0, 19)
            fields = (head, b"".join(parts), bytes(partitions),
                      (f"app-{i % 30}", f"10.0.{i % 7}.{i % 200}:{40000 + i % 300}"),
                      (f"topic-{topic}",), None)
            # what the transform DecisionLedger.record names does with the broker's answer
            ledger._answered(fields, partitions,
                             time.monotonic() - (0.5 + rnd.random() * 4) / 1000, _ignore,
                             memoryview(kp_response(9, [(f"topic-{topic}", [
                                 {"index": p, "error_code": 0, "base_offset": o}
                                 for p, o in errors])], correlation_id=i)), 9)
            if i % 1000 == 999:  # a flush interval at 5,000 requests/s
                ledger.flush()
        ledger.stop()
        size = sum(p.stat().st_size for p in ledger.decision_files)
        return size / (requests * partitions), requests * partitions
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def snapshot_bytes_per_hour(topics: int, partitions: int) -> tuple[int, float]:
    """Snapshot bytes written in one hour in front of an unchanged view of topics x
    partitions (ticks every 30 s, a file an hour: its base is the whole view), and the
    writer's CPU seconds for that hour."""

    class Clock:
        t = 1_000.0

        def __call__(self) -> float:
            return self.t

    clock, wall = Clock(), Clock()
    wall.t = 1.7e9
    store = ClusterViewStore(clock)
    store.apply_metadata(snapshot(topics, partitions), full=True)
    rule = RackRule(default_min_racks=2)
    tmp = Path(tempfile.mkdtemp(prefix="rg-ledger-snap-"))
    try:
        ledger = DecisionLedger(LedgerConfig(tmp, "bench", snapshot_interval_s=30.0,
                                             rotate_seconds=3600.0), CollectorRegistry(),
                                clock, wall, lambda: store.view, lambda: rule)
        start = time.thread_time()
        for _ in range(120):  # one hour of writer iterations, a tick each
            ledger.flush()
            clock.t += 30
            wall.t += 30
        ledger.stop()
        cpu = time.thread_time() - start
        return sum(p.stat().st_size for p in ledger.snapshot_files), cpu
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ignore(frame: object, version: int) -> None:
    return None


async def _never() -> bool:
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args(argv)
    for partitions in (1, 10, 50):
        loop_us, writer_us = parts(partitions, max(1000, args.requests // partitions))
        print(f"{partitions:>2} partition(s)/request: event loop {loop_us:.1f} us per request; "
              f"writer thread {writer_us:.2f} us per partition-write")
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
    per_write, writes = bytes_per_write(max(2000, args.requests // 5), 10)
    print(f"disk: {per_write:.1f} bytes of closed Parquet per acknowledged partition-write "
          f"({writes:,} writes, 10 partitions/request)")
    topics, per_topic = (100, 1000) if args.requests >= 100_000 else (10, 100)
    size, cpu = snapshot_bytes_per_hour(topics, per_topic)
    print(f"snapshots: {size / 1e3:.1f} kB in one hour in front of an unchanged "
          f"{topics * per_topic:,}-partition view (writer CPU {cpu:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
