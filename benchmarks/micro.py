"""Microbenchmarks of the hot-path pieces; prints one line per figure.

    .venv/bin/python benchmarks/micro.py            # full
    .venv/bin/python benchmarks/micro.py --quick    # a smoke run (CI)

Figures are medians of repeated timings on this machine; they are reported,
not asserted (timed assertions flake on shared machines).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.metadata import MetadataResponse  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

from benchmarks.produce_frames import kp_request, kp_response, make_batch  # noqa: E402
from protocol.addresses import BrokerAddress  # noqa: E402
from protocol.framing import FrameSplitter, ReadMemory  # noqa: E402
from protocol.headers import parse_request_header  # noqa: E402
from protocol.metadata import (  # noqa: E402
    MetadataSnapshot,
    PartitionMetadata,
    TopicMetadata,
    read_metadata,
    rewrite_metadata_brokers,
)
from protocol.produce import (  # noqa: E402
    peek_acks,
    rewrite_produce_response_endpoints_seen,
    walk_produce_request,
)
from proxy.cluster.view import ClusterViewStore  # noqa: E402
from proxy.enforce.enforcement import EnforcementSettings, RackEnforcer  # noqa: E402
from proxy.enforce.metrics import EnforcementMetrics  # noqa: E402
from proxy.enforce.policy import RackRule, decide  # noqa: E402
from proxy.ops.metrics import ProxyMetrics  # noqa: E402
from proxy.relay.actions import ClientInfo  # noqa: E402

if TYPE_CHECKING:
    from proxy.app import Rackguard

RACKS = ["rack-a", "rack-b", "rack-c"]


def timeit(fn: Callable[[], object], repeat: int, number: int) -> float:
    """Median seconds per call."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def fastest_alternating(fns: list[Callable[[], object]], repeat: int, number: int
                        ) -> list[float]:
    """Fastest seconds per call of each, their timings taken in turns (so a busy moment
    of a shared machine falls on all of them alike)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            best[i] = min(best[i], (time.perf_counter() - start) / number)
    return best


def metadata_frame(partitions: int, version: int = 12) -> bytes:
    cls = MetadataResponse
    brokers = [cls.MetadataResponseBroker(node_id=n, host=f"broker-{n}.internal", port=9092,
                                          rack=RACKS[(n - 1) % 3]) for n in range(1, 7)]
    topics = []
    per_topic = 50
    for t in range(max(1, partitions // per_topic)):
        parts = [cls.MetadataResponseTopic.MetadataResponsePartition(
            error_code=0, partition_index=p, leader_id=1 + p % 6, leader_epoch=3,
            replica_nodes=[1 + (p + i) % 6 for i in range(5)],
            isr_nodes=[1 + (p + i) % 6 for i in range(5)], offline_replicas=[])
            for p in range(per_topic)]
        topics.append(cls.MetadataResponseTopic(
            error_code=0, name=f"topic-{t}", topic_id=uuid.uuid4(), is_internal=False,
            partitions=parts))
    resp = cls(version=version, throttle_time_ms=0, brokers=brokers, cluster_id="c",
               controller_id=1, topics=topics)
    resp.with_header(correlation_id=1)
    return bytes(resp.encode(header=True, framed=True))


def snapshot(topics: int, partitions: int) -> MetadataSnapshot:
    brokers = tuple(BrokerAddress(n, "h", 9092, RACKS[(n - 1) % 3]) for n in range(1, 7))
    return MetadataSnapshot(
        brokers=brokers, cluster_id="c", controller_id=1,
        topics=tuple(TopicMetadata(f"topic-{t}", None, 0, False, tuple(
            PartitionMetadata(p, 0, 1 + p % 6, 0, tuple(1 + (p + i) % 6 for i in range(5)),
                              tuple(1 + (p + i) % 6 for i in range(5)), ())
            for p in range(partitions))) for t in range(topics)))


async def _no_refresh() -> bool:
    return False


def observe_hook(store: ClusterViewStore, client: ClientInfo, parts: int) -> Callable[[], object]:
    """One call of the Produce hook in observe mode (every partition walked and decided)."""
    enforcer = RackEnforcer(
        EnforcementSettings(RackRule(default_min_racks=2, max_metadata_age_s=1e9), None,
                            True, 2.0),
        store, _no_refresh, lambda f, v: f,
        EnforcementMetrics(CollectorRegistry(), time.monotonic), time.monotonic)
    produce = memoryview(kp_request(9, [("topic-0", [(p, make_batch(1))
                                                     for p in range(parts)])]))
    return lambda: enforcer(client, produce, 0, 9, 1)


class _NullTransport:
    """Stands in for both sockets of a connection: takes writes, does nothing."""

    def write(self, data: Any) -> None:
        pass

    def writelines(self, data: Any) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def get_extra_info(self, name: str) -> Any:
        return ("10.0.0.1", 40000)

    def set_write_buffer_limits(self, high: int) -> None:
        pass


def round_trip(min_racks: int, version: int) -> Callable[[], None]:
    """One acks=all, 1-partition Produce through a ClientConnection and its response back,
    without sockets: the request read, hook, metrics, forward, response match and
    transform, write to the client. ``min_racks`` 1: policy off; 2: observe mode."""
    from proxy.app import Rackguard
    from proxy.settings import Settings

    settings = Settings(upstream=("127.0.0.1:1",), min_insync_racks=min_racks, observe=True,
                        max_metadata_age_ms=10**9)
    app = Rackguard(settings)
    app.store.apply_metadata(snapshot(1, 10), full=True)
    request = kp_request(version, [("topic-0", [(0, make_batch(1))])])
    response = kp_response(version, [("topic-0", [{"index": 0, "error_code": 0,
                                                   "base_offset": 5}])])
    return connection_round_trip(app, "bootstrap", request, response)


def connection_round_trip(app: Rackguard, listener: str, request: bytes, response: bytes
                          ) -> Callable[[], None]:
    """One request and its answer through a ClientConnection of ``app`` on ``listener``,
    without sockets: read, hooks, forward, answer matched (and transformed), written."""
    conn = app.server._new_client(listener)
    conn._transport = conn._upstream = _NullTransport()  # type: ignore[assignment]
    conn._holding = False
    upstream = conn.upstream_splitter()

    def once() -> None:
        buf = conn.get_buffer(-1)
        buf[: len(request)] = request
        conn.buffer_updated(len(request))
        buf = upstream.get_buffer()
        buf[: len(response)] = response
        conn.upstream_data(len(response), upstream)

    return once


def librdkafka_fetch(version: int, partitions: int) -> bytes:
    """A Fetch request as librdkafka sends it: no fetch session, one topic (by name to
    v12, by id from v13), an empty rack_id."""
    from kafka.protocol.consumer import FetchRequest

    parts = [FetchRequest.FetchTopic.FetchPartition(
        partition=p, current_leader_epoch=3, fetch_offset=123456 + p, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=64 * 1024) for p in range(partitions)]
    topic = (FetchRequest.FetchTopic(topic="topic-0", partitions=parts) if version < 13
             else FetchRequest.FetchTopic(topic_id=uuid.UUID(int=7), partitions=parts))
    req = FetchRequest(version=version, replica_id=-1, max_wait_ms=500, min_bytes=1,
                       max_bytes=52428800, isolation_level=1, session_id=0, session_epoch=-1,
                       topics=[topic], forgotten_topics_data=[], rack_id="")
    req.with_header(correlation_id=1, client_id="rdkafka")
    return bytes(req.encode(header=True, framed=True))


def fetch_answer(version: int, partitions: int, size: int) -> bytes:
    """A Fetch response of about ``size`` bytes of records over ``partitions``."""
    from kafka.protocol.consumer import FetchResponse

    data = FetchResponse.FetchableTopicResponse.PartitionData
    parts = [data(partition_index=p, error_code=0, high_watermark=10**6, last_stable_offset=10**6,
                  log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                  records=bytes(size // partitions)) for p in range(partitions)]
    topic = (FetchResponse.FetchableTopicResponse(topic="topic-0", partitions=parts)
             if version < 13 else
             FetchResponse.FetchableTopicResponse(topic_id=uuid.UUID(int=7), partitions=parts))
    resp = FetchResponse(version=version, throttle_time_ms=0, error_code=0, session_id=0,
                         responses=[topic])
    resp.with_header(correlation_id=1)
    return bytes(resp.encode(header=True, framed=True))


def fetch_round_trip(rack: str | None, version: int, partitions: int,
                     answer_size: int = 60_000) -> Callable[[], None]:
    """One Fetch through a ClientConnection on a broker's listener and its ~60 KB answer
    back, without sockets, as ``round_trip`` does for Produce: ``rack`` None is a proxy
    without client_rack; a rack no broker has fills every request and walks no answer."""
    import asyncio

    from proxy.app import Rackguard
    from proxy.settings import Settings

    app = Rackguard(Settings(upstream=("127.0.0.1:1",), client_rack=rack,
                             max_metadata_age_ms=10**9))
    app.store.apply_metadata(snapshot(1, 10), full=True)
    asyncio.run(app._install_rack_hints())
    return connection_round_trip(app, "node-1", librdkafka_fetch(version, partitions),
                                 fetch_answer(version, partitions, answer_size))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="rackguard microbenchmarks")
    parser.add_argument("--quick", action="store_true", help="a few iterations only (smoke)")
    args = parser.parse_args(argv)
    repeat, number = (3, 20) if args.quick else (7, 2000)

    frame = memoryview(kp_request(9, [("topic-0", [(p, make_batch(1)) for p in range(10)])]))
    header = parse_request_header(frame)
    acks = timeit(lambda: peek_acks(frame), repeat, number)
    print(f"produce acks peek (policy off path): {acks * 1e6:8.2f} us per request")
    parse = timeit(lambda: parse_request_header(frame), repeat, number)
    print(f"request header parse:                {parse * 1e6:8.2f} us per request")
    one = memoryview(kp_request(9, [("topic-0", [(0, make_batch(1))])]))
    one_header = parse_request_header(one)
    walk = timeit(lambda: walk_produce_request(one, one_header), repeat, number)
    print(f"produce walk, 1 partition:           {walk * 1e6:8.2f} us per request")
    walk = timeit(lambda: walk_produce_request(frame, header), repeat, number)
    print(f"produce walk, 10 partitions:         {walk * 1e6:8.2f} us per request")

    def mapper(node_id: int, host: str, port: int) -> tuple[str, int]:
        return "127.0.0.1", 9100 + node_id

    answer = memoryview(kp_response(10, [("topic-0", [{"index": 0, "error_code": 0,
                                                       "base_offset": 5}])]))
    scan = timeit(lambda: rewrite_produce_response_endpoints_seen(answer, 10, mapper),
                  repeat, number)
    print(f"produce v10 response endpoint scan:  {scan * 1e6:8.2f} us per response (1 part)")

    proxy_metrics = ProxyMetrics(CollectorRegistry())

    def count() -> None:
        proxy_metrics.request(0)
        proxy_metrics.bytes_from_client.inc(1100)
        proxy_metrics.bytes_to_client.inc(60)

    counted = timeit(count, repeat, number)
    print(f"proxy metrics (request + bytes):     {counted * 1e6:8.2f} us per request")

    store = ClusterViewStore(time.monotonic)
    store.apply_metadata(snapshot(1, 10), full=True)
    request = walk_produce_request(frame, header)
    rule = RackRule(default_min_racks=2)
    view = store.view
    now = time.monotonic()
    per = timeit(lambda: decide(request, view, rule, now), repeat, number) / 10
    print(f"rack decision, ISR of 5:             {per * 1e6:8.2f} us per partition")

    metrics = EnforcementMetrics(CollectorRegistry(), time.monotonic)
    decisions = decide(request, view, rule, now)
    client = ClientInfo("10.0.0.1:40000", "node-1")
    per = timeit(lambda: metrics.record(decisions, True, client), repeat, number) / 10
    print(f"decision metrics:                    {per * 1e6:8.2f} us per partition")

    for parts in (1, 10):
        hook = timeit(observe_hook(store, client, parts), repeat, number)
        print(f"produce hook, observe, {parts:>2} part(s):    {hook * 1e6:8.2f} us per request")

    for version in (9, 10):
        for racks, mode in ((1, "policy off"), (2, "observe")):
            trip = timeit(round_trip(racks, version), repeat, number)
            print(f"request+response v{version:<2}, {mode:<10}:  {trip * 1e6:8.2f} us (1 part)")

    for version, parts in ((12, 1), (12, 6), (15, 1), (15, 6)):
        off, fill = fastest_alternating([fetch_round_trip(None, version, parts),
                                         fetch_round_trip("rack-x", version, parts)],
                                        3 * repeat, number)
        print(f"fetch v{version} {parts} part(s), 60 KB answer: {off * 1e6:8.2f} us without "
              f"client_rack, {(fill - off) * 1e6:+.2f} us with it (filled)")

    # A 1 MiB produce arriving in 64 KiB reads; each path includes the read's own copy
    # (the kernel's). Read into the splitter: straight into the frame's pooled buffer.
    # Fed as bytes (asyncio.Protocol): into the transport's buffer, copied into a bytes
    # object per read, joined once complete.
    large = kp_request(9, [("topic-0", [(0, bytes(1 << 20))])])
    src = memoryview(large)
    memory = ReadMemory()
    transport_buffer = memoryview(bytearray(65536))

    def read_into() -> None:
        splitter = FrameSplitter(memory=memory)
        pos = 0
        while pos < len(large):
            buf = splitter.get_buffer()
            n = min(len(buf), 65536, len(large) - pos)
            buf[:n] = src[pos : pos + n]
            pos += n
            splitter.buffer_updated(n)

    def fed() -> None:
        splitter = FrameSplitter()
        pos = 0
        while pos < len(large):
            n = min(65536, len(large) - pos)
            transport_buffer[:n] = src[pos : pos + n]
            pos += n
            splitter.feed(transport_buffer[:n].tobytes())

    few = max(1, number // 20)
    read = timeit(read_into, repeat, few)
    feed = timeit(fed, repeat, few)
    print(f"1 MiB produce in 64 KiB reads:       {read * 1e6:8.1f} us read into its buffer, "
          f"{feed * 1e6:.1f} us fed as bytes and joined")

    meta = metadata_frame(2000)
    rewrite = timeit(lambda: rewrite_metadata_brokers(meta, 12, mapper), repeat, few)
    print(f"metadata v12 rewrite, 2,000 parts:   {rewrite * 1e3:8.3f} ms")
    read = timeit(lambda: read_metadata(meta, 12), repeat, max(1, number // 200))
    print(f"metadata v12 read, 2,000 parts:      {read * 1e3:8.3f} ms")

    big = snapshot(2000, 50) if not args.quick else snapshot(20, 50)
    update = timeit(lambda: store.apply_metadata(big, full=True), 3, 1)
    print(f"cluster view update, {sum(len(t[4]) for t in big.topics):,} parts: "
          f"{update * 1e3:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
