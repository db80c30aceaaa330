"""The Streams audit as text (aligned tables), for ``rackguard streams audit``.

Invariant: pure functions of an :class:`~proxy.streams.audit.AppAudit`; the JSON form
(:mod:`.document`) carries everything the text shows.
"""

from __future__ import annotations

from proxy.placement.render import table
from proxy.streams.audit import SIDECAR_ZONE, SPREADS, AppAudit

VERDICT_HELP = {
    "not possible": "no set of the instances present spreads it further",
    "possible but not done": "the instances present allow a better spread",
    "not known": "too many tag combinations to search",
}


def _labels(report: AppAudit) -> dict[str, str]:
    return {i.process_id: i.label for i in report.instances}


def _dims(report: AppAudit) -> str:
    tags = [d for d in report.dimensions if d != SIDECAR_ZONE]
    out = ", ".join(tags) or "none"
    if SIDECAR_ZONE in report.dimensions:
        out += f" (and {SIDECAR_ZONE}: the zones of the sidecars the instances come through)"
    return out


def audit_text(report: AppAudit, limit: int = 50) -> str:
    labels = _labels(report)
    standbys = max(report.copies - 1, 0)
    out = [
        f"application {report.app}: {len(report.instances)} instances, "
        f"{len(report.tasks)} stateful tasks with up to {report.copies} copies "
        f"(1 active + {standbys} standby{'s' * (standbys != 1)})",
        f"dimensions: {_dims(report)}",
    ]
    if report.ideal_possible is not None:
        out.append("every copy in a different value of every dimension is "
                   f"{'possible' if report.ideal_possible else 'NOT possible'} with these "
                   "instances")
    out += ["", table(["DIMENSION", "TASKS", *(s.upper() for s in SPREADS)],
                      [(d, len(report.tasks), *report.counts(d).values())
                       for d in report.dimensions])]
    verdicts = report.verdicts()
    out += ["", f"{report.fully_spread} of {len(report.tasks)} tasks fully spread on every "
            f"dimension; not possible: {verdicts['not possible']}, possible but not done: "
            f"{verdicts['possible but not done']}"
            + (f", not known: {verdicts['not known']}" if verdicts["not known"] else "")]
    short = [t for t in report.tasks if t.verdict != "full" or any(
        s in ("partial", "same") for s in t.spread.values())]
    if short:
        shown = f", first {limit}" if len(short) > limit else ""
        out += ["", f"tasks not fully spread{shown}:",
                table(["TASK", "COPIES (ACTIVE FIRST)", "COLLAPSED", "VERDICT"],
                      [(t.task, ", ".join(labels.get(p, p) for p in t.copies),
                        ", ".join(t.collapsed) or "-", t.verdict)
                       for t in short[:limit]])]
    tags = [d for d in report.dimensions if d != SIDECAR_ZONE]
    rows = []
    for i in report.instances:
        notes = []
        if i.process_id in report.untagged:
            notes.append("no tag " + ",".join(report.untagged[i.process_id]))
        notes += [f"zone tag {m.tag_value!r} but its sidecar is in {m.sidecar_zone!r}"
                  for m in report.zone_mismatch if m.process_id == i.process_id]
        rows.append((i.label, i.process_id[:8], *(i.tags.get(d, "-") for d in tags),
                     i.sidecar_zone or "-", "; ".join(notes) or "-"))
    out += ["", table(["INSTANCE", "PROCESS", *(d.upper() for d in tags), "SIDECAR ZONE",
                       "NOTE"], rows)]
    if report.zone_mismatch:
        out += ["", f"{len(report.zone_mismatch)} instance(s) carry a zone tag that is not "
                "their sidecar's zone (a configuration copied from another zone?): "
                + ", ".join(m.label for m in report.zone_mismatch)]
    return "\n".join(out)
