"""Fleet cost: what K sidecars cost a real Kafka cluster, and themselves, at two sizes.

    flock /tmp/rackguard-kafka.lock .venv/bin/python -m benchmarks.fleet
    flock /tmp/rackguard-kafka.lock .venv/bin/python -m benchmarks.fleet --proxies 4 \\
        --sizes 300 --window 5 --rounds 1                      # a smoke run

Starts the suite's real cluster (``python -m tests.system.cluster start``: six Kafka
brokers in three racks, C1 JIT only, small heaps; run as a command, not imported),
creates topics of 6 partitions (RF 3) up to each size, and gives every sidecar one
client writing 2 topics (a 1-record acks=all produce to each every 2 s, raw frames).
Phases alternate, ``--rounds`` times per size: the clients straight to the brokers
(none), through K ``rackguard serve`` processes with ``view_scope = "watched"``, and
through ``--cluster-proxies`` with ``"cluster"`` (today's whole-cluster polling). Each
phase is measured over ``--window`` seconds after ``--warmup``:

- broker CPU: the six brokers' utime + stime (/proc), a phase's minus the mean of the
  "none" phases, per sidecar, in % of one core;
- the sidecars' own Metadata and DescribeConfigs bytes per second (both directions,
  from each proxy's ``rackguard_own_request_bytes_total``), per sidecar;
- each sidecar's CPU (% of a core) and RSS (MB), mean over the K.

Then the first produce to a topic one watched sidecar has never seen (no Metadata
through it first, so the enforcer looks it up) against the second, median of
``--first-produces`` topics: the added latency of the lookup. (A real client asks
Metadata for a topic before it produces; that answer feeds the view and its first
produce adds nothing.)

``--probe N`` first measures, per size, the broker CPU of one request of each kind the
poller sends (N back to back on one connection to broker 1, less its idle CPU over as
long): Metadata for a client's 2 topics, Metadata for every topic, DescribeConfigs for
2 topics. ``--idle`` runs no client traffic; ``--no-config-topic`` starts the sidecars
with ``--config-topic ''`` (the config topic's consumer apart); ``--cluster-proxies 0``
skips the whole-cluster phases.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.metadata import MetadataRequest  # noqa: E402

from benchmarks.produce_frames import kp_request, make_batch  # noqa: E402
from protocol.metadata import read_metadata  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
RACKGUARD = str(Path(sys.executable).parent / "rackguard")
TICK = os.sysconf("SC_CLK_TCK")
PARTITIONS = 6
PRODUCE_VERSION = 9
PRODUCE_EVERY_S = 2.0
SERVE_EXTRA: list[str] = []  # --no-config-topic adds --config-topic ""


# ----- /proc
def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


# ----- the cluster, as a command
@dataclass
class Cluster:
    directory: Path
    bootstrap: str = ""
    brokers: dict[int, tuple[int, int]] = field(default_factory=dict)  # node -> (pid, port)

    def start(self) -> None:
        done = subprocess.run([PYTHON, "-m", "tests.system.cluster", "start", "--dir",
                               str(self.directory)], cwd=ROOT, capture_output=True, text=True,
                              timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"the cluster did not start: {done.stderr or done.stdout}")
        state = json.loads((self.directory / "current" / "cluster.json").read_text())
        for n in state["nodes"]:
            if n["rack"]:
                self.brokers[n["node_id"]] = (n["pid"], n["port"])
        self.bootstrap = ",".join(f"127.0.0.1:{port}" for _, port in self.brokers.values())
        print(f"# {done.stdout.strip()}", flush=True)

    def stop(self) -> None:
        subprocess.run([PYTHON, "-m", "tests.system.cluster", "stop", "--dir",
                        str(self.directory)], cwd=ROOT, timeout=300, check=False)

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid, _ in self.brokers.values())

    def leaders(self, topics: list[str]) -> dict[str, int]:
        """Partition 0's leader of each topic, from one broker's Metadata."""
        port = next(iter(self.brokers.values()))[1]
        out: dict[str, int] = {}
        for start in range(0, len(topics), 500):
            request = MetadataRequest(version=9, topics=[
                MetadataRequest.MetadataRequestTopic(topic_id=None, name=t)
                for t in topics[start:start + 500]], allow_auto_topic_creation=False)
            frame = raw_call(port, request)
            for topic in read_metadata(frame, 9).topics:
                for row in topic[4]:
                    if row[0] == 0 and topic[0] is not None:
                        out[topic[0]] = row[2]
        return out


def raw_call(port: int, request: object) -> bytes:
    request.with_header(correlation_id=1, client_id="fleet")  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(bytes(request.encode(header=True, framed=True)))  # type: ignore[attr-defined]
        head = _recv(s, 4)
        return head + _recv(s, struct.unpack(">i", head)[0])


def _recv(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def create_topics(cluster: Cluster, names: list[str], partitions: int, rf: int = 3) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=120_000)
    try:
        for start in range(0, len(names), 100):
            batch = [NewTopic(n, partitions, rf) for n in names[start:start + 100]]
            try:
                admin.create_topics(batch, timeout_ms=120_000)
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


# ----- sidecars
@dataclass
class Sidecar:
    base: int  # bootstrap port; broker N on base + N; metrics on base + 9
    process: subprocess.Popen[bytes] | None = None

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.base + 9}"

    def start(self, cluster: Cluster, scope: str, log: Path) -> None:
        argv = [RACKGUARD, "serve", "--upstream", cluster.bootstrap, "--listen", "127.0.0.1",
                "--advertised-host", "127.0.0.1", "--bootstrap-port", str(self.base),
                "--broker-port-base", str(self.base), "--metrics-port", str(self.base + 9),
                "--min-insync-racks", "2", "--view-scope", scope, "--log-level", "WARNING",
                *SERVE_EXTRA]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                        stderr=log.open("ab"), cwd=ROOT)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.metrics_url + "/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def own_bytes(self) -> dict[str, float]:
        with urllib.request.urlopen(self.metrics_url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("rackguard_own_request_bytes_total{"):
                api = line.split('api="')[1].split('"')[0]
                out[api] = out.get(api, 0.0) + float(line.rsplit(" ", 1)[1])
        return out

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_blocks(count: int) -> list[int]:
    """``count`` blocks of 10 ports below 32768, all free now."""
    found: list[int] = []
    for base in range(22000, 32700, 10):
        ok = True
        for port in range(base, base + 10):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            found.append(base)
            if len(found) == count:
                return found
    raise SystemExit("not enough free ports below 32768")


# ----- clients: one per sidecar, 2 topics, raw acks=all produces
async def client(port_of: dict[int, int], leaders: dict[str, int], topics: list[str],
                 stop: asyncio.Event) -> None:
    conns: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
    corr = 0
    batch = make_batch(1)
    while not stop.is_set():
        for topic in topics:
            node = leaders[topic]
            if node not in conns:
                conns[node] = await asyncio.open_connection("127.0.0.1", port_of[node])
            reader, writer = conns[node]
            corr += 1
            writer.write(kp_request(PRODUCE_VERSION, [(topic, [(0, batch)])], acks=-1,
                                    correlation_id=corr))
            head = await reader.readexactly(4)
            await reader.readexactly(struct.unpack(">i", head)[0])
        try:
            await asyncio.wait_for(stop.wait(), PRODUCE_EVERY_S)
        except TimeoutError:
            pass
    for _, writer in conns.values():
        writer.close()


class Clients:
    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, targets: list[dict[int, int]], leaders: dict[str, int],
              topics: list[list[str]]) -> None:
        self._stop.clear()
        self._tasks = [asyncio.ensure_future(client(ports, leaders, mine, self._stop))
                       for ports, mine in zip(targets, topics, strict=False)]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)


# ----- phases
@dataclass
class Figures:
    broker_cpu_s: float  # broker CPU seconds per second, all brokers
    own: dict[str, float]  # bytes/s per API, all sidecars
    proxy_cpu: list[float]  # per sidecar, CPU seconds per second
    proxy_rss: list[float]  # per sidecar, MB


async def measure(cluster: Cluster, sidecars: list[Sidecar], window: float) -> Figures:
    procs = [s.process for s in sidecars if s.process is not None]
    b0 = cluster.cpu()
    p0 = [cpu_seconds(p.pid) for p in procs]
    o0 = [s.own_bytes() for s in sidecars]
    t0 = time.monotonic()
    await asyncio.sleep(window)
    elapsed = time.monotonic() - t0
    b1 = cluster.cpu()
    p1 = [cpu_seconds(p.pid) for p in procs]
    o1 = [s.own_bytes() for s in sidecars]
    own: dict[str, float] = {}
    for before, after in zip(o0, o1, strict=True):
        for api, value in after.items():
            own[api] = own.get(api, 0.0) + (value - before.get(api, 0.0)) / elapsed
    return Figures((b1 - b0) / elapsed, own,
                   [(b - a) / elapsed for a, b in zip(p0, p1, strict=True)],
                   [rss_mb(p.pid) for p in procs])


async def phase(cluster: Cluster, clients: Clients, leaders: dict[str, int],
                topics: list[list[str]], blocks: list[int], scope: str | None, k: int,
                args: argparse.Namespace, log: Path) -> Figures:
    sidecars = [Sidecar(b) for b in blocks[:k]] if scope else []
    try:
        for s in sidecars:
            s.start(cluster, scope or "", log)
        deadline = time.monotonic() + 300
        while not all(s.ready() for s in sidecars):
            if time.monotonic() > deadline:
                raise SystemExit(f"sidecars not ready in 300 s (log: {log})")
            await asyncio.sleep(1)
        if sidecars:
            targets = [{n: s.base + n for n in cluster.brokers} for s in sidecars]
        else:
            targets = [{n: port for n, (_, port) in cluster.brokers.items()}] * k
        if not args.idle:
            clients.start(targets, leaders, topics[:k])
        await asyncio.sleep(args.warmup)
        figures = await measure(cluster, sidecars, args.window)
        await clients.stop()
        return figures
    finally:
        for s in sidecars:
            s.stop()


async def first_produce(cluster: Cluster, block: int, topics: list[str],
                        leaders: dict[str, int], log: Path) -> tuple[float, float]:
    """Median latency (ms) of the first and of the second produce to topics one watched
    sidecar has never seen."""
    sidecar = Sidecar(block)
    sidecar.start(cluster, "watched", log)
    try:
        while not sidecar.ready():
            await asyncio.sleep(0.5)
        first: list[float] = []
        second: list[float] = []
        batch = make_batch(1)
        for i, topic in enumerate(topics):
            reader, writer = await asyncio.open_connection("127.0.0.1",
                                                           block + leaders[topic])
            for n, into in enumerate((first, second)):
                frame = kp_request(PRODUCE_VERSION, [(topic, [(0, batch)])], acks=-1,
                                   correlation_id=2 * i + n)
                began = time.perf_counter()
                writer.write(frame)
                head = await reader.readexactly(4)
                await reader.readexactly(struct.unpack(">i", head)[0])
                into.append((time.perf_counter() - began) * 1000)
            writer.close()
        return statistics.median(first), statistics.median(second)
    finally:
        sidecar.stop()


def probe(cluster: Cluster, requests: dict[str, object], n: int) -> dict[str, float]:
    """Broker CPU (µs) per request of each kind, on one broker: ``n`` requests sent
    back to back on one connection, less that broker's idle CPU over as long."""
    node = min(cluster.brokers)
    pid, port = cluster.brokers[node]
    out: dict[str, float] = {}
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        for name, request in requests.items():
            request.with_header(correlation_id=1, client_id="fleet")  # type: ignore[attr-defined]
            frame = bytes(request.encode(header=True, framed=True))  # type: ignore[attr-defined]
            size = 0
            idle0, t0 = cpu_seconds(pid), time.monotonic()
            time.sleep(3)
            idle = (cpu_seconds(pid) - idle0) / (time.monotonic() - t0)
            c0, t0 = cpu_seconds(pid), time.monotonic()
            for _ in range(n):
                s.sendall(frame)
                head = _recv(s, 4)
                size = 4 + len(_recv(s, struct.unpack(">i", head)[0]))
            busy = cpu_seconds(pid) - c0
            elapsed = time.monotonic() - t0
            out[name] = 1e6 * max(0.0, busy - idle * elapsed) / n
            print(f"#   {name}: {out[name]:,.0f} µs of broker CPU and {size:,} bytes "
                  f"answered per request (n={n}, {elapsed:.1f} s)", flush=True)
    return out


def request_kinds(watched: list[str]) -> dict[str, object]:
    from kafka.protocol.admin import DescribeConfigsRequest

    named = [MetadataRequest.MetadataRequestTopic(topic_id=None, name=t) for t in watched]
    res = DescribeConfigsRequest.DescribeConfigsResource
    return {
        f"Metadata for {len(watched)} watched topics": MetadataRequest(
            version=12, topics=named, allow_auto_topic_creation=False),
        "Metadata for every topic": MetadataRequest(
            version=12, topics=None, allow_auto_topic_creation=False),
        f"DescribeConfigs min.insync.replicas of {len(watched)} topics":
            DescribeConfigsRequest(version=4, resources=[
                res(resource_type=2, resource_name=t,
                    configuration_keys=["min.insync.replicas"]) for t in watched],
                include_synonyms=False, include_documentation=False),
    }


def report(size: int, scope: str, k: int, runs: list[Figures], none_cpu: float) -> None:
    broker = statistics.mean(f.broker_cpu_s for f in runs) - none_cpu
    own: dict[str, float] = {}
    for f in runs:
        for api, value in f.own.items():
            own[api] = own.get(api, 0.0) + value / len(runs)
    cpu = statistics.mean(statistics.mean(f.proxy_cpu) for f in runs)
    rss = statistics.mean(statistics.mean(f.proxy_rss) for f in runs)
    print(f"| {size:,} | {scope} | {k} | {100 * broker / k:.3f} | "
          f"{own.get('Metadata', 0.0) / k:,.0f} | {own.get('DescribeConfigs', 0.0) / k:,.0f} | "
          f"{100 * cpu:.2f} | {rss:.1f} |", flush=True)


async def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="rg-fleet-"))
    log = work / "sidecars.log"
    cluster = Cluster(work / "cluster")
    cluster.start()
    try:
        k = args.proxies
        kc = min(args.cluster_proxies, k)
        client_topics = [[f"fleet-{i}-a", f"fleet-{i}-b"] for i in range(k)]
        flat = [t for pair in client_topics for t in pair]
        create_topics(cluster, flat, 3)
        leaders = cluster.leaders(flat)
        blocks = free_blocks(k + 1)
        clients = Clients()
        made = 0
        print("| partitions | view_scope | sidecars | broker CPU per sidecar (% core) | "
              "Metadata B/s per sidecar | DescribeConfigs B/s per sidecar | "
              "sidecar CPU (% core) | sidecar RSS (MB) |")
        print("|---|---|---|---|---|---|---|---|", flush=True)
        for size in args.sizes:
            wanted = max(0, (size - 3 * len(flat)) // PARTITIONS)
            began = time.monotonic()
            create_topics(cluster, [f"bulk-{i}" for i in range(made, wanted)], PARTITIONS,
                          args.bulk_rf)
            made = max(made, wanted)
            partitions = 3 * len(flat) + PARTITIONS * made
            print(f"# {partitions:,} partitions ({made} topics of {PARTITIONS}, RF "
                  f"{args.bulk_rf}, + "
                  f"{len(flat)} client topics of 3), created in "
                  f"{time.monotonic() - began:.0f} s", flush=True)
            await asyncio.sleep(args.warmup)
            if args.probe:
                probe(cluster, request_kinds(client_topics[0]), args.probe)
            runs: dict[str, list[Figures]] = {"none": [], "watched": [], "cluster": []}
            order = [("none", k), ("watched", k), ("none", k), ("cluster", kc)]
            if not kc:
                order = order[:2]
            for _ in range(args.rounds):
                for scope, count in order:
                    figures = await phase(cluster, clients, leaders, client_topics, blocks,
                                          None if scope == "none" else scope, count, args, log)
                    runs[scope].append(figures)
                    print(f"#   {scope:<8} K={count:<3} brokers "
                          f"{100 * figures.broker_cpu_s:6.2f} % core", flush=True)
            none_cpu = statistics.mean(f.broker_cpu_s for f in runs["none"])
            report(partitions, "watched", k, runs["watched"], none_cpu)
            if kc:
                report(partitions, "cluster", kc, runs["cluster"], none_cpu)
            unseen = [f"bulk-{i}" for i in range(min(made, args.first_produces))]
            if unseen:
                first, second = await first_produce(cluster, blocks[k], unseen,
                                                    cluster.leaders(unseen), log)
                print(f"# first produce to a topic the sidecar never saw: {first:.1f} ms "
                      f"(median of {len(unseen)}), second: {second:.1f} ms: the lookup adds "
                      f"{first - second:.1f} ms", flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proxies", type=int, default=40, help="watched sidecars (K)")
    parser.add_argument("--cluster-proxies", type=int, default=8,
                        help="sidecars in the view_scope cluster phases")
    parser.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")],
                        default=[3000, 10000], help="cluster sizes in partitions")
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--first-produces", type=int, default=9)
    parser.add_argument("--probe", type=int, default=0, metavar="N",
                        help="also measure broker CPU per request, N of each kind")
    parser.add_argument("--idle", action="store_true", help="no client traffic")
    parser.add_argument("--bulk-rf", type=int, default=3,
                        help="replication factor of the filler topics (the suite's brokers "
                        "have 320 MB heaps: 10,000 partitions at RF 3 exhaust them)")
    parser.add_argument("--no-config-topic", action="store_true",
                        help="sidecars without the config topic (--config-topic '')")
    args = parser.parse_args()
    if args.no_config_topic:
        SERVE_EXTRA.extend(["--config-topic", ""])
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
