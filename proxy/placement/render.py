"""Plain-text tables for the placement command (aligned columns, no dependency).

Invariant: pure functions from audit/plan values to text; what ``--json``
prints is the values' own ``to_json``, not this.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.placement.audit import Audit, DimensionFinding
from proxy.placement.model import rack_label
from proxy.placement.plan import Plan


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(header), *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return " ".join(f"{rack_label(r)}={n}" for r, n in sorted(counts.items())) or "-"


def _size(value: int | None) -> str:
    if value is None:
        return "unknown"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)  # pragma: no cover


def audit_text(result: Audit, limit: int = 50) -> str:
    per_rack: dict[str, int] = {}
    for rack in result.brokers.values():
        per_rack[rack] = per_rack.get(rack, 0) + 1
    racks = ", ".join(f"{rack_label(r)} ({n} broker{'s' * (n != 1)})"
                      for r, n in sorted(per_rack.items()))
    out = [
        f"{len(per_rack)} racks: {racks or 'none'}",
        f"{result.partitions} partitions: {result.unsatisfiable} unsatisfiable, "
        f"{result.fragile} fragile, "
        f"{result.partitions - result.unsatisfiable - result.fragile} healthy",
        "",
        table(["TOPIC", "MIN.INSYNC.RACKS", "PARTITIONS", "UNSATISFIABLE", "FRAGILE",
               "HEALTHY", "REPLICAS PER RACK", "LEADERS PER RACK"],
              [(t.topic, t.required, t.partitions, t.unsatisfiable, t.fragile, t.healthy,
                _counts(t.replicas_per_rack), _counts(t.leaders_per_rack))
               for t in result.topics]),
    ]
    findings = [f for t in result.topics for f in t.findings]
    if findings:
        shown = f", first {limit}" if len(findings) > limit else ""
        out += ["", f"partitions at risk (worst topics first{shown}):",
                table(["TOPIC", "PARTITION", "STATUS", "REPLICAS", "RACKS", "NOTE"],
                      [(f.topic, f.partition, f.status.value, ",".join(map(str, f.replicas)),
                        ",".join(rack_label(r) for r in f.racks) or "-",
                        _note(f.offline, f.unknown, f.dimension))
                       for f in findings[:limit]])]
    out += ["", "leaders and replicas per broker"
            + (f" ({result.leaderless} partitions without a leader)" if result.leaderless
               else "") + ":",
            table(["BROKER", "RACK", "LEADERS", "REPLICAS"],
                  [(b, rack_label(r), result.leaders_per_broker.get(b, 0),
                    result.replicas_per_broker.get(b, 0))
                   for b, r in sorted(result.brokers.items())]),
            f"leaders per rack: {_counts(result.leaders_per_rack)}"]
    return "\n".join(out) + "\n"


def _note(offline: tuple[int, ...], unknown: tuple[int, ...],
          dimension: DimensionFinding | None = None) -> str:
    notes = []
    if dimension is not None:
        notes.append(f"{len(dimension.values)} {dimension.dimension}(s) "
                     f"[{','.join(rack_label(v) for v in dimension.values)}], "
                     f"min.insync.racks.{dimension.dimension}={dimension.required}")
    if offline:
        notes.append("offline " + ",".join(map(str, offline)))
    if unknown:
        notes.append("unknown broker " + ",".join(map(str, unknown)))
    return "; ".join(notes)


def plan_text(plan: Plan) -> str:
    out = [f"{len(plan.reassignments)} partitions to reassign, {plan.moves} replica moves, "
           f"{_size(plan.bytes_to_move)} to copy"]
    if plan.reassignments:
        out.append(table(
            ["TOPIC", "PARTITION", "REPLICAS NOW", "PLANNED", "RACKS", "MOVES", "SIZE"],
            [(r.topic, r.partition, ",".join(map(str, r.before)),
              ",".join(map(str, r.after)), f"{r.racks_before}->{r.racks_after}", r.moves,
              _size(r.size_bytes)) for r in plan.reassignments]))
    if plan.unfixable:
        out.append("not fixable by moving replicas:")
        out.extend(f"  {u.topic}-{u.partition} replicas {list(u.replicas)}: {u.reason}"
                   for u in plan.unfixable)
    return "\n".join(out) + "\n"
