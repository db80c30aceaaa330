"""Classic consumer-group coordinator for the simulator (a TEST DOUBLE).

Invariants: runs on the event-loop thread only. A group is in one of the
states Empty, PreparingRebalance, CompletingRebalance, Stable. A JoinGroup
call waits until every known member has rejoined (or the rebalance deadline
passes, dropping laggards), then every joiner gets the same new generation
and the first member becomes leader. SyncGroup answers followers once the
leader has sent the assignment. Committed offsets live here, per group,
keyed by (topic, partition), and survive coordinator moves (the simulator
has one shared coordinator state).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

from simulator import errors

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"


@dataclass(frozen=True)
class JoinResult:
    error: int
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    last_seen: float = field(default_factory=time.monotonic)
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    assignment: bytes = b""


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None
    initial_wait: bool = False


def _resolve(fut: asyncio.Future[JoinResult] | asyncio.Future[SyncResult] | None,
             result: JoinResult | SyncResult) -> None:
    if fut is not None and not fut.done():
        fut.set_result(result)  # type: ignore[arg-type]


class GroupCoordinator:
    """All groups of the cluster."""

    def __init__(self, initial_rebalance_delay_ms: int = 50) -> None:
        self.groups: dict[str, Group] = {}
        self.initial_delay_s = initial_rebalance_delay_ms / 1000

    # -- membership ------------------------------------------------------

    async def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult:
        group = self.groups.setdefault(group_id, Group(group_id))
        if group.members and protocol_type != group.protocol_type:
            return JoinResult(errors.INCONSISTENT_GROUP_PROTOCOL)
        if not protocols:
            return JoinResult(errors.INCONSISTENT_GROUP_PROTOCOL)
        if member_id and member_id not in group.members:
            return JoinResult(errors.UNKNOWN_MEMBER_ID, member_id=member_id)
        if not member_id:
            if group_instance_id is not None:
                for old in list(group.members.values()):
                    if old.group_instance_id == group_instance_id:
                        self._remove(group, old.member_id)
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            group.members[member_id] = Member(
                member_id, group_instance_id, session_timeout_ms, rebalance_timeout_ms, protocols
            )
        member = group.members[member_id]
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.last_seen = time.monotonic()
        _resolve(member.join_future, JoinResult(errors.REBALANCE_IN_PROGRESS))
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = fut
        group.protocol_type = protocol_type
        if group.state != PREPARING:
            self._prepare_rebalance(group)
        self._maybe_complete_join(group)
        return await fut

    def _prepare_rebalance(self, group: Group) -> None:
        if group.state == COMPLETING:
            for m in group.members.values():
                _resolve(m.sync_future, SyncResult(errors.REBALANCE_IN_PROGRESS))
                m.sync_future = None
        initial = group.state == EMPTY
        group.state = PREPARING
        if group.timer is not None:
            group.timer.cancel()
        if initial:
            delay = self.initial_delay_s
        else:
            delay = max((m.rebalance_timeout_ms for m in group.members.values()), default=0) / 1000
        group.initial_wait = initial and delay > 0
        group.timer = asyncio.get_running_loop().call_later(delay, self._complete_join, group)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state != PREPARING or group.initial_wait:
            return  # an empty group waits out group.initial.rebalance.delay.ms
        if all(m.join_future is not None for m in group.members.values()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.state != PREPARING:
            return
        if group.timer is not None:
            group.timer.cancel()
            group.timer = None
        group.initial_wait = False
        for m in list(group.members.values()):
            if m.join_future is None:
                self._remove(group, m.member_id, rebalance=False)
        if not group.members:
            group.state = EMPTY
            group.leader = ""
            return
        members = list(group.members.values())
        if group.leader not in group.members:
            group.leader = members[0].member_id
        leader = group.members[group.leader]
        common = [
            name for name, _ in leader.protocols
            if all(any(n == name for n, _ in m.protocols) for m in members)
        ]
        group.generation += 1
        if not common:
            for m in members:
                _resolve(m.join_future, JoinResult(errors.INCONSISTENT_GROUP_PROTOCOL))
                m.join_future = None
            group.state = EMPTY
            group.members.clear()
            return
        group.protocol_name = common[0]
        group.state = COMPLETING
        listing = [
            (m.member_id, m.group_instance_id, dict(m.protocols)[group.protocol_name])
            for m in members
        ]
        for m in members:
            _resolve(
                m.join_future,
                JoinResult(
                    errors.NONE,
                    group.generation,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader,
                    m.member_id,
                    listing if m.member_id == group.leader else [],
                ),
            )
            m.join_future = None

    async def sync(
        self, group_id: str, generation: int, member_id: str, assignments: dict[str, bytes]
    ) -> SyncResult:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return SyncResult(errors.UNKNOWN_MEMBER_ID)
        if generation != group.generation:
            return SyncResult(errors.ILLEGAL_GENERATION)
        if group.state == PREPARING:
            return SyncResult(errors.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        member.last_seen = time.monotonic()
        if group.state == STABLE:
            return self._sync_ok(group, member)
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        _resolve(member.sync_future, SyncResult(errors.REBALANCE_IN_PROGRESS))
        member.sync_future = fut
        if member_id == group.leader:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.state = STABLE
            for m in group.members.values():
                _resolve(m.sync_future, self._sync_ok(group, m))
                m.sync_future = None
        return await fut

    @staticmethod
    def _sync_ok(group: Group, member: Member) -> SyncResult:
        return SyncResult(errors.NONE, group.protocol_type, group.protocol_name, member.assignment)

    def heartbeat(self, group_id: str, generation: int, member_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return errors.UNKNOWN_MEMBER_ID
        group.members[member_id].last_seen = time.monotonic()
        if group.state == PREPARING:
            return errors.REBALANCE_IN_PROGRESS
        if generation != group.generation:
            return errors.ILLEGAL_GENERATION
        return errors.NONE

    def leave(self, group_id: str, member_ids: list[str]) -> list[int]:
        group = self.groups.get(group_id)
        out = []
        for member_id in member_ids:
            if group is None or member_id not in group.members:
                out.append(errors.UNKNOWN_MEMBER_ID)
                continue
            self._remove(group, member_id)
            out.append(errors.NONE)
        return out

    def member_for_instance(self, group_id: str, instance_id: str) -> str | None:
        group = self.groups.get(group_id)
        for m in group.members.values() if group else ():
            if m.group_instance_id == instance_id:
                return m.member_id
        return None

    def _remove(self, group: Group, member_id: str, rebalance: bool = True) -> None:
        member = group.members.pop(member_id)
        _resolve(member.join_future, JoinResult(errors.UNKNOWN_MEMBER_ID))
        _resolve(member.sync_future, SyncResult(errors.UNKNOWN_MEMBER_ID))
        if not rebalance:
            return
        if not group.members:
            if group.timer is not None:
                group.timer.cancel()
                group.timer = None
            group.state = EMPTY
            group.leader = ""
        elif group.state in (STABLE, COMPLETING):
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)

    def expire_sessions(self) -> list[str]:
        """Drop members whose session timed out; returns their ids."""
        now = time.monotonic()
        expired = []
        for group in self.groups.values():
            for m in list(group.members.values()):
                if m.join_future is None and now - m.last_seen > m.session_timeout_ms / 1000:
                    expired.append(m.member_id)
                    self._remove(group, m.member_id)
        return expired

    # -- offsets ---------------------------------------------------------

    def check_commit(self, group_id: str, generation: int, member_id: str) -> int:
        group = self.groups.get(group_id)
        if generation < 0 and not member_id:
            if group is not None and group.members:
                return errors.UNKNOWN_MEMBER_ID
            return errors.NONE
        if group is None or member_id not in group.members:
            return errors.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return errors.ILLEGAL_GENERATION
        if group.state == COMPLETING:
            return errors.REBALANCE_IN_PROGRESS
        group.members[member_id].last_seen = time.monotonic()
        return errors.NONE

    def store_offsets(
        self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]
    ) -> None:
        group = self.groups.setdefault(group_id, Group(group_id))
        group.offsets.update(offsets)

    def committed(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        group = self.groups.get(group_id)
        return dict(group.offsets) if group else {}
