"""The ``rackguard`` command.

Invariant: flags that the user did not give are absent from the overrides
handed to :func:`config.settings.load_settings`, so the environment and the
config file still apply (CLI over env over file over default).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from config.settings import Settings, SettingsError, load_settings
from proxy.logs import configure_logging


def _version() -> str:
    try:
        return version("rackguard")
    except PackageNotFoundError:  # running from a source tree
        return "0+unknown"


# flag, settings field, type, help
SERVE_FLAGS: list[tuple[str, str, Callable[[str], Any], str]] = [
    ("--upstream", "upstream", str,
     "bootstrap address(es) of the Kafka cluster: HOST:PORT[,HOST:PORT...]"),
    ("--listen", "listen_host", str, "address to listen on (default 127.0.0.1)"),
    ("--advertised-host", "advertised_host", str,
     "host name given to clients in metadata (default: the listen address)"),
    ("--bootstrap-port", "bootstrap_port", int, "bootstrap port (default 9092)"),
    ("--broker-port-base", "broker_port_base", int,
     "broker N is served on port BASE+N (default 9100)"),
    ("--max-frame-size", "max_frame_size", int, "largest accepted frame in bytes"),
    ("--metadata-refresh-interval-ms", "metadata_refresh_interval_ms", int,
     "interval of the proxy's own metadata poll"),
    ("--shutdown-timeout-ms", "shutdown_timeout_ms", int,
     "time in-flight requests get to finish on SIGTERM/SIGINT"),
    ("--log-level", "log_level", str, "DEBUG, INFO, WARNING or ERROR"),
    ("--log-format", "log_format", str, "text (default) or json"),
]


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
    for flag, field, kind, text in SERVE_FLAGS:
        serve.add_argument(flag, dest=field, type=kind, default=None, help=text,
                           metavar=field.upper())
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides = {field: getattr(args, field, None) for _, field, _, _ in SERVE_FLAGS}
    return load_settings(overrides, config_file=args.config)


def run_loop(main: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


async def _serve(settings: Settings) -> int:
    from proxy.server import ProxyServer

    server = ProxyServer(settings)
    try:
        await server.run_until_signalled()
    except OSError as exc:
        print(f"rackguard: cannot listen: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
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
        return run_loop(_serve(settings))
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
