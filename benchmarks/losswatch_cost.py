"""What the loss watch costs: the relay's Produce round trip with the watch off and on,
and the memory per tracked partition. Prints one line per figure.

    .venv/bin/python benchmarks/losswatch_cost.py            # full
    .venv/bin/python benchmarks/losswatch_cost.py --quick    # a smoke run (CI)

The round trip is benchmarks/micro.py's (one Produce through a ClientConnection and its
answer back, without sockets), policy off (min.insync.racks=1, the rule's cheapest path,
so the watch's share is the largest), timed in alternated turns on this thread's CPU
clock, fastest of each. Two
request shapes: one record (the worst case: the watch's fixed cost against the smallest
request) and a 256 KiB batch of 1 KiB records (the shape of ``rackguard bench``'s
librdkafka producer, linger 5 ms, whose relay throughput the watch must not move by 1 %).
Figures are reported, not asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.micro import connection_round_trip, snapshot  # noqa: E402
from benchmarks.produce_frames import kp_request, kp_response, make_batch  # noqa: E402
from proxy.losswatch.state import ACKS_ALL, AckState  # noqa: E402


def trip(watch: Literal["on", "off"], acks: int, records: int, size: int
         ) -> Callable[[], None]:
    from proxy.app import Rackguard
    from proxy.settings import Settings

    app = Rackguard(Settings(upstream=("127.0.0.1:1",), min_insync_racks=1,
                             max_metadata_age_ms=10**9, loss_watch=watch))
    app.store.apply_metadata(snapshot(1, 10), full=True)
    request = kp_request(9, [("topic-0", [(0, make_batch(records, value=b"v" * size))])],
                         acks=acks)
    answer = kp_response(9, [("topic-0", [{"index": 0, "error_code": 0, "base_offset": 5}])])
    return connection_round_trip(app, "node-1", request, answer)


def fastest_alternating(fns: list[Callable[[], object]], repeat: int, number: int
                        ) -> list[float]:
    """Fastest CPU seconds per call of each (this thread's CPU clock: a busy shared machine
    preempts the loop, which wall time would count), timings taken in turns."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.thread_time()
            for _ in range(number):
                fn()
            best[i] = min(best[i], (time.thread_time() - start) / number)
    return best


BENCH_REQUEST = 256 * 1024  # librdkafka's requests in the bench: 1 KiB records, linger 5 ms
RELAY_S_PER_GB = 0.6  # the relay's CPU per GB in rackguard bench (docs/performance.md)


def watch_cost(repeat: int, number: int) -> float:
    """Seconds the watch adds to one bench-shaped request: ``expect`` on the request
    (walked here, as with the rule off) and the reader on its answer."""
    from prometheus_client import CollectorRegistry

    from proxy.cluster.view import ClusterViewStore
    from proxy.losswatch.report import LossReporter
    from proxy.losswatch.watch import LossWatch, LossWatchSettings
    from proxy.relay.actions import ClientInfo

    store = ClusterViewStore(time.monotonic)
    store.apply_metadata(snapshot(1, 10), full=True)

    async def never(node_id: int, api_key: int, min_version: int, max_version: int,
                    build: Callable[[int], object]) -> tuple[bytes, int]:
        raise ConnectionError

    watch = LossWatch(LossWatchSettings(3600.0, 0.0, 2.0), lambda: store.view, never,
                      LossReporter(CollectorRegistry()), time.monotonic)
    request = memoryview(kp_request(9, [("topic-0", [(0, make_batch(
        BENCH_REQUEST // 1024, value=b"v" * 1000))])]))
    answer = memoryview(kp_response(9, [("topic-0", [{"index": 0, "error_code": 0,
                                                     "base_offset": 5}])]))
    client = ClientInfo("10.0.0.1:40000", "node-1")

    def once() -> None:
        reader = watch.expect(client, request, -1)
        assert reader is not None
        reader(answer, 9)

    return fastest_alternating([once], repeat, number)[0]


def memory_per_partition(n: int) -> float:
    """Bytes per tracked partition: ``n`` partitions of 100 topics, each acknowledged by
    one broker for one client (one segment, the usual state)."""
    state = AckState(3600.0)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(n):
        state.acknowledged(f"topic-{i % 100}", i // 100, 1, ACKS_ALL, 1000, 10, "app-1", 0.0)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return grown / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the loss watch's cost")
    parser.add_argument("--quick", action="store_true", help="a few iterations only (smoke)")
    args = parser.parse_args(argv)
    repeat, number = (3, 20) if args.quick else (25, 2000)
    for acks in (-1, 1):
        off, on = fastest_alternating([trip("off", acks, 1, 1), trip("on", acks, 1, 1)],
                                      repeat, number)
        label = "all" if acks == -1 else "1"
        print(f"produce round trip, acks={label:<3}, 1 record: {off * 1e6:7.2f} us watch off, "
              f"{on * 1e6:7.2f} us on ({(on - off) * 1e6:+.2f} us, "
              f"{(on / off - 1) * 100:+.1f} %)")
    watch_us = watch_cost(repeat, number // 4) * 1e6
    relay_us = BENCH_REQUEST * RELAY_S_PER_GB * 1e6 / 1e9
    print(f"the watch on a {BENCH_REQUEST >> 10} KiB acks=all request (bench shape): "
          f"{watch_us:.2f} us; the relay's CPU for it at {RELAY_S_PER_GB} s/GB: "
          f"{relay_us:.0f} us: {watch_us / relay_us * 100:+.2f} % when the proxy's CPU "
          f"is the limit")
    n = 2_000 if args.quick else 100_000
    print(f"loss watch memory: {memory_per_partition(n):.0f} bytes per tracked partition "
          f"({n:,} partitions, one segment and one client id each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
