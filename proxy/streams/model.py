"""What the Streams audit reads: one application's instances and where its tasks run,
as plain frozen values, whatever the source (the classic protocol's JoinGroup and
SyncGroup data, DescribeGroups, or a KIP-1071 StreamsGroupDescribe).

An instance is a Kafka Streams process (its process id); its stream threads are
group members that share the process id and the tags. A task is named as Kafka Streams
prints it (``<subtopology>_<partition>``).

Invariant: values only, no I/O; :func:`app_from_members` is the one place member data
becomes an application, so every source is audited the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Instance:
    process_id: str
    tags: Mapping[str, str]
    members: tuple[str, ...] = ()
    client_ids: tuple[str, ...] = ()
    rack: str | None = None  # the rack id its consumer or streams member names, if any
    sidecar_zone: str | None = None  # client_rack of the sidecar it comes through, if known

    @property
    def label(self) -> str:
        """A short name for reports: the first client id, else the process id."""
        return self.client_ids[0] if self.client_ids else self.process_id


@dataclass(frozen=True, slots=True)
class MemberData:
    """One group member, as a source read it."""

    member_id: str
    process_id: str
    tags: Mapping[str, str]
    active: frozenset[str] = frozenset()
    standby: frozenset[str] = frozenset()
    state: frozenset[str] = frozenset()  # tasks it holds state for (offset sums)
    client_id: str = ""
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class AppState:
    app: str
    instances: tuple[Instance, ...]
    active: Mapping[str, str]  # task -> process id
    standby: Mapping[str, tuple[str, ...]]  # task -> process ids
    stateful: frozenset[str] = field(default_factory=frozenset)  # known stateful tasks


def app_from_members(app: str, members: Iterable[MemberData],
                     sidecar_zones: Mapping[str, str] | None = None,
                     stateful: Iterable[str] = ()) -> AppState:
    """Members grouped into instances by process id; ``sidecar_zones`` maps a process id
    to the client_rack of the sidecar it joined through, where one is known."""
    zones = sidecar_zones or {}
    by_process: dict[str, list[MemberData]] = {}
    for m in members:
        by_process.setdefault(m.process_id, []).append(m)
    instances = []
    active: dict[str, str] = {}
    standby: dict[str, list[str]] = {}
    state: set[str] = set(stateful)
    for process, group in sorted(by_process.items()):
        tags: dict[str, str] = {}
        for m in group:
            tags.update(m.tags)
        rack = next((m.rack for m in group if m.rack), None)
        instances.append(Instance(process, tags, tuple(sorted(m.member_id for m in group)),
                                  tuple(sorted({m.client_id for m in group if m.client_id})),
                                  rack, zones.get(process)))
        for m in group:
            for task in m.active:
                active[task] = process
            for task in m.standby:
                holders = standby.setdefault(task, [])
                if process not in holders:
                    holders.append(process)
            state.update(m.state)
    return AppState(app, tuple(instances), active,
                    {t: tuple(sorted(p)) for t, p in standby.items()}, frozenset(state))
