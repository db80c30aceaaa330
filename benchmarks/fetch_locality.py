"""What ``client_rack`` costs on the Fetch path: a consumer load through two proxies, one
without client_rack and one that fills it into every Fetch request (and counts every
Fetch response for the locality metric).

A Tansu broker (or ``--bootstrap``: any cluster; the topic has one replica per
partition, so no redirect ever happens: every Fetch is filled; with the default
``--rack``, which names no broker's rack, no response is walked for redirects either,
while ``--rack`` naming a broker's rack has the answers of the brokers outside it
walked, the worst case) holds a topic of ``--mb`` MB of
``--size``-byte records in ``--partitions`` partitions; each round a librdkafka consumer
(it sends Fetch v11+ with an empty rack_id) reads the whole topic through each proxy,
in rotating order (each first in turn, mirrored every other round). Per proxy: MB/s and
the proxy's CPU seconds per GB read. Then the per-request cost: closed loops of small
one-partition Fetch v12 requests (``--fetch-seconds``, 0 skips it). Each cost is the
median over the rounds of the ratio B/A, printed with its quartiles.

``--baseline-exe PATH`` adds a third proxy, ``before``: another installation's
``rackguard`` (e.g. a worktree of an older commit) with the same client_rack, measured in
the same rounds, so two versions of the fetch path compare under the same load.

Usage: .venv/bin/python -m benchmarks.fetch_locality [--rounds 8] [--mb 200]
[--partition-kb 1024] [--fetch-seconds 2] [--bootstrap HOST:PORT] [--rack R]
[--baseline-exe PATH] [--json F]
Figures are printed, never asserted (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.bench import cpu_seconds, free_port, process, producer, tansu_binary


def fill_topic(bootstrap: str, topic: str, partitions: int, size: int, total_mb: int,
               batch_kb: int | None = None) -> int:
    """``total_mb`` of records in a new topic of one replica per partition (so a proxy's
    rack, which names no broker's, never redirects a fetch: only its cost is measured)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    extra: dict[str, Any] = {"queue.buffering.max.kbytes": 65536, "acks": "1"}
    if batch_kb is not None:  # a broker answers with whole batches: small ones, small fetches
        extra["batch.size"] = batch_kb * 1024
    p = producer(bootstrap, **extra)
    payload = b"x" * size
    count = total_mb * 1_000_000 // size
    for i in range(count):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    return count


def consume_all(bootstrap: str, topic: str, partitions: int, count: int, partition_kb: int
                ) -> tuple[int, float]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-fetch",
                  "enable.auto.commit": False, "fetch.max.bytes": 8 << 20,
                  "max.partition.fetch.bytes": partition_kb * 1024})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = size = 0
    start = time.perf_counter()
    last_progress = time.monotonic()
    try:
        while seen < count:
            for m in c.consume(10_000, 0.5):
                value = m.value()
                if m.error() is None and value is not None:
                    seen += 1
                    size += len(value)
                    last_progress = time.monotonic()
            if time.monotonic() - last_progress > STALL_S:
                raise RuntimeError(f"no record through {bootstrap} for {STALL_S} s "
                                   f"({seen} of {count} read)")
        return size, time.perf_counter() - start
    finally:
        c.close()


PORT_BLOCK = 220  # a proxy's bootstrap port, its broker ports (node ids < 200), metrics
STALL_S = 60  # a consumer that reads nothing for this long fails the run (with the logs)


def port_block() -> int:
    """A random base below 32768 whose next PORT_BLOCK ports are all free now (a broker
    listener opens later, at base + 1 + node id: Tansu's node is 111; a port taken
    meanwhile fails the run with the proxy's log, it is only a bench)."""
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(20000, 32000 - PORT_BLOCK)
        try:
            for port in range(base, base + PORT_BLOCK):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free block of ports below 32768")


def fetch_counts(metrics_port: int) -> tuple[float, float]:
    """(Fetch requests seen, Fetch requests given client_rack) of one proxy."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples
               if s.labels.get("api") == "Fetch"]
    return (sum(s.value for s in samples if s.name == "rackguard_requests_total"),
            sum(s.value for s in samples if s.name == "rackguard_rack_filled_requests_total"))


def fetch_frame(topic: str, partition: int, offset: int, corr: int) -> bytes:
    """A Fetch v12 request as librdkafka sends it (empty rack_id), for one partition."""
    from kafka.protocol.consumer import FetchRequest

    fp = FetchRequest.FetchTopic.FetchPartition(
        partition=partition, current_leader_epoch=-1, fetch_offset=offset,
        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=16 * 1024)
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 * 1024,
                       isolation_level=0, session_id=0, session_epoch=-1,
                       topics=[FetchRequest.FetchTopic(topic=topic, partitions=[fp])],
                       forgotten_topics_data=[], rack_id="")
    req.with_header(correlation_id=corr, client_id="bench-fetch")
    return bytes(req.encode(version=12, header=True, framed=True))


def fetch_loop(bootstrap: str, frames: list[bytes], seconds: float) -> int:
    """Closed loop on one connection (to node 1's listener is not needed: one broker):
    send a request, read its answer, repeat; returns the answers read."""
    host, port = bootstrap.rsplit(":", 1)
    done = 0
    with socket.create_connection((host, int(port)), 5) as s:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            s.sendall(frames[done % len(frames)])
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            s.recv(size, socket.MSG_WAITALL)
            done += 1
    return done


def request_rate(bootstrap: str, pid: int, frames: list[bytes], seconds: float,
                 connections: int) -> tuple[float, float]:
    """(fetches/s, proxy CPU microseconds per fetch) over ``connections`` closed loops."""
    results: list[int] = []
    cpu0 = cpu_seconds(pid)
    threads = [threading.Thread(target=lambda: results.append(
        fetch_loop(bootstrap, frames, seconds))) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu = cpu_seconds(pid) - cpu0
    total = sum(results)
    return total / seconds, cpu / total * 1e6


def rotation(names: list[str], r: int) -> list[str]:
    """Round ``r``'s order: each proxy first in turn, mirrored every other round."""
    k = r // 2 % len(names)
    order = names[k:] + names[:k]
    return order if r % 2 == 0 else order[::-1]


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 4:
        mid = statistics.median(values)
        return min(values), mid, max(values)
    q = statistics.quantiles(values, n=4)
    return q[0], q[1], q[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--partition-kb", type=int, default=1024,
                        help="max.partition.fetch.bytes in KB (1024: librdkafka's default; "
                        "smaller means more Fetch requests per GB, the proxy's worst case)")
    parser.add_argument("--fetch-seconds", type=float, default=2.0,
                        help="seconds per turn of the request-rate part (0: skip it)")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--mode", choices=("fill", "observe"), default="fill",
                        help="client_rack_mode of the second proxy (observe: only the "
                        "response walk, no request changed)")
    parser.add_argument("--batch-kb", type=int, default=None,
                        help="the producer's batch.size in KB (default librdkafka's, 1 MB): "
                        "a fetch carries at least one whole batch")
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="an existing cluster instead of a Tansu broker started here "
                        "(broker node ids below 200)")
    parser.add_argument("--rack", default="bench-zone",
                        help="client_rack of the proxies with one (default: a rack no broker "
                        "has, so no fetch is redirected)")
    parser.add_argument("--exe", metavar="PATH",
                        help="the rackguard executable of 'off' and 'client_rack' (default: "
                        "this environment's)")
    parser.add_argument("--baseline-exe", metavar="PATH",
                        help="a rackguard executable of another version: a third proxy, "
                        "'before', with the same client_rack")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="rackguard-bench-fetch-"))
    try:
        return measure(args, logs)
    except RuntimeError as exc:  # say why, with what the proxies and the broker logged
        print(f"bench failed: {exc}", file=sys.stderr)
        for log in sorted(logs.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-15:]
            print(f"--- {log.name} (last lines)", *tail, sep="\n", file=sys.stderr)
        return 1


def measure(args: argparse.Namespace, logs: Path) -> int:
    exe = args.exe or str(Path(sys.executable).parent / "rackguard")
    names = ["off", "client_rack"] + (["before"] if args.baseline_exe else [])
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    with ExitStack() as stack:
        if args.bootstrap:
            upstream = args.bootstrap
        else:
            port = free_port()
            stack.enter_context(process([
                tansu_binary(), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
                "--storage-engine", "memory://tansu/"], logs / "tansu.log", port))
            upstream = f"127.0.0.1:{port}"
        topic = f"bench-fetch-{os.getpid()}"
        count = fill_topic(upstream, topic, args.partitions, args.size, args.mb, args.batch_kb)
        targets: dict[str, tuple[str, int]] = {}
        blocks: list[int] = []
        while len(blocks) < len(names):
            block = port_block()
            if all(abs(block - b) >= PORT_BLOCK for b in blocks):
                blocks.append(block)
        # bootstrap port, broker port base (node N at base + N), metrics port
        metrics = {name: b + PORT_BLOCK - 1 for name, b in zip(names, blocks, strict=True)}
        rack_flags = ["--client-rack", args.rack, "--client-rack-mode", args.mode]
        for block, name in zip(blocks, names, strict=True):
            bport, base = block, block + 1
            extra = [*([] if name == "off" else rack_flags),
                     "--metrics-port", str(metrics[name])]
            binary = args.baseline_exe if name == "before" else exe
            proc = stack.enter_context(process(
                [binary, "serve", "--upstream", upstream, "--bootstrap-port", str(bport),
                 "--broker-port-base", str(base), "--log-level", "WARNING", *extra],
                logs / f"{name}.log", bport))
            targets[name] = (f"127.0.0.1:{bport}", proc.pid)
        consumed = dict.fromkeys(names, 0)
        for name in names:  # warm up
            consumed[name] += consume_all(targets[name][0], topic, args.partitions, count,
                                          args.partition_kb)[0]
        for r in range(args.rounds):
            order = rotation(names, r)
            for name in order:
                bootstrap, pid = targets[name]
                cpu0 = cpu_seconds(pid)
                size, elapsed = consume_all(bootstrap, topic, args.partitions, count,
                                            args.partition_kb)
                cpu = cpu_seconds(pid) - cpu0
                consumed[name] += size
                samples[name].append((size / elapsed / 1e6, cpu / (size / 1e9)))
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(
                f"{name} {samples[name][-1][0]:.1f} MB/s" for name in names), file=sys.stderr)
        by_consumers = {name: fetch_counts(metrics[name])[0] for name in names}
        per_partition = count // args.partitions
        frames = [fetch_frame(topic, p, max(per_partition - 40, 0), i)
                  for i, p in enumerate(range(args.partitions))]
        rates: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        for r in range(args.rounds if args.fetch_seconds > 0 else 0):
            order = rotation(names, r)
            for name in order + order[::-1]:  # A B B A: each gets two half turns
                bootstrap, pid = targets[name]
                rates[name].append(request_rate(bootstrap, pid, frames,
                                                args.fetch_seconds / 2, args.connections))
        counts = {name: fetch_counts(metrics[name]) for name in names}
    summary: dict[str, Any] = {
        name: {"mb_s": statistics.median(s[0] for s in rows),
               "cpu_s_per_gb": statistics.median(s[1] for s in rows)}
        for name, rows in samples.items()}
    summary["fetch_requests"] = counts
    print("| proxy | MB/s (median) | CPU s/GB (median) |\n|---|---|---|")
    for name in names:
        print(f"| {name} | {summary[name]['mb_s']:.1f} | {summary[name]['cpu_s_per_gb']:.2f} |")
    for name in names[1:]:
        q = quartiles([b[0] / a[0] for a, b in zip(samples["off"], samples[name], strict=True)])
        c = quartiles([b[1] / a[1] for a, b in zip(samples["off"], samples[name], strict=True)])
        summary[f"{name}_throughput_ratio_q1_median_q3"] = q
        summary[f"{name}_cpu_per_gb_ratio_q1_median_q3"] = c
        print(f"throughput {name}/off: median {q[1]:.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}); "
              f"CPU per GB: median {c[1]:.3f} (quartiles {c[0]:.3f}-{c[2]:.3f})")
    summary["kb_per_consumer_fetch"] = {
        name: consumed[name] / max(by_consumers[name], 1) / 1e3 for name in names}
    print("consumers' Fetch requests: " + ", ".join(
        f"{name} {by_consumers[name]:.0f} ({summary['kb_per_consumer_fetch'][name]:.0f} KB "
        "each)" for name in names))
    print("all Fetch requests (seen, given client_rack): " + ", ".join(
        f"{name} {seen:.0f}, {filled:.0f}" for name, (seen, filled) in counts.items()))
    if rates["off"]:
        f = summary["fetches"] = {
            name: {"per_s": statistics.median(x[0] for x in rows),
                   "cpu_us_each": statistics.median(x[1] for x in rows)}
            for name, rows in rates.items()}
        print(f"small fetches ({args.connections} closed loops, Fetch v12, 1 partition "
              "near its end): " + ", ".join(
                  f"{name} {f[name]['per_s']:.0f}/s at {f[name]['cpu_us_each']:.1f} us CPU each"
                  for name in names))
        for name in names[1:]:
            a = quartiles([y[0] / x[0] for x, y in zip(rates["off"], rates[name], strict=True)])
            b = quartiles([y[1] / x[1] for x, y in zip(rates["off"], rates[name], strict=True)])
            d = quartiles([y[1] - x[1] for x, y in zip(rates["off"], rates[name], strict=True)])
            summary[f"{name}_fetch_rate_ratio_q1_median_q3"] = a
            summary[f"{name}_cpu_per_fetch_ratio_q1_median_q3"] = b
            summary[f"{name}_cpu_us_added_per_fetch_q1_median_q3"] = d
            print(f"  {name}/off: rate ratio median {a[1]:.3f} ({a[0]:.3f}-{a[2]:.3f}), CPU "
                  f"per fetch ratio median {b[1]:.3f} ({b[0]:.3f}-{b[2]:.3f}), CPU added per "
                  f"fetch median {d[1]:.1f} us ({d[0]:.1f} to {d[2]:.1f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"samples": samples, "fetches": rates,
                                               "summary": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
