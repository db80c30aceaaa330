"""``rackguard streams audit``: the KIP-708 standby-spread audit of one Kafka Streams
application, from outside the data path.

    rackguard streams audit --bootstrap HOST:PORT --group APP [--tags zone,cluster]
        [--sidecar http://SIDECAR:PORT ...] [--zone-tag zone] [--json]

Invariant: loaded only when the command runs (``rackguard serve`` never imports it);
reads the cluster once (FindCoordinator, then StreamsGroupDescribe or DescribeGroups)
and, with ``--sidecar``, each sidecar's ``/streams`` document (the zone each instance's
sidecar runs in); never writes. Exit codes: 0 done and nothing to act on; 1 done, and
some task could be spread further with the instances present or some instance's zone
tag is not its sidecar's zone; 2 bad input or the cluster could not be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from proxy.streams.audit import audit
from proxy.streams.document import audit_json
from proxy.streams.live import LiveError, read_group, sidecar_rows
from proxy.streams.model import app_from_members
from proxy.streams.render import audit_text
from proxy.streams.sources import instance_zones


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rackguard streams",
        description="Audit Kafka Streams' standby task spread over client tags (KIP-708).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    a = actions.add_parser(
        "audit", help="per stateful task: are its active and standby copies spread over "
        "every tag dimension, and could they be")
    a.add_argument("--bootstrap", required=True, metavar="HOST:PORT",
                   help="a broker, or the rackguard proxy (PLAINTEXT)")
    a.add_argument("--group", required=True, metavar="APP",
                   help="the application.id (the group id)")
    a.add_argument("--tags", default="", metavar="KEY[,KEY...]",
                   help="the tag keys the assignor uses (rack.aware.assignment.tags; "
                   "default: every key the instances carry)")
    a.add_argument("--zone-tag", default="zone", metavar="KEY",
                   help="the tag that names an instance's zone, checked against its "
                   "sidecar's client_rack (default zone; empty: no check)")
    a.add_argument("--sidecar", action="append", default=[], metavar="URL",
                   help="a sidecar's operations endpoint (http://HOST:PORT): the zones "
                   "of the instances behind it (repeatable)")
    a.add_argument("--protocol", choices=("auto", "classic", "streams"), default="auto",
                   help="classic: DescribeGroups; streams: StreamsGroupDescribe (KIP-1071); "
                   "auto: streams where the broker runs the group that way (default)")
    a.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS")
    a.add_argument("--json", action="store_true", help="print JSON instead of tables")
    a.add_argument("--limit", type=int, default=50, metavar="ROWS",
                   help="tasks listed in the table of tasks not fully spread (default 50)")
    return parser


def main(argv: list[str], out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        group = read_group(args.bootstrap, args.group, args.protocol, args.timeout)
        zones = instance_zones(sidecar_rows(args.sidecar, args.timeout), args.group)
    except LiveError as exc:
        print(f"rackguard streams: {exc}", file=sys.stderr)
        return 2
    state = app_from_members(args.group, group.members, zones, group.stateful)
    dims = tuple(t.strip() for t in args.tags.split(",") if t.strip())
    report = audit(state, dims, args.zone_tag or None)
    if args.json:
        doc = audit_json(report)
        doc.update(protocol=group.protocol, group_state=group.state,
                   members_unread=group.skipped)
        print(json.dumps(doc, indent=2), file=out)
    else:
        print(f"group {args.group} ({group.protocol} protocol, {group.state})"
              + (f"; {group.skipped} member(s) with Streams data of an unknown version"
                 if group.skipped else ""), file=out)
        print(audit_text(report, args.limit), file=out)
    acting = report.verdicts()["possible but not done"] or report.zone_mismatch
    return 1 if acting else 0
