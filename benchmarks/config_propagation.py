"""How long a min.insync.racks change made through one rackguard takes to be in force on
another: two proxies (in this process) in front of the simulator, changes sent as
IncrementalAlterConfigs through the first, the time until the second's rule has the
value measured per change (the first answers once the config topic acknowledged it).

    .venv/bin/python benchmarks/config_propagation.py [--changes 100]

Prints p50, p99 and the maximum, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import struct
import time

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from proxy.app import Rackguard
from proxy.settings import load_settings
from simulator.cluster import start_cluster
from simulator.config import SimulatorConfig, TopicSpec, racked_brokers

TOPIC = "orders"


def free_base(size: int = 40) -> int:
    for base in range(21000, 32000, size + 3):
        try:
            for port in (base, base + size):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free ports")


def change(value: int, corr: int) -> bytes:
    res = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(version=1, validate_only=False, resources=[
        res(resource_type=2, resource_name=TOPIC, configs=[res.AlterableConfig(
            name="min.insync.racks", config_operation=0, value=str(value))])])
    request.with_header(correlation_id=corr, client_id="bench")
    return bytes(request.encode(header=True, framed=True))


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return struct.pack(">i", size) + await reader.readexactly(size)


async def run(changes: int) -> list[float]:
    base = free_base()
    cluster = await start_cluster(SimulatorConfig(
        brokers=racked_brokers(6, ["rack-a", "rack-b", "rack-c"], port_base=base),
        topics=[TopicSpec(TOPIC, 3, 3)]))
    apps = []
    for i in (1, 2):
        settings = load_settings({"upstream": cluster.bootstrap_servers,
                                  "bootstrap_port": base + 10 * i,
                                  "broker_port_base": base + 10 * i,
                                  "min_insync_racks": 2}, env={})
        app = Rackguard(settings)
        await app.start()
        apps.append(app)
    first, second = apps
    reader, writer = await asyncio.open_connection("127.0.0.1", base + 10)
    delays = []
    try:
        for i in range(changes):
            value = 1 + i % 3
            sent = time.perf_counter()
            writer.write(change(value, i))
            answer = IncrementalAlterConfigsResponse.decode(
                await read_frame(reader), version=1, header=True, framed=True)
            assert answer.responses[0].error_code == 0, answer
            while second.enforcer.settings.rule.required_racks(TOPIC) != value:
                await asyncio.sleep(0.001)
            delays.append(time.perf_counter() - sent)
    finally:
        writer.close()
        for app in apps:
            await app.stop()
        await cluster.stop()
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=100)
    args = parser.parse_args()
    delays = sorted(asyncio.run(run(args.changes)))
    p99 = delays[min(len(delays) - 1, int(round(0.99 * len(delays))) - 1)]
    print(f"{len(delays)} changes through one proxy, in force on the other: "
          f"p50 {statistics.median(delays) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
          f"max {delays[-1] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
