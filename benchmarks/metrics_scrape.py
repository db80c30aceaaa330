"""The cost of one /metrics scrape's rack coverage with 100,000 partitions in the view.

Builds a MetadataSnapshot directly (``--topics`` x ``--per-topic`` partitions, six
brokers in three racks, replication factor 3 with one replica per rack), applies it to a
ClusterViewStore and times the rack-coverage part of a /metrics body
(``RackCoverageCollector.exposition``: view read, coverage computed and rendered),
healthy and during a rack-c outage (every partition exactly at its minimum of 2, the
worst case of the default mode), in the ``at_or_under``, ``all`` and ``none`` modes.
The best of ``--repeat`` scrapes is printed, never asserted (docs/operations.md quotes
the figures; the content is tested in tests/unit/ops/test_kip_metrics_scale.py).

``--dimensions``: the same with racks of two dimensions (``eu-1/rack-a``,
``eu-1/rack-b``, ``eu-2/rack-c``; ``rack_dimensions = "region/zone"``) and a region
minimum of 2 for every topic, so the scrape adds the coverage per dimension; with rack-c
down every partition is then under its region minimum and at its rack minimum.

Usage: .venv/bin/python -m benchmarks.metrics_scrape [--topics 100] [--per-topic 1000]
       [--dimensions]
"""

from __future__ import annotations

import argparse
import time

from protocol.addresses import BrokerAddress
from protocol.metadata import MetadataSnapshot, PartitionMetadata, TopicMetadata
from proxy.cluster.view import ClusterViewStore
from proxy.enforce.dimensions import RackDimensions
from proxy.enforce.policy import RackRule
from proxy.ops.kip_metrics import PartitionSeries, RackCoverageCollector

RACKS = ("rack-a", "rack-b", "rack-c")
REGION_RACKS = ("eu-1/rack-a", "eu-1/rack-b", "eu-2/rack-c")
MODES: tuple[tuple[bool, PartitionSeries], ...] = (
    (False, "at_or_under"), (True, "at_or_under"), (True, "all"), (True, "none"))


def snapshot(topics: int, per_topic: int, outage: bool,
             racks: tuple[str, ...] = RACKS) -> MetadataSnapshot:
    """One replica per rack for every partition; in an outage rack-c (brokers 3 and 6)
    has left every ISR."""
    brokers = tuple(BrokerAddress(n, f"b{n}.internal", 9092 + n, racks[(n - 1) % 3])
                    for n in range(1, 7))
    rows = []
    for t in range(topics):
        parts = []
        for p in range(per_topic):
            first = (t + p) % 6 + 1  # racks a, b, c in turn
            replicas = tuple((first - 1 + k) % 6 + 1 for k in range(3))
            isr = tuple(n for n in replicas if not (outage and n in (3, 6)))
            parts.append(PartitionMetadata(p, 0, isr[0], 1, replicas, isr, ()))
        rows.append(TopicMetadata(f"topic-{t:03d}", None, 0, False, tuple(parts)))
    return MetadataSnapshot(brokers, "c", 1, tuple(rows))


def scrape(snap: MetadataSnapshot, series: PartitionSeries, repeat: int,
           rule: RackRule | None = None) -> tuple[float, bytes]:
    """(best seconds of ``repeat`` scrapes, the last body)."""
    store = ClusterViewStore(time.monotonic)
    store.apply_metadata(snap, full=True)
    in_force = rule if rule is not None else RackRule(default_min_racks=2)
    coverage = RackCoverageCollector(lambda: store.view, lambda: in_force, time.monotonic,
                                     series)
    best, body = float("inf"), b""
    for _ in range(repeat):
        start = time.perf_counter()
        body = coverage.exposition()
        best = min(best, time.perf_counter() - start)
    return best, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--per-topic", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dimensions", action="store_true",
                        help="racks in two dimensions, a region minimum of 2")
    args = parser.parse_args(argv)
    total = args.topics * args.per_topic
    racks, rule = RACKS, RackRule(default_min_racks=2)
    if args.dimensions:
        racks = REGION_RACKS
        rule = RackRule(default_min_racks=2, dimensions=RackDimensions.parse("region/zone"),
                        dimension_minimums={"region": 2})
    for outage, series in MODES:
        seconds, body = scrape(snapshot(args.topics, args.per_topic, outage, racks), series,
                               args.repeat, rule)
        state = ("rack-c down" if outage else "healthy") + (
            ", region/zone" if args.dimensions else "")
        lines = body.count(b"\n")
        print(f"scrape, {total:,} partitions, {state}, {series}: {seconds * 1000:.2f} ms, "
              f"{lines:,} lines, {len(body) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
