"""The Streams audit on /metrics, and the sidecar's ``/streams`` document.

Series (a collector reading :class:`~proxy.streams.watch.StreamsWatch`'s state at
scrape time; the audit's series exist only on the sidecar in front of the group leader):

- ``rackguard_streams_tasks{app,dimension,spread}``: stateful tasks by the spread of
  their copies over one dimension (spread: full, partial, same, single; their sum is
  the tasks total);
- ``rackguard_streams_task_verdicts{app,verdict}``: tasks fully spread on every
  dimension (full), or not, and why (not possible, possible but not done, not known);
- ``rackguard_streams_instances{app}``, ``rackguard_streams_untagged_instances{app}``
  (instances without a value for a dimension the audit uses),
  ``rackguard_streams_ideal_possible{app}`` (1 when some set of instances could hold
  every copy of a task in a different value of every dimension);
- ``rackguard_streams_audit_timestamp_seconds{app}``, ``rackguard_streams_audits_total{app}``;
- on every sidecar, for the instances behind it:
  ``rackguard_streams_sidecar_instances{app,zone_tag}`` (zone_tag: matches, differs,
  missing, unknown: whether the instance's zone tag is this sidecar's client_rack);
- ``rackguard_streams_unreadable_total``: group messages or Streams data not read
  (malformed, or a version not known).

Invariant: read-only over the watch's state, which is replaced whole, never mutated.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.streams.audit import VERDICTS
from proxy.streams.document import audit_json
from proxy.streams.watch import StreamsWatch

ZONE_STATES = ("matches", "differs", "missing", "unknown")


class StreamsCollector(Collector):
    def __init__(self, watch: StreamsWatch) -> None:
        self._watch = watch

    def collect(self) -> Iterator[Metric]:
        w = self._watch
        audits, stamps, done, own = w.audits, w.audited_at, w.audits_done, w.own
        tasks = GaugeMetricFamily(
            "rackguard_streams_tasks", "Kafka Streams stateful tasks by the spread of their "
            "active and standby copies over one tag dimension (audited by the sidecar in "
            "front of the group leader)", labels=["app", "dimension", "spread"])
        verdicts = GaugeMetricFamily(
            "rackguard_streams_task_verdicts", "Kafka Streams stateful tasks fully spread "
            "on every dimension (full), or not and why", labels=["app", "verdict"])
        instances = GaugeMetricFamily("rackguard_streams_instances",
                                      "Kafka Streams instances of the application",
                                      labels=["app"])
        untagged = GaugeMetricFamily(
            "rackguard_streams_untagged_instances", "Kafka Streams instances without a "
            "value for a tag dimension the audit uses", labels=["app"])
        ideal = GaugeMetricFamily(
            "rackguard_streams_ideal_possible", "1 when the instances present allow every "
            "copy of a task in a different value of every dimension", labels=["app"])
        stamp = GaugeMetricFamily("rackguard_streams_audit_timestamp_seconds",
                                  "When the application was last audited (Unix time)",
                                  labels=["app"])
        count = CounterMetricFamily("rackguard_streams_audits",
                                    "Rebalances of the application audited here",
                                    labels=["app"])
        for app, report in sorted(audits.items()):
            for dim in report.dimensions:
                for spread, n in report.counts(dim).items():
                    tasks.add_metric([app, dim, spread], n)
            got = report.verdicts()
            for verdict in VERDICTS:
                verdicts.add_metric([app, verdict], got[verdict])
            instances.add_metric([app], len(report.instances))
            untagged.add_metric([app], len(report.untagged))
            if report.ideal_possible is not None:
                ideal.add_metric([app], 1 if report.ideal_possible else 0)
            if app in stamps:
                stamp.add_metric([app], stamps[app])
        for app, n in sorted(done.items()):
            count.add_metric([app], n)
        behind = GaugeMetricFamily(
            "rackguard_streams_sidecar_instances", "Kafka Streams instances behind this "
            "sidecar, by whether their zone tag is this sidecar's client_rack",
            labels=["app", "zone_tag"])
        states = Counter((o.group, o.zone_state) for o in own.values())
        for app in sorted({o.group for o in own.values()}):
            for state in ZONE_STATES:
                behind.add_metric([app, state], states[(app, state)])
        unreadable = CounterMetricFamily(
            "rackguard_streams_unreadable", "Group messages or Kafka Streams data the "
            "audit could not read (malformed, or a version it does not know)")
        unreadable.add_metric([], w.unreadable)
        yield from (tasks, verdicts, instances, untagged, ideal, stamp, count, behind,
                    unreadable)


def streams_document(watch: StreamsWatch) -> bytes:
    """The sidecar's ``/streams`` document: the instances behind it (with the zone it
    runs in) and the audits it holds."""
    doc: dict[str, Any] = {
        "client_rack": watch.client_rack,
        "zone_tag": watch.zone_tag,
        "members": [{"group": o.group, "process_id": o.process_id, "client_id": o.client_id,
                     "member_id": o.member_id, "tags": o.tags, "client_rack": o.client_rack,
                     "zone_tag_state": o.zone_state}
                    for o in watch.own.values()],
        "audits": {app: audit_json(a) for app, a in watch.audits.items()},
    }
    return json.dumps(doc, indent=1).encode()
