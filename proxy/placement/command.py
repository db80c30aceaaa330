"""``rackguard placement audit|plan``: the placement audit and planner from the command line.

Invariant: loaded only when the command runs (``rackguard serve`` never
imports it); reads a live cluster once (``--bootstrap``, with the values set through the Admin
API in the config topic, unless ``--ignore-config-topic``) or files and flags
(offline), never writes to the cluster. Exit codes: 0 done; 1 the plan left
partitions it cannot fix by moves; 2 bad input or an impossible request (the
message says which).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from proxy.admin.rules import effective_rule
from proxy.enforce.dimensions import DimensionError, RackDimensions, parse_minimums
from proxy.enforce.policy import RackRule
from proxy.placement.audit import Spread, audit
from proxy.placement.kip36 import PlacementError, assign
from proxy.placement.plan import plan_fix, reassignment_file
from proxy.placement.render import audit_text, plan_text
from proxy.placement.sources import (
    ClusterInputs,
    SourceError,
    parse_brokers,
    parse_topic_numbers,
    read_assignment,
    read_snapshot,
)

if TYPE_CHECKING:
    from proxy.placement.config_topic import StoredConfigs
    from proxy.settings import Settings

DEFAULT_MIN_INSYNC_RACKS = 2
DEFAULT_CONFIG_TOPIC = "__rackguard_configs"


def _sources(p: argparse.ArgumentParser) -> None:
    where = p.add_argument_group("where the cluster is read from (one of)")
    where.add_argument("--bootstrap", metavar="HOST:PORT",
                       help="a live cluster (a broker, or the rackguard proxy)")
    where.add_argument("--snapshot", metavar="FILE", type=Path,
                       help="a ledger snapshot file (snapshots-*.parquet): its latest state")
    where.add_argument("--brokers", metavar="ID=RACK[,ID=RACK...]",
                       help="offline: the brokers and their racks (ID= for no rack)")
    where.add_argument("--assignment", metavar="FILE", type=Path,
                       help="offline, with --brokers: the current assignment, in the "
                       "kafka-reassign-partitions JSON format")


def _rule(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-insync-racks", type=int, metavar="N", default=None,
                   help="racks every topic must span (default: --config's rule, else the "
                   f"snapshot's figures, else {DEFAULT_MIN_INSYNC_RACKS})")
    p.add_argument("--topic-min-insync-racks", action="append", default=[],
                   metavar="NAME=N", help="min.insync.racks of one topic (repeatable)")
    p.add_argument("--config", metavar="FILE", type=Path,
                   help="take min.insync.racks from the proxy's settings (this TOML file "
                   "and RACKGUARD_* variables, as rackguard serve reads them)")
    p.add_argument("--rack-dimensions", metavar="NAME/NAME",
                   help="racks split into named dimensions, e.g. region/zone (default: "
                   "--config's rack_dimensions)")
    p.add_argument("--min-insync-racks-by-dimension", metavar="DIMENSION=N[,...]",
                   help="distinct values of each dimension every topic must span "
                   "(default: --config's, per topic)")
    p.add_argument("--topic", action="append", default=[], metavar="NAME",
                   help="only these topics (repeatable; default all but internal ones)")
    p.add_argument("--config-topic", metavar="NAME",
                   help="with --bootstrap: the topic holding the values set through the "
                   "Admin API (default: --config's config_topic, else __rackguard_configs)")
    p.add_argument("--ignore-config-topic", action="store_true",
                   help="with --bootstrap: leave out the values set through the Admin API "
                   "(use the file and flags only)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rackguard placement",
        description="Audit replica placement against min.insync.racks and plan fixes.")
    commands = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    a = commands.add_parser("audit", help="partitions whose replicas span too few racks")
    _sources(a)
    _rule(a)
    a.add_argument("--json", action="store_true", help="print JSON instead of tables")
    a.add_argument("--limit", type=int, default=50, metavar="ROWS",
                   help="partitions at risk listed in the table (default 50)")
    p = commands.add_parser(
        "plan", help="a reassignment file for kafka-reassign-partitions.sh --execute")
    _sources(p)
    _rule(p)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--fix", action="store_true",
                      help="fewest moves that make every partition span enough racks")
    mode.add_argument("--fresh", metavar="TOPIC",
                      help="the assignment Kafka computes for a new topic (KIP-36)")
    p.add_argument("--no-spare", action="store_true",
                   help="--fix: stop at N racks (default: N+1 where replicas allow)")
    p.add_argument("--partitions", type=int, metavar="P", help="--fresh: partitions")
    p.add_argument("--replication-factor", type=int, metavar="R",
                   help="--fresh: replicas per partition")
    p.add_argument("--start-index", type=int, metavar="I",
                   help="--fresh: Kafka's fixedStartIndex (default: random, as Kafka)")
    p.add_argument("--start-partition", type=int, default=0, metavar="ID",
                   help="--fresh: first partition id (adding partitions; default 0)")
    p.add_argument("--out", type=Path, metavar="FILE",
                   help="write the reassignment here (default: stdout)")
    p.add_argument("--rollback", type=Path, metavar="FILE",
                   help="--fix: write the current assignment of the moved partitions here "
                   "(default: OUT.rollback.json with --out)")
    return parser


def _load(args: argparse.Namespace, need_topics: bool) -> ClusterInputs:
    given = [n for n in ("bootstrap", "snapshot", "brokers") if getattr(args, n)]
    if len(given) != 1:
        raise SourceError("give exactly one of --bootstrap, --snapshot or --brokers")
    if args.bootstrap:
        from proxy.placement.live import read_cluster

        inputs = read_cluster(args.bootstrap, sizes=args.action == "plan" and args.fix)
    elif args.snapshot:
        inputs = read_snapshot(args.snapshot)
    else:
        racks = parse_brokers(args.brokers)
        if need_topics and not args.assignment:
            raise SourceError("--brokers needs --assignment FILE (the current assignment)")
        topics = read_assignment(args.assignment) if args.assignment else {}
        inputs = ClusterInputs(racks, topics)
    if args.topic:
        missing = sorted(set(args.topic) - set(inputs.topics))
        if missing and need_topics:
            raise SourceError(f"--topic: no such topic: {', '.join(missing)}")
        inputs = ClusterInputs(inputs.racks,
                               {t: p for t, p in inputs.topics.items() if t in args.topic},
                               inputs.required, inputs.sizes)
    return inputs


def _stored(args: argparse.Namespace, err: TextIO) -> StoredConfigs | None:
    """The values set through the Admin API, read from the config topic when the command
    reads a live cluster (None: not read). Said on ``err`` when some are in force."""
    if not args.bootstrap or args.ignore_config_topic:
        return None
    from proxy.placement.config_topic import read_config_topic

    topic = args.config_topic
    if topic is None:
        topic = (_settings(args.config).config_topic if args.config is not None
                 else DEFAULT_CONFIG_TOPIC)
    if not topic:
        return None
    stored = read_config_topic(args.bootstrap, topic)
    if stored.count():
        err.write(f"min.insync.racks set through the Admin API: {stored.count()} value(s) "
                  f"from the config topic {topic} (--ignore-config-topic leaves them out)\n")
    if stored.skipped:
        err.write(f"config topic {topic}: {stored.skipped} record(s) rackguard cannot read, "
                  "skipped\n")
    return stored


def _required(args: argparse.Namespace, inputs: ClusterInputs,
              stored: StoredConfigs | None = None) -> Callable[[str], int]:
    """min.insync.racks per topic: the command's flags, else the values set through the
    Admin API (``stored``) over --config's rule as the proxies apply them, else the
    snapshot's figures, else the default."""
    per_topic = parse_topic_numbers(args.topic_min_insync_racks, "--topic-min-insync-racks")
    if args.min_insync_racks is not None and args.min_insync_racks < 1:
        raise SourceError("--min-insync-racks must be >= 1")
    default = args.min_insync_racks
    proxy_rule = _proxy_rule(args.config) if args.config is not None else None
    if stored is not None and stored.count():
        base = (_settings_rule(args.config) if args.config is not None
                else RackRule(default_min_racks=DEFAULT_MIN_INSYNC_RACKS))
        proxy_rule = effective_rule(base, stored.configs).required_racks

    def required(topic: str) -> int:
        if topic in per_topic:
            return per_topic[topic]
        if default is not None:
            return int(default)
        if proxy_rule is not None:
            return proxy_rule(topic)
        return inputs.required.get(topic, DEFAULT_MIN_INSYNC_RACKS)

    return required


def _proxy_rule(config: Path) -> Callable[[str], int]:
    return _settings_rule(config).required_racks


def _settings(config: Path) -> Settings:
    from proxy.settings import SettingsError, load_settings

    try:
        return load_settings({}, config_file=str(config))
    except SettingsError as exc:
        raise SourceError(f"--config {config}: {exc}") from None


def _settings_rule(config: Path) -> RackRule:
    from proxy.app import rack_rule

    return rack_rule(_settings(config))


def _spread(args: argparse.Namespace, stored: StoredConfigs | None = None,
            err: TextIO | None = None) -> Spread | None:
    """The rule over several dimensions: the flags, else the values set through the Admin
    API (``stored``) over --config's, as the proxies apply them (None: none)."""
    rule = _settings_rule(args.config) if args.config is not None else None
    dynamic = stored.configs if stored is not None and stored.configs.dimensions else None
    try:
        dims = (RackDimensions.parse(args.rack_dimensions) if args.rack_dimensions
                else rule.dimensions if rule is not None else None)
        if dims is None:
            if args.min_insync_racks_by_dimension:
                raise SourceError("--min-insync-racks-by-dimension needs --rack-dimensions")
            if dynamic is not None and err is not None:
                err.write("the config topic holds minimums per rack dimension, but neither "
                          "--rack-dimensions nor --config says how racks split: not used\n")
            return None
        if args.min_insync_racks_by_dimension:
            given = parse_minimums(args.min_insync_racks_by_dimension, dims)
            return Spread(dims, lambda topic: given)
    except DimensionError as exc:
        raise SourceError(str(exc)) from None
    if dynamic is not None:
        base = replace(rule, dimensions=dims) if rule is not None else RackRule(dimensions=dims)
        return Spread(dims, effective_rule(base, dynamic).minimums)
    if rule is None:
        return None
    return Spread(dims, rule.minimums)


def _check_racks(required: int | None, inputs: ClusterInputs) -> None:
    racks = {r or "" for r in inputs.racks.values()}
    if required is not None and required > len(racks):
        raise PlacementError(f"min.insync.racks {required} is more than the {len(racks)} "
                             "racks of the cluster: no placement can satisfy it")


def _write(doc: dict[str, Any], path: Path | None, out: TextIO) -> None:
    text = json.dumps(doc, indent=None, separators=(",", ":")) + "\n"
    if path is None:
        out.write(text)
    else:
        path.write_text(text)


def run(argv: list[str], out: TextIO, err: TextIO) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.action == "audit":
            inputs = _load(args, need_topics=True)
            stored = _stored(args, err)
            result = audit(inputs.racks, inputs.topics, _required(args, inputs, stored),
                           _spread(args, stored, err))
            out.write(json.dumps(result.to_json(), indent=2) + "\n" if args.json
                      else audit_text(result, args.limit))
            return 0
        if args.fresh:
            if args.partitions is None or args.replication_factor is None:
                raise SourceError("--fresh needs --partitions and --replication-factor")
            inputs = _load(args, need_topics=False)
            _check_racks(args.min_insync_racks, inputs)
            assignment = assign(inputs.racks, args.partitions, args.replication_factor,
                                start_index=args.start_index,
                                start_partition=args.start_partition)
            _write(reassignment_file((args.fresh, p, r) for p, r in sorted(assignment.items())),
                   args.out, out)
            return 0
        inputs = _load(args, need_topics=True)
        stored = _stored(args, err)
        plan = plan_fix(inputs.racks, inputs.topics, _required(args, inputs, stored),
                        spare=not args.no_spare, sizes=inputs.sizes,
                        spread=_spread(args, stored, err))
    except (SourceError, PlacementError) as exc:
        err.write(f"rackguard placement: {exc}\n")
        return 2
    _write(plan.reassignment_json(), args.out, out)
    rollback = args.rollback or (args.out.with_suffix(".rollback.json") if args.out else None)
    if rollback is not None:
        _write(plan.rollback_json(), rollback, out)
    err.write(plan_text(plan))
    if rollback is not None:
        err.write(f"rollback (the current assignment): {rollback}\n")
    return 1 if plan.unfixable else 0


def main(argv: list[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv, sys.stdout, sys.stderr)
