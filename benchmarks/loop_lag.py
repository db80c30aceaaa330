"""Event-loop stalls while a 100,000-partition Metadata refresh is absorbed.

    .venv/bin/python benchmarks/loop_lag.py [--partitions N] [--repeat R] [--no-on-loop]
    .venv/bin/python benchmarks/loop_lag.py --topics T [--partitions N] [--repeat R]
                                            [--all-configs]
    .venv/bin/python benchmarks/loop_lag.py --topics T --steady N [--partitions N]
                                            [--repeat R]

A probe task sleeps 1 ms in a loop and records how late it wakes; the largest
lateness is the longest stall any connection would have seen. Printed per
repetition, then the median and the maximum over repetitions (other processes
on the machine add stalls of their own, so one run proves little).

Without ``--topics``: each repetition absorbs the refresh (2,000 topics of 50
partitions) twice on the proxy's way (read and merge on a worker thread): into
an empty view, then replacing that view (the steady state, when the old view
is freed as well), and keeps probing until that old view is gone; and, for
comparison, once for doing both on the loop.

With ``--topics T``: the poller's whole refresh cycle, N partitions spread over
T topics. :class:`MetadataPoller` polls a fake broker that runs on a thread
of its own and answers from pre-encoded frames (so the broker costs the loop
nothing): Metadata, then DescribeConfigs for every topic's
min.insync.replicas, applied to the view. Three polls per repetition: into an
empty view (every value new), again with the same values (nothing changes),
and with every value changed. ``--all-configs`` makes the broker behave like
Tansu: it drops the connection on a DescribeConfigs request that names keys,
so the poller falls back to asking for all configs (20 per topic here).

With ``--topics T --steady N``: the steady state, where the cyclic GC's full
collections come from. With the serving proxy's modules imported, one poll into
an empty view, ``gc.collect()``, then N polls in a row of an unchanged cluster
(min.insync.replicas asked for when the poller would, every 15th poll by
default). Printed per run: the full (generation 2) collections that ran and
their durations (a ``gc.callbacks`` entry), the longest stall, and one full
collection's duration afterwards with the number of tracked objects; then the
medians over the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import socket
import statistics
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.admin import DescribeConfigsResponse  # noqa: E402
from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse  # noqa: E402

from benchmarks.micro import metadata_frame  # noqa: E402
from protocol.metadata import read_metadata  # noqa: E402
from protocol.primitives import encode_array_len, encode_string  # noqa: E402
from proxy.cluster.feeder import ViewFeeder  # noqa: E402
from proxy.cluster.poller import MetadataPoller  # noqa: E402
from proxy.cluster.view import ClusterView, ClusterViewStore  # noqa: E402
from proxy.settings import load_settings  # noqa: E402

_SETTLE_S = 0.15  # probing goes on this long after the last absorb (the old view's release)
_RACKS = ("rack-a", "rack-b", "rack-c")
_METADATA_VERSION = 12
_CONFIGS_VERSION = 4
_OTHER_CONFIGS = 19  # besides min.insync.replicas, in an all-configs answer
_CYCLE = ("new values", "unchanged", "changed")  # the min.insync.replicas of each poll
_IDLE_S = 0.3  # probed before the first poll: the stalls the machine adds by itself


async def probe(stop: asyncio.Event, lags: list[tuple[float, float]]) -> None:
    """Record (wake-up time, lateness) of a 1 ms sleep until ``stop`` is set."""
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        lags.append((now, now - start - 0.001))


async def measure(frame: bytes, on_loop: bool) -> tuple[list[float], float]:
    """Probe lags over the whole run, and the time the refreshes took (ms, each)."""
    store = ClusterViewStore(time.monotonic)
    feeder = ViewFeeder(store)
    stop = asyncio.Event()
    lags: list[tuple[float, float]] = []
    task = asyncio.ensure_future(probe(stop, lags))
    await asyncio.sleep(0.05)
    took = []
    for _ in range(1 if on_loop else 2):
        start = time.perf_counter()
        if on_loop:
            store.apply_metadata(read_metadata(frame, 12), full=True)
        else:
            await feeder.absorb(frame, 12, full=True)
        took.append(time.perf_counter() - start)
        await asyncio.sleep(_SETTLE_S)
    stop.set()
    await task
    feeder.close()
    assert store.view.partition_count > 0
    return [lag for _, lag in lags], statistics.mean(took)


# ----- the poller's refresh cycle against a fake broker on a thread


def many_topics_metadata(partitions: int, topics: int, port: int) -> bytes:
    """A Metadata v12 response: 6 brokers in 3 racks, ``partitions`` over ``topics``.

    Every broker is advertised as 127.0.0.1:``port`` (the fake broker): the poller
    asks the brokers of its view from the second poll on, so they must resolve.
    """
    cls = MetadataResponse
    brokers = [cls.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=port,
                                          rack=_RACKS[(n - 1) % 3]) for n in range(1, 7)]
    per_topic, extra = divmod(partitions, topics)
    out = []
    for t in range(topics):
        parts = [cls.MetadataResponseTopic.MetadataResponsePartition(
            error_code=0, partition_index=p, leader_id=1 + p % 6, leader_epoch=3,
            replica_nodes=[1 + (p + i) % 6 for i in range(3)],
            isr_nodes=[1 + (p + i) % 6 for i in range(3)], offline_replicas=[])
            for p in range(per_topic + (t < extra))]
        out.append(cls.MetadataResponseTopic(
            error_code=0, name=f"topic-{t}", topic_id=uuid.UUID(int=t + 1), is_internal=False,
            partitions=parts))
    resp = cls(version=_METADATA_VERSION, throttle_time_ms=0, brokers=brokers, cluster_id="c",
               controller_id=1, topics=out)
    resp.with_header(correlation_id=0)
    return bytes(resp.encode(header=True, framed=True))


def describe_configs_frame(topics: int, value: int, all_configs: bool) -> bytes:
    """A DescribeConfigs v4 response for ``topic-0``... with min.insync.replicas=``value``.

    One result is encoded with kafka-python; the others copy it with their own name
    (kafka-python would take seconds for 400,000 config entries).
    """
    r = DescribeConfigsResponse
    entry = r.DescribeConfigsResult.DescribeConfigsResourceResult
    configs = [entry(name="min.insync.replicas", value=str(value), read_only=False,
                     config_source=1, is_sensitive=False, synonyms=[], config_type=3,
                     documentation=None)]
    if all_configs:
        configs += [entry(name=f"some.topic.config.{i}", value=str(1000 * i), read_only=False,
                          config_source=5, is_sensitive=False, synonyms=[], config_type=5,
                          documentation=None) for i in range(_OTHER_CONFIGS)]
    one = r(version=_CONFIGS_VERSION, throttle_time_ms=0, results=[r.DescribeConfigsResult(
        error_code=0, error_message=None, resource_type=2, resource_name="X", configs=configs)])
    one.with_header(correlation_id=0)
    template = bytes(one.encode(header=True, framed=True))
    # size, correlation id, header tags, throttle, results length 1 (compact), then the result
    head, result = template[:14], template[14:-1]
    assert head[-1] == 2 and result[4:6] == b"\x02X" and template[-1] == 0
    pre, post = result[:4], result[6:]
    body = [head[4:-1], encode_array_len(topics, True)]
    body += [pre + encode_string(f"topic-{t}", True) + post for t in range(topics)]
    body.append(b"\x00")
    data = b"".join(body)
    return struct.pack(">i", len(data)) + data


class FakeBroker:
    """Answers ApiVersions, Metadata and DescribeConfigs from pre-encoded frames.

    Runs on threads of its own with blocking sockets (which release the GIL), so it
    adds next to nothing to the event loop's stalls. ``value`` picks the
    min.insync.replicas of the next DescribeConfigs answer.
    """

    def __init__(self, metadata: Callable[[int], bytes], configs: Callable[[int, bool], bytes],
                 drop_keyed: bool) -> None:
        self._configs = configs
        self._drop_keyed = drop_keyed
        self.value = 2
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._metadata = metadata(self.port)  # advertises this very port
        self._versions = self._api_versions()
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def _api_versions() -> bytes:
        cls = ApiVersionsResponse
        resp = cls(version=0, error_code=0, api_keys=[
            cls.ApiVersion(api_key=k, min_version=0, max_version=hi)
            for k, hi in ((18, 0), (3, _METADATA_VERSION), (32, _CONFIGS_VERSION))])
        resp.with_header(correlation_id=0)
        return bytes(resp.encode(header=True, framed=True))

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            while True:
                head = _recv_exactly(sock, 4)
                if head is None:
                    return
                body = _recv_exactly(sock, struct.unpack(">i", head)[0])
                if body is None:
                    return
                key, _, corr = struct.unpack_from(">hhi", body, 0)
                if key == 18:
                    frame = self._versions
                elif key == 3:
                    frame = self._metadata
                elif key == 32:
                    keyed = b"min.insync.replicas" in body
                    if keyed and self._drop_keyed:
                        return
                    frame = self._configs(self.value, keyed)
                else:
                    return
                sock.sendall(struct.pack(">ii", len(frame) - 4, corr))
                sock.sendall(memoryview(frame)[8:])


def _recv_exactly(sock: socket.socket, n: int) -> bytearray | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            return None
        got += k
    return buf


async def measure_cycle(broker: FakeBroker, partitions: int
                        ) -> tuple[float, list[float], list[float]]:
    """The longest stall while idle, during each of the three polls (and its settling),
    and each poll's duration."""
    store = ClusterViewStore(time.monotonic)
    ticks = iter(range(0, 10**9, 10**6))  # every poll is due for a DescribeConfigs read
    settings = load_settings({"upstream": f"127.0.0.1:{broker.port}"}, env={})
    poller = MetadataPoller(settings, store, lambda brokers: None, lambda: None,
                            lambda: float(next(ticks)))
    stop = asyncio.Event()
    lags: list[tuple[float, float]] = []
    task = asyncio.ensure_future(probe(stop, lags))
    await asyncio.sleep(0.05)
    idle_from = time.perf_counter()
    await asyncio.sleep(_IDLE_S)
    starts, took = [], []
    views: list[tuple[int, ClusterView]] = []
    for name in _CYCLE:
        broker.value = 3 if name == "changed" else 2
        starts.append(time.perf_counter())
        await poller.poll_once()
        took.append(time.perf_counter() - starts[-1])
        await asyncio.sleep(_SETTLE_S)
        views.append((broker.value, store.view))
    stop.set()
    await task
    await poller.stop()
    for i, (expected, view) in enumerate(views):  # checked off the clock
        assert view.partition_count == partitions, i
        assert all(t.min_insync_replicas == expected for t in view.topics.values()), i
    ends = starts[1:] + [float("inf")]
    stalls = [max((lag for at, lag in lags if start <= at < end), default=0.0)
              for start, end in zip(starts, ends, strict=True)]
    idle = max((lag for at, lag in lags if idle_from <= at < starts[0]), default=0.0)
    return idle, stalls, took


def run_cycle(args: argparse.Namespace) -> None:
    label = (f"{args.partitions:,} partitions in {args.topics:,} topics, refresh cycle"
             + (" (all configs)" if args.all_configs else ""))
    frames: dict[tuple[int, bool], bytes] = {}

    def configs(value: int, keyed: bool) -> bytes:
        key = (value, keyed or not args.all_configs)
        if key not in frames:
            frames[key] = describe_configs_frame(args.topics, value, all_configs=not key[1])
        return frames[key]

    for value in (2, 3):
        configs(value, not args.all_configs)  # encoded before any measurement
    broker = FakeBroker(partial(many_topics_metadata, args.partitions, args.topics), configs,
                        drop_keyed=args.all_configs)
    worst: list[float] = []
    idles: list[float] = []
    per_poll: list[list[float]] = [[] for _ in _CYCLE]
    try:
        for i in range(args.repeat):
            idle, stalls, took = asyncio.run(measure_cycle(broker, args.partitions))
            idles.append(idle)
            worst.append(max(stalls))
            for column, stall in zip(per_poll, stalls, strict=True):
                column.append(stall)
            detail = ", ".join(f"{name} {stall * 1e3:.1f} ms ({t * 1e3:.0f} ms)"
                               for name, stall, t in zip(_CYCLE, stalls, took, strict=True))
            print(f"{label}, run {i + 1}: longest stall {max(stalls) * 1e3:6.1f} ms; per poll "
                  f"(poll duration): {detail}; idle {idle * 1e3:.1f} ms")
    finally:
        broker.close()
    for name, column in zip(_CYCLE, per_poll, strict=True):
        print(f"{label}, poll with {name}: longest stall median "
              f"{statistics.median(column) * 1e3:.1f} ms, max {max(column) * 1e3:.1f} ms")
    print(f"{label}, idle for {_IDLE_S:.1f} s before (the machine's own noise): longest "
          f"stall median {statistics.median(idles) * 1e3:.1f} ms, max {max(idles) * 1e3:.1f} ms")
    print(f"{label}: longest stall median {statistics.median(worst) * 1e3:.1f} ms, "
          f"max {max(worst) * 1e3:.1f} ms over {args.repeat} run(s)")


# ----- the steady state: refreshes in a row, with the proxy's modules loaded


class FullCollections:
    """A ``gc.callbacks`` entry: the duration of every generation-2 (full) collection."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.durations.append(time.perf_counter() - self._began)


async def measure_steady(broker: FakeBroker, partitions: int, refreshes: int
                         ) -> tuple[list[float], list[float], float, float, int]:
    """``refreshes`` polls of an unchanged cluster after a first one into an empty view.

    The clock the poller reads advances by the metadata refresh interval per poll, so
    min.insync.replicas are asked for when the proxy would ask (every 30 s by default,
    on every 15th poll). Returns the longest stall of each refresh (the poll and its
    settling), the durations of the full collections that ran during them, the
    idle stall, a full collection's duration at the end, and the GC-tracked objects left.
    """
    store = ClusterViewStore(time.monotonic)
    now = [0.0]
    settings = load_settings({"upstream": f"127.0.0.1:{broker.port}"}, env={})
    step = settings.metadata_refresh_interval_ms / 1000
    poller = MetadataPoller(settings, store, lambda brokers: None, lambda: None,
                            lambda: now[0])
    await poller.poll_once()  # the first view: every object new
    watch = FullCollections()
    gc.collect()  # every run starts from the same collector state
    gc.callbacks.append(watch)
    try:
        stop = asyncio.Event()
        lags: list[tuple[float, float]] = []
        task = asyncio.ensure_future(probe(stop, lags))
        await asyncio.sleep(0.05)
        idle_from = time.perf_counter()
        await asyncio.sleep(_IDLE_S)
        starts = []
        for _ in range(refreshes):
            now[0] += step
            starts.append(time.perf_counter())
            await poller.poll_once()
            await asyncio.sleep(_SETTLE_S)
        stop.set()
        await task
    finally:
        gc.callbacks.remove(watch)
    await poller.stop()
    assert store.view.partition_count == partitions
    ends = starts[1:] + [float("inf")]
    stalls = [max((lag for at, lag in lags if start <= at < end), default=0.0)
              for start, end in zip(starts, ends, strict=True)]
    idle = max((lag for at, lag in lags if idle_from <= at < starts[0]), default=0.0)
    began = time.perf_counter()
    gc.collect()
    full = time.perf_counter() - began
    tracked = len(gc.get_objects())
    del store, poller
    return stalls, watch.durations, idle, full, tracked


def run_steady(args: argparse.Namespace) -> None:
    importlib.import_module("proxy.app")  # the serving proxy's modules, loaded
    label = f"{args.partitions:,} partitions in {args.topics:,} topics, steady state"
    frames = {v: describe_configs_frame(args.topics, v, all_configs=False) for v in (2, 3)}
    broker = FakeBroker(partial(many_topics_metadata, args.partitions, args.topics),
                        lambda value, keyed: frames[value], drop_keyed=False)
    worst, counts, spent, idles, fulls, tracked = [], [], [], [], [], []
    try:
        for i in range(args.repeat):
            stalls, durations, idle, full, objects = asyncio.run(
                measure_steady(broker, args.partitions, args.steady))
            worst.append(max(stalls))
            counts.append(len(durations))
            spent.append(sum(durations))
            idles.append(idle)
            fulls.append(full)
            tracked.append(objects)
            each = " ".join(f"{d * 1e3:.1f}" for d in durations) or "-"
            print(f"{label}, run {i + 1}: {args.steady} refreshes, {len(durations)} full "
                  f"collection(s) [{each}] ms, longest stall {max(stalls) * 1e3:.1f} ms, "
                  f"median refresh's {statistics.median(stalls) * 1e3:.1f} ms; idle "
                  f"{idle * 1e3:.1f} ms; a full collection afterwards {full * 1e3:.1f} ms "
                  f"over {objects:,} tracked objects")
    finally:
        broker.close()
    print(f"{label}, medians over {args.repeat} run(s) of {args.steady} refreshes: "
          f"{statistics.median(counts)} full collection(s) per run taking "
          f"{statistics.median(spent) * 1e3:.1f} ms in all, longest stall "
          f"{statistics.median(worst) * 1e3:.1f} ms (max {max(worst) * 1e3:.1f}), idle "
          f"{statistics.median(idles) * 1e3:.1f} ms, a full collection "
          f"{statistics.median(fulls) * 1e3:.1f} ms over {statistics.median(tracked):,.0f} "
          "tracked objects")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="event-loop stalls during a metadata refresh")
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=None,
                        help="run the poller's refresh cycle with this many topics")
    parser.add_argument("--all-configs", action="store_true",
                        help="with --topics: a broker that only answers for all configs")
    parser.add_argument("--steady", type=int, default=None, metavar="N",
                        help="with --topics: N refreshes in a row of an unchanged cluster, "
                        "with the proxy's modules loaded; count the full collections")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-on-loop", action="store_true",
                        help="skip the comparison run on the event loop")
    args = parser.parse_args(argv)
    if args.steady is not None:
        if args.topics is None:
            parser.error("--steady needs --topics")
        run_steady(args)
        return 0
    if args.topics is not None:
        run_cycle(args)
        return 0
    frame = metadata_frame(args.partitions)
    label = f"{args.partitions:,} partitions"
    stalls = []
    for i in range(args.repeat):
        lags, took = asyncio.run(measure(frame, on_loop=False))
        lags.sort()
        stalls.append(lags[-1])
        print(f"{label}, worker thread (rackguard), run {i + 1}: longest stall "
              f"{lags[-1] * 1e3:6.1f} ms, p99 {lags[int(len(lags) * 0.99)] * 1e3:5.1f} ms"
              f"  (refresh took {took * 1e3:.0f} ms)")
    print(f"{label}, worker thread (rackguard): longest stall median "
          f"{statistics.median(stalls) * 1e3:.1f} ms, max {max(stalls) * 1e3:.1f} ms "
          f"over {args.repeat} run(s)")
    if not args.no_on_loop:
        lags, took = asyncio.run(measure(frame, on_loop=True))
        print(f"{label}, on the event loop: longest stall {max(lags) * 1e3:.1f} ms"
              f"  (refresh took {took * 1e3:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
