"""The Streams audit as JSON: what ``rackguard streams audit --json`` prints and what a
sidecar's ``/streams`` document carries.

Invariant: pure functions of audit values; every field the text report shows is here,
and each task's copies and their values per dimension.
"""

from __future__ import annotations

from typing import Any

from proxy.streams.audit import AppAudit, TaskAudit


def _task_json(t: TaskAudit) -> dict[str, Any]:
    return {"task": t.task, "copies": list(t.copies), "verdict": t.verdict,
            "spread": dict(t.spread), "collapsed": list(t.collapsed),
            "values": {d: list(v) for d, v in t.values.items()}}


def audit_json(report: AppAudit) -> dict[str, Any]:
    return {
        "app": report.app,
        "dimensions": list(report.dimensions),
        "copies": report.copies,
        "ideal_possible": report.ideal_possible,
        "tasks_total": len(report.tasks),
        "tasks_fully_spread": report.fully_spread,
        "spread": {d: report.counts(d) for d in report.dimensions},
        "verdicts": report.verdicts(),
        "instances": [{"process_id": i.process_id, "label": i.label, "tags": dict(i.tags),
                       "members": list(i.members), "rack": i.rack,
                       "sidecar_zone": i.sidecar_zone} for i in report.instances],
        "untagged": {p: list(d) for p, d in report.untagged.items()},
        "zone_mismatch": [{"process_id": m.process_id, "label": m.label,
                           "zone_tag": m.tag_value, "sidecar_zone": m.sidecar_zone}
                          for m in report.zone_mismatch],
        "tasks": [_task_json(t) for t in report.tasks],
    }
