"""What ``client_rack`` costs on the Fetch path: a consumer load through two proxies, one
without client_rack and one that fills it into every Fetch request (and reads every
Fetch response for the locality metric).

A Tansu broker (one node, so no redirect ever happens: every Fetch is filled and every
response walked, the worst case) holds a topic of ``--mb`` MB of ``--size``-byte records
in ``--partitions`` partitions; each round a librdkafka consumer (it sends Fetch v11+
with an empty rack_id) reads the whole topic through each proxy, in mirrored order
(A B, B A, ...). Per proxy: MB/s and the proxy's CPU seconds per GB read. The cost is the
median over the rounds of the ratio B/A, printed with its quartiles.

Usage: .venv/bin/python -m benchmarks.fetch_locality [--rounds 8] [--mb 200]
[--partition-kb 1024] [--json F]
Figures are printed, never asserted (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rackguard.proxy.tools.bench import cpu_seconds, free_port, process, producer, tansu_binary


def fill_topic(bootstrap: str, topic: str, partitions: int, size: int, total_mb: int) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = producer(bootstrap, **{"queue.buffering.max.kbytes": 65536, "acks": "1"})
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
    deadline = time.monotonic() + 300
    try:
        while seen < count and time.monotonic() < deadline:
            for m in c.consume(10_000, 0.5):
                if m.error() is None:
                    seen += 1
                    size += len(m.value())
        return size, time.perf_counter() - start
    finally:
        c.close()


def filled_fetches(metrics_port: int) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "rackguard_rack_filled_requests_total"
               and s.labels.get("api") == "Fetch")


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
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="rackguard-bench-fetch-"))
    exe = str(Path(sys.executable).parent / "rackguard")
    samples: dict[str, list[tuple[float, float]]] = {"off": [], "client_rack": []}
    with ExitStack() as stack:
        port = free_port()
        stack.enter_context(process([
            tansu_binary(), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
            "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
            "--storage-engine", "memory://tansu/"], logs / "tansu.log", port))
        upstream = f"127.0.0.1:{port}"
        topic = "bench-fetch"
        count = fill_topic(upstream, topic, args.partitions, args.size, args.mb)
        targets: dict[str, tuple[str, int]] = {}
        with socket.socket() as held:  # kept bound until the proxies' ports are picked
            metrics_port = free_port()
            held.bind(("127.0.0.1", metrics_port))
            ports = [(free_port(), free_port() - 200)]
            with socket.socket() as held2:
                held2.bind(("127.0.0.1", ports[0][0]))
                ports.append((free_port(), ports[0][1] - 300))
        for (bport, base), (name, extra) in zip(ports, (("off", []), ("client_rack", [
                "--client-rack", "zone-a", "--metrics-port", str(metrics_port)])), strict=True):
            proc = stack.enter_context(process(
                [exe, "serve", "--upstream", upstream, "--bootstrap-port", str(bport),
                 "--broker-port-base", str(base), "--log-level", "WARNING", *extra],
                logs / f"{name}.log", bport))
            targets[name] = (f"127.0.0.1:{bport}", proc.pid)
        # warm up both
        consume_all(targets["off"][0], topic, args.partitions, count, args.partition_kb)
        consume_all(targets["client_rack"][0], topic, args.partitions, count,
                    args.partition_kb)
        for r in range(args.rounds):
            order = ["off", "client_rack"] if r % 2 == 0 else ["client_rack", "off"]
            for name in order:
                bootstrap, pid = targets[name]
                cpu0 = cpu_seconds(pid)
                size, elapsed = consume_all(bootstrap, topic, args.partitions, count,
                                            args.partition_kb)
                cpu = cpu_seconds(pid) - cpu0
                samples[name].append((size / elapsed / 1e6, cpu / (size / 1e9)))
            print(f"round {r + 1}/{args.rounds}: off {samples['off'][-1][0]:.1f} MB/s, "
                  f"client_rack {samples['client_rack'][-1][0]:.1f} MB/s", file=sys.stderr)
        filled = filled_fetches(metrics_port)
    mb_ratio = [b[0] / a[0] for a, b in zip(samples["off"], samples["client_rack"],
                                             strict=True)]
    cpu_ratio = [b[1] / a[1] for a, b in zip(samples["off"], samples["client_rack"],
                                              strict=True)]
    summary: dict[str, Any] = {
        name: {"mb_s": statistics.median(s[0] for s in rows),
               "cpu_s_per_gb": statistics.median(s[1] for s in rows)}
        for name, rows in samples.items()}
    summary["filled_fetch_requests"] = filled
    summary["throughput_ratio_q1_median_q3"] = quartiles(mb_ratio)
    summary["cpu_per_gb_ratio_q1_median_q3"] = quartiles(cpu_ratio)
    print("| proxy | MB/s (median) | CPU s/GB (median) |\n|---|---|---|")
    for name in ("off", "client_rack"):
        print(f"| {name} | {summary[name]['mb_s']:.1f} | {summary[name]['cpu_s_per_gb']:.2f} |")
    q = summary["throughput_ratio_q1_median_q3"]
    c = summary["cpu_per_gb_ratio_q1_median_q3"]
    print(f"throughput client_rack/off: median {q[1]:.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}); "
          f"CPU per GB: median {c[1]:.3f} (quartiles {c[0]:.3f}-{c[2]:.3f})")
    print(f"Fetch requests given client_rack: {filled:.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"samples": samples, "summary": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
