"""What wakes an idle sidecar, how often, and what it costs: no client, nothing watched.

    .venv/bin/python -m benchmarks.idle_wakeups                      # the simulator
    .venv/bin/python -m benchmarks.idle_wakeups --upstream 127.0.0.1:9092,...  # a cluster
    flock /tmp/rackguard-kafka.lock .venv/bin/python -m benchmarks.idle_wakeups --real
    .venv/bin/python -m benchmarks.idle_wakeups --no-config-topic --window 60

Two measurements over ``--window`` seconds after ``--warmup``:

1. ``rackguard serve`` as its own process (``view_scope = "watched"``, metrics on, the
   config topic unless ``--no-config-topic``, the fleet bench's flags): its CPU from
   /proc (utime + stime) in % of a core, and its RSS. This is the figure.
2. The same proxy in this process, instrumented: every callback the event loop runs,
   grouped by what it belongs to (a task's outermost and innermost coroutine, or the
   callback's name), per second; the loop's wake-ups (selector calls that returned) and
   how many of them had I/O; the Kafka requests the proxy sent on its own (the poller's
   control connections, the config topic reader's, and aiokafka's (the config topic's
   writer, after a change), by API); each thread's CPU. The instrumentation
   costs CPU itself: read the counts from it, the CPU from 1.

``--real`` starts the suite's real cluster (six Kafka brokers in three racks, as
``benchmarks/fleet.py`` does) and stops it at the end. Without either, a simulated
6-broker cluster (three racks) runs in a subprocess (its CPU is not counted). The
simulator is a test double: it shows the proxy's own wake-ups; the figures that count
are in front of real Kafka (docs/performance.md, "Fleet cost").
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.fleet import Cluster, cpu_seconds, rss_mb  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RACKGUARD = str(Path(sys.executable).parent / "rackguard")
TICK = os.sysconf("SC_CLK_TCK")


def free_base(span: int) -> int:
    for base in range(23000, 32700 - span, span + 7):
        try:
            for port in range(base, base + span):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise SystemExit("no free ports below 32768")


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"nothing listens on {port} after {timeout:.0f} s") from None
            time.sleep(0.2)


def serve_args(upstream: str, base: int, config_topic: bool) -> list[str]:
    return ["--upstream", upstream, "--listen", "127.0.0.1", "--advertised-host",
            "127.0.0.1", "--bootstrap-port", str(base), "--broker-port-base", str(base),
            "--metrics-port", str(base + 9), "--min-insync-racks", "2",
            "--view-scope", "watched", "--log-level", "WARNING",
            *([] if config_topic else ["--config-topic", ""])]


def wait_ready(port: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"the sidecar was not ready within {timeout:.0f} s")
        time.sleep(0.5)


# ----- 1. the process's own CPU
def process_cost(upstream: str, config_topic: bool, warmup: float,
                 window: float, log: Path) -> tuple[float, float]:
    base = free_base(10)
    proc = subprocess.Popen([RACKGUARD, "serve", *serve_args(upstream, base, config_topic)],
                            stdout=subprocess.DEVNULL, stderr=log.open("ab"), cwd=ROOT)
    try:
        wait_ready(base + 9)
        time.sleep(warmup)
        c0, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(window)
        used = (cpu_seconds(proc.pid) - c0) / (time.monotonic() - t0)
        return used, rss_mb(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ----- 2. the breakdown, in this process
def _innermost(coro: Any) -> str:
    name = getattr(coro, "__qualname__", type(coro).__name__)
    seen = 0
    while seen < 50:
        seen += 1
        awaited = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        if awaited is None or not hasattr(awaited, "__qualname__"):
            break
        coro = awaited
        name = coro.__qualname__
    return name


def _label(handle: asyncio.Handle) -> str:
    callback = handle._callback  # type: ignore[attr-defined]
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        outer = getattr(coro, "__qualname__", "?")
        inner = _innermost(coro)
        return f"task {outer}" + (f" > {inner}" if inner != outer else "")
    name = getattr(callback, "__qualname__", None) or repr(callback)
    if owner is not None and hasattr(owner, "__class__") and "." not in name:
        name = f"{type(owner).__qualname__}.{name}"
    return f"callback {name}"


class Counts:
    def __init__(self) -> None:
        self.callbacks: collections.Counter[str] = collections.Counter()
        self.requests: collections.Counter[str] = collections.Counter()
        self.selects = 0
        self.selects_with_io = 0
        self.on = False


def instrument(counts: Counts) -> None:
    """Count every event-loop callback and every own Kafka request from now on."""
    original_run = asyncio.events.Handle._run

    def run(self: asyncio.Handle) -> None:
        if counts.on:
            counts.callbacks[_label(self)] += 1
        original_run(self)

    asyncio.events.Handle._run = run  # type: ignore[method-assign]

    from aiokafka.conn import AIOKafkaConnection

    original_send = AIOKafkaConnection.send

    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if counts.on:
            counts.requests[f"aiokafka {type(request).__name__}"] += 1
        return original_send(self, request, *args, **kwargs)

    AIOKafkaConnection.send = send

    from protocol.apis import api_name
    from proxy.cluster.control_conn import ControlConn

    original_exchange = ControlConn._exchange

    async def exchange(self: Any, frame: bytes, corr: int, timeout: float) -> Any:
        if counts.on:
            counts.requests[f"control {api_name(int.from_bytes(frame[4:6], 'big'))}"] += 1
        return await original_exchange(self, frame, corr, timeout)

    ControlConn._exchange = exchange  # type: ignore[method-assign]


def watch_selector(loop: asyncio.AbstractEventLoop, counts: Counts) -> None:
    selector = loop._selector  # type: ignore[attr-defined]
    original = selector.select

    def select(timeout: float | None = None) -> Any:
        events = original(timeout)
        if counts.on:
            counts.selects += 1
            counts.selects_with_io += bool(events)
        return events

    selector.select = select


def thread_cpu() -> dict[str, tuple[float, int]]:
    """CPU seconds and context switches (its wake-ups) of each of this process's threads,
    by Python thread name."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, tuple[float, int]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/status") as f:
                switches = sum(int(line.split()[1]) for line in f
                               if line.endswith("ctxt_switches\n") or "ctxt_switches:" in line)
        except OSError:
            continue
        name = names.get(int(tid), f"native thread {tid}")
        cpu, n = out.get(name, (0.0, 0))
        out[name] = (cpu + (int(fields[11]) + int(fields[12])) / TICK, n + switches)
    return out


async def breakdown(upstream: str, config_topic: bool, warmup: float,
                    window: float) -> None:
    from proxy.app import Rackguard
    from proxy.settings import load_settings

    counts = Counts()
    instrument(counts)
    watch_selector(asyncio.get_running_loop(), counts)
    base = free_base(10)
    values: dict[str, Any] = {
        "upstream": upstream, "listen_host": "127.0.0.1", "advertised_host": "127.0.0.1",
        "bootstrap_port": base, "broker_port_base": base, "metrics_port": base + 9,
        "min_insync_racks": 2, "view_scope": "watched", "log_level": "WARNING"}
    if not config_topic:
        values["config_topic"] = ""
    app = Rackguard(load_settings(values, env={}))
    await app.start()
    try:
        deadline = time.monotonic() + 120
        while not app.readiness().ok:
            if time.monotonic() > deadline:
                raise SystemExit(f"not ready: {app.readiness().reason}")
            await asyncio.sleep(0.5)
        await asyncio.sleep(warmup)
        threads0, t0 = thread_cpu(), time.monotonic()
        counts.on = True
        await asyncio.sleep(window)
        counts.on = False
        elapsed = time.monotonic() - t0
        threads1 = thread_cpu()
    finally:
        await app.stop()
    print(f"# in-process, {elapsed:.0f} s: the loop woke {counts.selects / elapsed:.1f} "
          f"times a second ({counts.selects_with_io / elapsed:.1f} with I/O)")
    print("| what ran on the event loop | per second |")
    print("|---|---|")
    for label, n in counts.callbacks.most_common(25):
        print(f"| {label} | {n / elapsed:.2f} |")
    print(f"| (all callbacks) | {sum(counts.callbacks.values()) / elapsed:.2f} |")
    print("\n| own Kafka requests | per second |")
    print("|---|---|")
    for label, n in counts.requests.most_common():
        print(f"| {label} | {n / elapsed:.2f} |")
    print("\n| thread | CPU (% of a core, instrumented) | context switches per second |")
    print("|---|---|---|")
    for name, (cpu, switches) in sorted(threads1.items()):
        cpu0, switches0 = threads0.get(name, (0.0, 0))
        print(f"| {name} | {100 * (cpu - cpu0) / elapsed:.3f} | "
              f"{(switches - switches0) / elapsed:.1f} |")


def start_simulator(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    base = free_base(8)
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulator.cli", "--brokers", "6", "--racks",
         "rack-a,rack-b,rack-c", "--port-base", str(base), "--topic", "orders:6:3",
         "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=(work / "simulator.log").open("ab"), cwd=ROOT)
    wait_port(base)
    return proc, ",".join(f"127.0.0.1:{base + i}" for i in range(6))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", default=None,
                        help="HOST:PORT,... of a cluster (default: start the simulator)")
    parser.add_argument("--real", action="store_true",
                        help="start the suite's real Kafka cluster (under the flock)")
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--no-config-topic", action="store_true")
    parser.add_argument("--only", choices=("process", "breakdown"), default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rg-idle-"))
    simulator = None
    cluster = None
    upstream = args.upstream
    if args.real:
        cluster = Cluster(work / "cluster")
        cluster.start()
        upstream = cluster.bootstrap
    elif upstream is None:
        simulator, upstream = start_simulator(work)
    config_topic = not args.no_config_topic
    try:
        where = "simulator" if simulator else "real Kafka" if cluster else upstream
        print(f"# upstream {where}, config topic "
              f"{'on' if config_topic else 'off'}, window {args.window:.0f} s")
        if args.only != "breakdown":
            used, rss = process_cost(upstream, config_topic, args.warmup, args.window,
                                     work / "sidecar.log")
            print(f"# rackguard serve, idle: {100 * used:.3f} % of a core, {rss:.1f} MB RSS",
                  flush=True)
        if args.only != "process":
            asyncio.run(breakdown(upstream, config_topic, args.warmup, args.window))
    finally:
        if simulator is not None:
            simulator.terminate()
            simulator.wait(20)
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
