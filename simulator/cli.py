"""Command line for the multi-rack cluster simulator (a TEST DOUBLE, not Kafka).

Invariant: `main` parses arguments, runs one SimulatedCluster on a fresh
event loop until SIGINT/SIGTERM, stops it, and returns an exit status; it
never exits the interpreter itself. Example:

    python -m simulator.cli --brokers 6 --racks rack-a,rack-b,rack-c \
        --port-base 19092 --control-port 18080 --topic orders:6:3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys

from simulator.cluster import start_cluster
from simulator.config import SimulatorConfig, TopicSpec, racked_brokers
from simulator.state import StateError

log = logging.getLogger("simulator")


def _topic(text: str) -> TopicSpec:
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not parts[0]:
        raise argparse.ArgumentTypeError(f"expected NAME[:PARTITIONS[:RF]], got {text!r}")
    try:
        numbers = [int(p) for p in parts[1:]]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad numbers in {text!r}") from None
    partitions = numbers[0] if numbers else 3
    rf = numbers[1] if len(numbers) > 1 else 3
    return TopicSpec(parts[0], partitions, rf)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rackguard simulate",
        description="Run a multi-rack Kafka cluster simulator (a test double, not Kafka).",
    )
    p.add_argument("--brokers", type=int, default=6, help="number of brokers (node ids 1..N)")
    p.add_argument("--racks", default="rack-a,rack-b,rack-c",
                   help="comma-separated racks, assigned round-robin; empty for no racks")
    p.add_argument("--port-base", type=int, default=19092,
                   help="broker N listens on port-base + N - 1 (0: OS-chosen ports)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--advertised-host", default=None)
    p.add_argument("--control-port", type=int, default=None,
                   help="HTTP control endpoint port (GET /state, POST /racks/R/kill ...)")
    p.add_argument("--topic", action="append", type=_topic, default=[],
                   metavar="NAME:PARTITIONS:RF", help="topic to create at start (repeatable)")
    p.add_argument("--min-insync-replicas", type=int, default=2)
    p.add_argument("--no-auto-create", action="store_true", help="disable topic auto-creation")
    p.add_argument("--log-level", default="INFO")
    return p


def config_from_args(args: argparse.Namespace) -> SimulatorConfig:
    racks = [r for r in args.racks.split(",") if r] or None
    return SimulatorConfig(
        brokers=racked_brokers(args.brokers, racks, port_base=args.port_base),
        topics=list(args.topic),
        host=args.host,
        advertised_host=args.advertised_host,
        default_min_insync_replicas=args.min_insync_replicas,
        auto_create_topics=not args.no_auto_create,
        control_port=args.control_port,
    )


async def _run(config: SimulatorConfig) -> None:
    cluster = await start_cluster(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        summary = {
            "bootstrap_servers": cluster.bootstrap_servers,
            "control": None if cluster.control is None
            else f"http://{config.host}:{cluster.control.port}",
            "brokers": {b.node_id: b.rack for b in config.brokers},
        }
        print(json.dumps(summary), flush=True)
        await stop.wait()
    finally:
        await cluster.stop()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = config_from_args(args)
        asyncio.run(_run(config))
    except (ValueError, StateError, OSError) as exc:
        print(f"simulator: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
