"""Memory per client connection: `rackguard serve` holding many idle, then active,
connections (each with its own upstream connection, as always).

    .venv/bin/python -m benchmarks.connections --connections 9000
    .venv/bin/python -m benchmarks.connections --connections 200     # a smoke run

A one-broker simulator is the upstream (its own process), the proxy another process, the
clients this one. The proxy's RSS (VmRSS) is read before the connections, once all are
open and idle (the proxy's /metrics says so), and once each has sent one request and
read its answer. Each process raises its open-file limit to the hard limit; the
proxy needs two descriptors per client connection, so the count is lowered to fit
the hard limit, and the run says so.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.metadata import ApiVersionsRequest  # noqa: E402

PER_CONNECTION_FDS = 2  # the client's socket and its upstream socket
RESERVED_FDS = 300


def _raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def _free_ports(count: int) -> list[int]:
    """``count`` ports below 32768 free now, each with the next one free too."""
    found: list[int] = []
    for port in range(21000, 32000, 7):
        free = True
        for candidate in (port, port + 1):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", candidate))
                except OSError:
                    free = False
        if free:
            found.append(port)
            if len(found) == count:
                return found
    raise RuntimeError("no free ports below 32768")


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _open_gauge(metrics_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("rackguard_connections_open{"))


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"port {port} did not open")


def _api_versions(corr: int) -> bytes:
    request = ApiVersionsRequest(version=0)
    request.with_header(correlation_id=corr, client_id="c")
    return bytes(request.encode(header=True, framed=True))


async def _clients(port: int, n: int, metrics_port: int, proxy_pid: int) -> tuple[int, int]:
    conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for i in range(n):
        conns.append(await asyncio.open_connection("127.0.0.1", port))
        if i % 500 == 499:
            await asyncio.sleep(0.05)  # let the proxy open the upstream ones
    deadline = time.monotonic() + 120
    while _open_gauge(metrics_port) < n and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    await asyncio.sleep(1)
    idle = _rss_kib(proxy_pid)

    async def one(i: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_api_versions(i))
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        await reader.readexactly(size)

    for start in range(0, n, 500):
        await asyncio.gather(*(one(i, r, w) for i, (r, w) in
                               enumerate(conns[start:start + 500], start)))
    await asyncio.sleep(1)
    active = _rss_kib(proxy_pid)
    for _, writer in conns:
        writer.close()
    return idle, active


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=9000)
    args = parser.parse_args(argv)
    hard = _raise_fd_limit()
    fit = (hard - RESERVED_FDS) // PER_CONNECTION_FDS
    n = min(args.connections, fit)
    if n < args.connections:
        print(f"open-file hard limit {hard}: {n} connections fit (asked {args.connections}); "
              "raise it (ulimit -Hn, as root) for more")
    sim_port, bootstrap, base, metrics = _free_ports(4)  # the broker port is base + 1
    python = sys.executable
    sim = subprocess.Popen(
        [python, "-m", "simulator.cli", "--brokers", "1", "--racks", "a",
         "--port-base", str(sim_port), "--log-level", "WARNING"],
        preexec_fn=_raise_fd_limit, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proxy = None
    try:
        _wait_port(sim_port, 30)
        proxy = subprocess.Popen(
            [python, "-m", "proxy.cli", "serve", "--upstream",
             f"127.0.0.1:{sim_port}", "--bootstrap-port", str(bootstrap),
             "--broker-port-base", str(base), "--metrics-port", str(metrics),
             "--max-connections", "0", "--log-level", "WARNING"],
            preexec_fn=_raise_fd_limit, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(base + 1, 30)
        time.sleep(1)
        before = _rss_kib(proxy.pid)
        idle, active = asyncio.run(_clients(base + 1, n, metrics, proxy.pid))
    finally:
        for p in (proxy, sim):
            if p is not None:
                p.terminate()
                p.wait(30)
    print(f"{n} connections: proxy RSS {before / 1024:.1f} MiB before, "
          f"{idle / 1024:.1f} MiB idle, {active / 1024:.1f} MiB after one request each")
    print(f"per idle connection (with its upstream): {(idle - before) / n:.1f} KiB; "
          f"per active connection: {(active - before) / n:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
