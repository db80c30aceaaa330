"""The ``rackguard`` command.

Invariant: flags that the user did not give are absent from the overrides
handed to :func:`proxy.settings.load_settings`, so the environment and the
config file still apply (CLI over env over file over default).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from proxy.ops.logs import configure_logging
from proxy.settings import Settings, SettingsError, load_settings


def _version() -> str:
    try:
        return version("rackguard")
    except PackageNotFoundError:  # running from a source tree
        return "0+unknown"


# Flags whose names predate the rule "--" + the setting's name in kebab case.
FLAG_NAMES = {"listen_host": "--listen", "broker_racks": "--broker-rack"}
# Earlier names of renamed settings' flags, still accepted (not shown in --help).
FLAG_ALIASES = {"--shutdown-timeout-ms": "drain_timeout_ms"}


def _metavar(name: str, annotation: Any) -> str:
    if get_origin(annotation) is Literal:
        return "|".join(str(choice) for choice in get_args(annotation))
    if name.endswith("_ms"):
        return "MS"
    if name.endswith("_port") or name.endswith("_ports"):
        return "PORT"
    if annotation is int:
        return "N"
    return name.upper()


def serve_flags() -> dict[str, tuple[str, dict[str, Any]]]:
    """flag -> (settings field, argparse options), one per setting of the model.

    The help text is the setting's description; a setting marked ``flag=False`` in its
    ``json_schema_extra`` (a secret: a flag would show in ``ps``) has none. Absent flags
    stay None, so the environment, the TOML file and the defaults apply.
    """
    flags: dict[str, tuple[str, dict[str, Any]]] = {}
    for name, field in Settings.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if extra.get("flag") is False:
            continue
        flag = FLAG_NAMES.get(name, "--" + name.replace("_", "-"))
        text = field.description or name
        annotation = field.annotation
        if annotation is bool:
            options: dict[str, Any] = {"action": "store_const", "const": True, "help": text}
        elif "dict[" in str(annotation):
            options = {"action": "append", "metavar": "KEY=VALUE", "help": text + " (repeatable)"}
        else:
            kind = int if annotation is int or annotation == (int | None) else str
            options = {"type": kind, "help": text,
                       "metavar": extra.get("metavar") or _metavar(name, annotation)}
        flags[flag] = (name, options)
    for alias, name in FLAG_ALIASES.items():
        flags[alias] = (name, {**flags[FLAG_NAMES.get(name, "--" + name.replace("_", "-"))][1],
                               "help": argparse.SUPPRESS})
    return flags


SERVE_FLAGS = serve_flags()


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
        # no abbreviations: "--sasl-password SECRET" must not pass as --sasl-password-file
        allow_abbrev=False,
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
        "node-zone",
        help="print the zone label of the Kubernetes node this pod runs on (for "
        "client_rack_command; see its --help)",
        add_help=False,
    )
    commands.add_parser(
        "streams",
        help="audit Kafka Streams' standby task spread over client tags (KIP-708; see its "
        "--help)",
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


async def _serve(settings: Settings, load: Callable[[], Settings],
                 config_file: str | None = None) -> int:
    from proxy.app import Rackguard, StartupError
    from proxy.security.tls import TlsError

    try:
        app = Rackguard(settings)
    except TlsError as exc:
        print(f"rackguard: refusing to start: TLS: {exc}", file=sys.stderr)
        return 2
    try:
        await app.run_until_signalled(load, Path(config_file) if config_file else None)
    except StartupError as exc:
        print(f"rackguard: refusing to start: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rackguard: cannot listen: {exc}", file=sys.stderr)
        return 1
    return 0


# The tools the production image leaves out (docker/Dockerfile.dockerignore): the simulator
# (a test double) with the demo built on it, and the PySpark reports.
NOT_IN_IMAGE = ("simulator", "pipeline", "proxy.tools.demo")
SOURCE_INSTALL = {
    "demo": "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/rackguard demo",
    "simulate": "python3 -m venv .venv && .venv/bin/pip install -e . "
                "&& .venv/bin/rackguard simulate",
}


def _not_installed(command: str, exc: ModuleNotFoundError) -> int:
    """One clear line where a tool the production image leaves out is asked for there."""
    missing = exc.name or ""
    if not any(missing == name or missing.startswith(name + ".") for name in NOT_IN_IMAGE):
        raise exc
    how = SOURCE_INSTALL.get(
        command, "python3 -m venv .venv && .venv/bin/pip install -e '.[pipeline]'")
    print(f"rackguard {command}: not installed here ({missing} is not part of this install; "
          f"the production image holds the proxy alone). From a source checkout: {how}",
          file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        return _main(argv)
    except ModuleNotFoundError as exc:
        return _not_installed(argv[0] if argv else "", exc)


def _main(argv: list[str]) -> int:
    if argv[:1] == ["simulate"]:
        from simulator.cli import main as simulate

        return simulate(argv[1:])
    if argv[:1] == ["placement"]:  # loaded only when it runs, never by serve
        from proxy.placement.command import main as placement

        return placement(argv[1:])
    if argv[:1] == ["node-zone"]:  # client_rack_command in a pod: loaded only when it runs
        from proxy.locality.node_zone import main as node_zone

        return node_zone(argv[1:])
    if argv[:1] == ["streams"]:  # loaded only when it runs, never by serve
        from proxy.streams.command import main as streams

        return streams(argv[1:])
    if argv[:1] in (["report"], ["audit"], ["dump-offsets"]):
        from proxy.tools import report_cli

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
        return run_loop(_serve(settings, lambda: settings_from_args(args), args.config))
    if args.command == "demo":
        from proxy.tools.demo import DemoPorts, run_demo

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
