"""The ``rackguard`` command.

Invariant: flags that the user did not give are absent from the overrides
handed to :func:`rackguard.proxy.settings.load_settings`, so the environment and the
config file still apply (CLI over env over file over default).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from rackguard.proxy.ops.logs import configure_logging
from rackguard.proxy.settings import Settings, SettingsError, load_settings


def _version() -> str:
    try:
        return version("rackguard")
    except PackageNotFoundError:  # running from a source tree
        return "0+unknown"


def _flag(kind: Callable[[str], Any], metavar: str, text: str) -> dict[str, Any]:
    return {"type": kind, "metavar": metavar, "help": text}


def _switch(text: str) -> dict[str, Any]:
    return {"action": "store_const", "const": True, "help": text}


def _pairs(metavar: str, text: str) -> dict[str, Any]:
    return {"action": "append", "metavar": metavar, "help": text + " (repeatable)"}


# flag -> (settings field, argparse options). Absent flags stay None.
SERVE_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "--upstream": ("upstream", _flag(
        str, "HOST:PORT[,...]", "bootstrap address(es) of the Kafka cluster")),
    "--listen": ("listen_host", _flag(str, "HOST", "address to listen on (default 127.0.0.1)")),
    "--advertised-host": ("advertised_host", _flag(
        str, "HOST", "host name given to clients in metadata (default: the listen address)")),
    "--bootstrap-port": ("bootstrap_port", _flag(int, "PORT", "bootstrap port (default 9092)")),
    "--broker-port-base": ("broker_port_base", _flag(
        int, "BASE", "broker with node id N is served on port BASE+N (default 9100)")),
    "--min-insync-racks": ("min_insync_racks", _flag(
        int, "N", "racks the ISR of an acks=all produce must span (default 1: off)")),
    "--topic-min-insync-racks": ("topic_min_insync_racks", _pairs(
        "NAME=N", "min.insync.racks for one topic")),
    "--topic-prefix-min-insync-racks": ("topic_prefix_min_insync_racks", _pairs(
        "PREFIX=N", "min.insync.racks for topics whose name starts with PREFIX")),
    "--error-mode": ("error_mode", _flag(
        str, "MODE", "compat (default: NOT_ENOUGH_REPLICAS + message) or dedicated")),
    "--not-enough-racks-code": ("not_enough_racks_code", _flag(
        int, "CODE", "error code for NOT_ENOUGH_RACKS in dedicated mode (default 1290)")),
    "--observe": ("observe", _switch("decide and record, but forward everything")),
    "--max-metadata-age-ms": ("max_metadata_age_ms", _flag(
        int, "MS", "metadata older than this fails acks=all closed (default 10000)")),
    "--fail-open": ("fail_open", _switch("forward instead of rejecting on stale metadata")),
    "--broker-rack": ("broker_racks", _pairs("ID=RACK", "rack of a broker that reports none")),
    "--broker-racks-override": ("broker_racks_override", _switch(
        "let --broker-rack replace racks the brokers report")),
    "--metrics-port": ("metrics_port", _flag(
        int, "PORT", "serve /metrics, /healthz and /readyz on this port (default: off)")),
    "--metrics-partition-series": ("metrics_partition_series", _flag(
        str, "MODE", "per-partition rack series: all, at_or_under (default) or none")),
    "--metadata-refresh-interval-ms": ("metadata_refresh_interval_ms", _flag(
        int, "MS", "interval of the proxy's own metadata poll (default 2000)")),
    "--max-frame-size": ("max_frame_size", _flag(int, "BYTES", "largest accepted frame")),
    "--admin-connect-timeout-ms": ("admin_connect_timeout_ms", _flag(
        int, "MS", "connect timeout of the proxy's own requests (default 1000)")),
    "--admin-request-timeout-ms": ("admin_request_timeout_ms", _flag(
        int, "MS", "answer timeout of the proxy's own requests (default 2000)")),
    "--metadata-hedge-delay-ms": ("metadata_hedge_delay_ms", _flag(
        int, "MS", "ask a second broker when a poll is slower than this (default 500)")),
    "--shutdown-timeout-ms": ("shutdown_timeout_ms", _flag(
        int, "MS", "time in-flight requests get to finish on SIGTERM/SIGINT")),
    "--ledger-dir": ("ledger_dir", _flag(
        str, "PATH", "write the decision ledger and cluster snapshots here (default: off)")),
    "--ledger-rotate-bytes": ("ledger_rotate_bytes", _flag(
        int, "BYTES", "start a new ledger file at this size (default 64 MiB)")),
    "--ledger-rotate-seconds": ("ledger_rotate_seconds", _flag(
        int, "S", "start a new ledger file at this age (default 3600)")),
    "--ledger-queue-size": ("ledger_queue_size", _flag(
        int, "ROWS", "ledger rows queued for the writer before rows are dropped (100000)")),
    "--ledger-snapshot-interval-ms": ("ledger_snapshot_interval_ms", _flag(
        int, "MS", "interval of cluster snapshots in the ledger directory (default 30000)")),
    "--instance-id": ("instance_id", _flag(
        str, "NAME", "this proxy's name in ledger rows (default HOSTNAME-BOOTSTRAP_PORT)")),
    "--log-level": ("log_level", _flag(str, "LEVEL", "DEBUG, INFO, WARNING or ERROR")),
    "--log-format": ("log_format", _flag(str, "FORMAT", "text (default) or json")),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rackguard",
        description="A Kafka-protocol sidecar proxy that acknowledges acks=all produce "
        "requests only while the partition's in-sync replicas span enough racks "
        "(KIP-1290 min.insync.racks).",
    )
    parser.add_argument("--version", action="version", version=f"rackguard {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the proxy in front of a Kafka cluster",
        description="Run the proxy. Every setting can also come from the environment "
        "(RACKGUARD_<NAME>) or a TOML file (--config); flags win over both.",
    )
    serve.add_argument("--config", metavar="FILE", help="TOML file with settings")
    for flag, (field, options) in SERVE_FLAGS.items():
        serve.add_argument(flag, dest=field, default=None, **options)
    commands.add_parser(
        "simulate",
        help="run the multi-rack cluster simulator (a test double; see its --help)",
        add_help=False,
    )
    commands.add_parser(
        "report",
        help="reports over the decision ledger: durability, whatif, placement, audit-loss "
        "(PySpark; see its --help)",
        add_help=False,
    )
    commands.add_parser(
        "audit",
        help="find acknowledged records missing from the cluster: dump the topics and run "
        "the loss audit in one command (PySpark; see its --help)",
        add_help=False,
    )
    commands.add_parser(
        "dump-offsets",
        help="write every offset of a topic to Parquet/JSON Lines for report audit-loss",
        add_help=False,
    )
    commands.add_parser(
        "placement",
        help="audit replica placement against min.insync.racks; plan reassignments "
        "(see its --help)",
        add_help=False,
    )
    commands.add_parser(
        "bench",
        help="measure the proxy against a direct connection and Tansu's proxy (see its --help)",
        add_help=False,
    )
    demo = commands.add_parser(
        "demo",
        help="see the rack rule work: simulator + proxy + producer, racks down and back",
    )
    demo.add_argument("--port-base", type=int, default=19092, metavar="PORT",
                      help="ports PORT..PORT+200 on 127.0.0.1 are used (default 19092)")
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides = {field: getattr(args, field, None) for field, _ in SERVE_FLAGS.values()}
    return load_settings(overrides, config_file=args.config)


def run_loop(main: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


async def _serve(settings: Settings, load: Callable[[], Settings]) -> int:
    from rackguard.proxy.app import Rackguard, StartupError

    app = Rackguard(settings)
    try:
        await app.run_until_signalled(load)
    except StartupError as exc:
        print(f"rackguard: refusing to start: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rackguard: cannot listen: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["simulate"]:
        from rackguard.simulator.cli import main as simulate

        return simulate(argv[1:])
    if argv[:1] == ["bench"]:  # a tool: loaded only when it runs, never by serve
        from rackguard.proxy.tools.bench import command as bench

        return bench(argv[1:])
    if argv[:1] == ["placement"]:  # loaded only when it runs, never by serve
        from rackguard.proxy.placement.command import main as placement

        return placement(argv[1:])
    if argv[:1] in (["report"], ["audit"], ["dump-offsets"]):
        from rackguard.proxy.tools import report_cli

        entry = {"report": report_cli.report, "audit": report_cli.audit,
                 "dump-offsets": report_cli.dump_offsets}[argv[0]]
        return entry(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "serve":
        try:
            settings = settings_from_args(args)
        except SettingsError as exc:
            print(f"rackguard: {exc}", file=sys.stderr)
            return 2
        if not settings.upstream:
            print("rackguard: invalid setting upstream: required (--upstream HOST:PORT)",
                  file=sys.stderr)
            return 2
        configure_logging(settings.log_level, settings.log_format)
        return run_loop(_serve(settings, lambda: settings_from_args(args)))
    if args.command == "demo":
        from rackguard.proxy.tools.demo import DemoPorts, run_demo

        base = args.port_base
        ports = DemoPorts(base, base + 100, base + 108, base + 98)
        try:
            return run_loop(run_demo(ports))
        except OSError as exc:
            print(f"rackguard demo: {exc} (try --port-base with free ports)", file=sys.stderr)
            return 1
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
