"""Member data as each source gives it, turned into :class:`~proxy.streams.model.MemberData`:
the classic protocol's member metadata and assignment (from a JoinGroup response and a
SyncGroup request, or both from DescribeGroups), and a KIP-1071 streams group's members
(StreamsGroupDescribe).

Invariant: decoding only (protocol/ does the bytes); a member whose Streams data is of
an unknown version, malformed, or missing is left out and counted in ``skipped``, never
an error: the data is not ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from protocol.primitives import ProtocolError
from protocol.streams_assignment import member_assignment
from protocol.streams_group_describe import StreamsGroup
from protocol.streams_subscription import TaskId, member_subscription
from proxy.streams.model import MemberData


@dataclass(slots=True)
class Decoded:
    members: list[MemberData] = field(default_factory=list)
    skipped: int = 0  # members whose data could not be read (unknown version, malformed)


def task_name(task: TaskId) -> str:
    return str(task)


def classic_member(member_id: str, metadata: bytes, assignment: bytes | None,
                   client_id: str = "") -> MemberData | None:
    """One ``stream`` member from its JoinGroup metadata and (if known) its assignment."""
    try:
        envelope, sub = member_subscription(metadata)
        info = member_assignment(assignment) if assignment else None
    except ProtocolError:
        return None
    if sub is None:
        return None
    active = frozenset(task_name(t) for t in info.active) if info else frozenset()
    standby = frozenset(task_name(t) for t in info.standby) if info else frozenset()
    return MemberData(member_id, sub.process_id, dict(sub.client_tags), active, standby,
                      frozenset(task_name(t) for t in sub.state | sub.active),
                      client_id, envelope.rack)


def classic_members(metadata: Mapping[str, bytes], assignments: Mapping[str, bytes],
                    client_ids: Mapping[str, str] | None = None) -> Decoded:
    out = Decoded()
    for member_id, meta in metadata.items():
        m = classic_member(member_id, meta, assignments.get(member_id),
                           (client_ids or {}).get(member_id, ""))
        if m is None:
            out.skipped += 1
        else:
            out.members.append(m)
    return out


def _tasks(by_sub: Mapping[str, tuple[int, ...]]) -> frozenset[str]:
    return frozenset(f"{sub}_{p}" for sub, parts in by_sub.items() for p in parts)


def streams_group_members(group: StreamsGroup) -> tuple[list[MemberData], frozenset[str]]:
    """A KIP-1071 group's members, and its stateful tasks (the tasks of sub-topologies
    with changelog topics, where the topology is known)."""
    members = [MemberData(m.member_id, m.process_id, dict(m.client_tags), _tasks(m.active),
                          _tasks(m.standby), frozenset(), m.client_id,
                          m.rack_id)
               for m in group.members]
    stateful: set[str] = set()
    if group.stateful_subtopologies:
        subs = group.stateful_subtopologies
        for m in group.members:
            for tasks in (m.active, m.standby):
                stateful.update(f"{s}_{p}" for s, parts in tasks.items() if s in subs
                                for p in parts)
    return members, frozenset(stateful)


def instance_zones(rows: Iterable[Mapping[str, object]], group: str) -> dict[str, str]:
    """process id -> sidecar zone, from sidecars' ``/streams`` documents' ``members``."""
    out = {}
    for row in rows:
        if row.get("group") == group and row.get("client_rack") and row.get("process_id"):
            out[str(row["process_id"])] = str(row["client_rack"])
    return out
