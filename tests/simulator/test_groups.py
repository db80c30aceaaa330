"""Unit tests: the classic group coordinator's join/sync/heartbeat/leave cycle."""

from __future__ import annotations

import asyncio

from simulator import errors
from simulator.groups import STABLE, CommittedOffset, GroupCoordinator

PROTOS = [("range", b"meta")]


async def join(gc: GroupCoordinator, member: str = "") -> object:
    return await gc.join("g", member, None, "c", 10000, 1000, "consumer", PROTOS)


async def test_two_members_join_one_generation() -> None:
    gc = GroupCoordinator(initial_rebalance_delay_ms=20)
    r1, r2 = await asyncio.wait_for(asyncio.gather(join(gc), join(gc)), 5)
    assert r1.error == r2.error == errors.NONE
    assert r1.generation == r2.generation == 1
    assert r1.leader == r2.leader
    leader, follower = (r1, r2) if r1.member_id == r1.leader else (r2, r1)
    assert len(leader.members) == 2 and follower.members == []
    sync_follower = asyncio.ensure_future(gc.sync("g", 1, follower.member_id, {}))
    await asyncio.sleep(0)
    assert not sync_follower.done()
    s_leader = await gc.sync(
        "g", 1, leader.member_id, {leader.member_id: b"A", follower.member_id: b"B"}
    )
    assert s_leader.assignment == b"A"
    assert (await asyncio.wait_for(sync_follower, 2)).assignment == b"B"
    assert gc.groups["g"].state == STABLE
    assert gc.heartbeat("g", 1, follower.member_id) == errors.NONE
    assert gc.heartbeat("g", 0, follower.member_id) == errors.ILLEGAL_GENERATION
    assert gc.heartbeat("g", 1, "nobody") == errors.UNKNOWN_MEMBER_ID


async def test_leave_triggers_rebalance_for_the_rest() -> None:
    gc = GroupCoordinator(initial_rebalance_delay_ms=10)
    r1, r2 = await asyncio.gather(join(gc), join(gc))
    await asyncio.gather(
        gc.sync("g", 1, r1.member_id, {}), gc.sync("g", 1, r2.member_id, {})
    )
    assert gc.leave("g", [r1.member_id]) == [errors.NONE]
    assert gc.heartbeat("g", 1, r2.member_id) == errors.REBALANCE_IN_PROGRESS
    again = await asyncio.wait_for(join(gc, r2.member_id), 2)
    assert again.generation == 2 and again.leader == r2.member_id


async def test_commit_checks_generation_and_stores_offsets() -> None:
    gc = GroupCoordinator(initial_rebalance_delay_ms=0)
    r = await join(gc)
    await gc.sync("g", 1, r.member_id, {r.member_id: b""})
    assert gc.check_commit("g", 0, r.member_id) == errors.ILLEGAL_GENERATION
    assert gc.check_commit("g", 1, r.member_id) == errors.NONE
    assert gc.check_commit("g", -1, "") == errors.UNKNOWN_MEMBER_ID
    gc.store_offsets("g", {("t", 0): CommittedOffset(5, -1, None)})
    assert gc.committed("g")[("t", 0)].offset == 5
    # A standalone (simple) consumer commits with generation -1 to an empty group.
    assert gc.check_commit("solo", -1, "") == errors.NONE


async def test_session_expiry_removes_member() -> None:
    gc = GroupCoordinator(initial_rebalance_delay_ms=0)
    r = await gc.join("g", "", None, "c", 1, 1000, "consumer", PROTOS)
    await gc.sync("g", 1, r.member_id, {})
    await asyncio.sleep(0.01)
    assert gc.expire_sessions() == [r.member_id]
    assert gc.groups["g"].state == "Empty"
