"""``rackguard demo``: the rack rule at work, with no cluster of your own.

It starts the cluster simulator (a test double that speaks the Kafka protocol,
not Kafka), rackguard in front of it with min.insync.racks=2, and a
kafka-python producer, then takes racks down and brings them back, printing
one line per step. Invariant: everything it starts it also stops, on success,
on error and on Ctrl-C; it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from proxy.ops.logs import configure_logging
from proxy.settings import load_settings

TOPIC = "payments"


@dataclass(frozen=True)
class DemoPorts:
    cluster_base: int = 19092  # brokers 1..6 on base..base+5
    proxy_bootstrap: int = 19192
    proxy_broker_base: int = 19200
    metrics: int = 19190


def _send(producer: Any, value: bytes) -> str:
    try:
        meta = producer.send(TOPIC, value, partition=0).get(timeout=15)
    except Exception as exc:  # noqa: BLE001 - the demo prints whatever the client raised
        text = str(exc)
        return f"REJECTED: {type(exc).__name__}: {text.split(': ', 1)[-1]}"
    return f"ok (offset {meta.offset})"


async def run_demo(ports: DemoPorts = DemoPorts(), out: TextIO = sys.stdout) -> int:
    from kafka import KafkaProducer

    from proxy.app import Rackguard
    from simulator.cluster import start_cluster
    from simulator.config import SimulatorConfig, TopicSpec, racked_brokers

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    config = SimulatorConfig(
        brokers=racked_brokers(6, ["rack-a", "rack-b", "rack-c"], port_base=ports.cluster_base),
        topics=[TopicSpec(TOPIC, 3, 5, {"min.insync.replicas": "2"})],
    )
    cluster = await start_cluster(config)
    settings = load_settings({
        "upstream": cluster.bootstrap_servers,
        "bootstrap_port": ports.proxy_bootstrap,
        "broker_port_base": ports.proxy_broker_base,
        "metrics_port": ports.metrics,
        "min_insync_racks": 2,
        "metadata_refresh_interval_ms": 500,
        # the demo prints the ISR before any client has used the topic: the whole view
        "view_scope": "cluster",
        "log_level": "ERROR",
    })
    configure_logging("ERROR", "text", out)
    app = Rackguard(settings)
    producers: list[Any] = []
    try:
        await app.start()
        bootstrap = f"127.0.0.1:{ports.proxy_bootstrap}"
        say("rackguard demo: 6 simulated brokers in rack-a, rack-b, rack-c "
            "(the simulator is a test double, not Kafka)")
        first = cluster.bootstrap_servers.split(",")[0]
        say(f"  proxy {bootstrap} in front of {first} and 5 more; "
            f"metrics http://127.0.0.1:{ports.metrics}/metrics")
        say(f"  topic '{TOPIC}': 5 replicas, min.insync.replicas=2; rackguard "
            "min.insync.racks=2")

        def make(acks: Any) -> Any:
            p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, retries=0,
                              request_timeout_ms=10_000, max_block_ms=15_000)
            producers.append(p)
            return p

        strict, relaxed = await asyncio.gather(asyncio.to_thread(make, "all"),
                                               asyncio.to_thread(make, 1))

        async def isr_line() -> str:
            await app.poller.refresh_now()
            view = app.store.view
            topic = view.topic(TOPIC)
            state = topic.partitions[0] if topic else None
            if state is None:
                return "partition 0 unknown"
            racks = sorted({view.rack_of(n) for n in state.isr})
            return f"ISR {list(state.isr)} spans {', '.join(racks)}"

        async def step(title: str) -> None:
            say(f"{title:<22} {await isr_line()}")
            say(f"{'':<22} acks=all -> {await asyncio.to_thread(_send, strict, b'strict')}")

        await step("1. all racks up")
        await cluster.kill_rack("rack-b")
        await step("2. rack-b down")
        await cluster.kill_rack("rack-c")
        await step("3. rack-c down too")
        say(f"{'':<22} (the broker alone would acknowledge it: 2 in-sync replicas, both "
            "in rack-a)")
        say(f"{'':<22} acks=1   -> {await asyncio.to_thread(_send, relaxed, b'relaxed')}"
            "  (acks=0/1 are never touched)")
        await cluster.restore_rack("rack-b")
        await cluster.restore_rack("rack-c")
        await step("4. racks restored")
        return 0
    finally:
        for p in producers:
            await asyncio.to_thread(p.close, 2)
        await app.stop()
        await cluster.stop()
