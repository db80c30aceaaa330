"""The creation guard's rule: explicit replica assignments must be able to meet
min.insync.racks.

Invariant: pure functions of frozen values. A new partition whose explicit
replica list spans fewer racks than the topic's ``min.insync.racks`` (N) could
never take an acks=all write, so the topic's request is refused; racks are
counted as the rack rule counts them (a rackless broker is the rack ""; a broker
the view has never seen counts for none). With N = 1, or without explicit
assignments (the broker then assigns rack-aware itself), nothing is checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proxy.placement.model import Racks, rack_label, replica_racks

MIN_INSYNC_RACKS = "min.insync.racks"
INVALID_REPLICA_ASSIGNMENT = 39
_NAMED = 10  # partitions named in one message at most


def requested_min_racks(configs: Mapping[str, str | None], default: int) -> int:
    """The topic's N: its own ``min.insync.racks`` config where the request sets a valid
    one, else ``default`` (the proxy's rule for the name)."""
    value = configs.get(MIN_INSYNC_RACKS)
    try:
        n = int(value) if value is not None else default
    except ValueError:
        return default
    return n if n >= 1 else default


def refusal(topic: str, required: int, assignments: Sequence[tuple[int, Sequence[int]]],
            racks: Racks) -> str | None:
    """Why ``topic``'s new partitions ``(partition id, replicas)`` cannot meet
    ``required`` racks, or None when every one can."""
    if required <= 1:
        return None
    short = []
    for partition, replicas in assignments:
        spanned = replica_racks(racks, replicas)
        if len(spanned) < required:
            short.append((partition, replicas, spanned))
    if not short:
        return None
    named = "; ".join(
        f"partition {p} replicas {list(r)} span {len(s)} rack(s)"
        f"{' (' + ', '.join(rack_label(x) for x in sorted(s)) + ')' if s else ''}"
        for p, r, s in short[:_NAMED])
    more = f"; and {len(short) - _NAMED} more" if len(short) > _NAMED else ""
    return (f"topic {topic!r} has min.insync.racks {required}, but {len(short)} of its "
            f"{len(assignments)} new partition(s) cannot span {required} racks: {named}{more}")
