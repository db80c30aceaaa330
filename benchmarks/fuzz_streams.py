"""Fuzz targets for the Kafka Streams decoders (benchmarks/fuzz.py runs them).

Every decoding entry point of protocol/streams_subscription.py (SubscriptionInfo v1-11
and the consumer envelope), protocol/streams_assignment.py (AssignmentInfo v1-11 and
its envelope), protocol/group_members.py (JoinGroup requests and responses v0-9,
SyncGroup requests v0-5, DescribeGroups responses v0-6), protocol/streams_group_describe.py
(v0) and protocol/streams_group_heartbeat.py (v0-1), called the way proxy/streams/ calls
them. Seeds: the golden bytes Kafka Streams' own classes wrote
(tests/unit/protocol/streams_golden.json, read as data), kafka-python's group messages
around them, and a StreamsGroupDescribe response and StreamsGroupHeartbeat requests
written field by field from Kafka's JSON message definitions
(:func:`streams_describe_response`, :func:`streams_heartbeat_request`, which the unit
tests use too).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

from benchmarks.fuzz_admin import Spec, framed
from protocol._message import Writer
from protocol.group_members import (
    read_describe_groups_response,
    read_join_group_request,
    read_join_group_response,
    read_sync_group_request,
)
from protocol.headers import parse_request_header
from protocol.streams_assignment import member_assignment, parse_streams_assignment
from protocol.streams_group_describe import read_response
from protocol.streams_group_heartbeat import read_heartbeat
from protocol.streams_subscription import member_subscription, parse_streams_subscription

GOLDEN = (Path(__file__).resolve().parents[1] / "tests" / "unit" / "protocol"
          / "streams_golden.json")
PROCESS = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
TAGS = {"cluster": "k8s-cluster1", "zone": "eu-central-1a"}


def _tasks(w: Writer, tasks: dict[str, list[int]]) -> None:
    w.array(len(tasks))
    for sub, parts in tasks.items():
        w.string(sub)
        w.array(len(parts))
        for p in parts:
            w.int32(p)
        w.tags()


def streams_describe_response(topology: bool = True) -> bytes:
    w = Writer(True)
    w.raw(struct.pack(">i", 11) + b"\x00")  # correlation id, response header tags
    w.int32(0)
    w.array(1)
    w.int16(0)
    w.string(None)
    w.string("wordcount")
    w.string("Stable")
    w.int32(5)
    w.int32(5)
    if topology:
        w.int8(1)
        w.int32(1)
        w.array(2)
        for sub, changelogs in (("0", ["wordcount-store-changelog"]), ("1", [])):
            w.string(sub)
            w.array(1)
            w.string("words")
            w.array(0)
            w.array(len(changelogs))
            for name in changelogs:
                w.string(name)
                w.int32(0)
                w.int16(0)
                w.array(1)
                w.string("cleanup.policy")
                w.string("compact")
                w.tags()
                w.tags()
            w.array(0)
            w.tags()
        w.tags()
    else:
        w.int8(-1)
    w.array(1)
    w.string("member-1")
    w.int32(5)
    w.string(None)
    w.string("eu-central-1a")
    w.string("client-1")
    w.string("/127.0.0.1")
    w.int32(1)
    w.string(PROCESS)
    w.int8(1)
    w.string("host-a")
    w.raw(struct.pack(">H", 8080))
    w.tags()
    w.array(2)
    for key, value in TAGS.items():
        w.string(key)
        w.string(value)
        w.tags()
    for _ in range(2):  # task offsets, task end offsets
        w.array(1)
        w.string("0")
        w.int32(3)
        w.raw(struct.pack(">q", 1234))
        w.tags()
    for _ in range(2):  # assignment, target assignment
        _tasks(w, {"0": [0, 1]})
        _tasks(w, {"0": [2], "1": [4]})
        _tasks(w, {})
        w.tags()
    w.boolean(False)
    w.tags()
    w.int32(-1)
    w.tags()
    w.tags()
    body = w.body()
    return struct.pack(">i", len(body)) + body


def streams_heartbeat_request(version: int = 1, joining: bool = True) -> bytes:
    """A StreamsGroupHeartbeat request frame, field by field from Kafka's
    StreamsGroupHeartbeatRequest.json: a joining member (epoch 0, with its topology,
    process id and tags) or a steady one (nulls: unchanged)."""
    w = Writer(True)
    client = b"node-1-StreamThread-1-consumer"
    w.raw(struct.pack(">hhih", 88, version, 5, len(client)) + client + b"\x00")
    w.string("wordcount")
    w.string("member-1")
    w.int32(0 if joining else 7)
    w.int32(0)
    w.string(None)
    w.string(None)
    w.int32(300000)
    if joining:
        w.int8(1)
        w.int32(0)
        w.array(1)
        w.string("0")
        w.array(1)
        w.string("words")
        w.array(0)
        w.array(1)
        w.string("wordcount-counts-changelog")
        w.int32(0)
        w.int16(3)
        w.array(0)
        w.tags()
        w.array(0)
        w.array(0)
        w.array(1)
        for _ in range(3):
            w.array(1)
            w.int16(0)
        w.tags()
        w.tags()
        w.tags()
    else:
        w.int8(-1)
    for _ in range(3):  # active, standby, warmup tasks
        if joining:
            w.array(0)
        else:
            w.array(None)
    w.string(PROCESS if joining else None)
    if joining:
        w.int8(1)
        w.string("host-a")
        w.raw(struct.pack(">H", 8080))
        w.tags()
    else:
        w.int8(-1)
    if joining:
        w.array(len(TAGS))
        for key, value in TAGS.items():
            w.string(key)
            w.string(value)
            w.tags()
    else:
        w.array(None)
    for _ in range(2):
        w.array(1)
        w.string("0")
        w.int32(2)
        w.raw(struct.pack(">q", 99))
        w.tags()
    w.boolean(False)
    w.tags()
    body = w.body()
    return struct.pack(">i", len(body)) + body


def _golden() -> dict[str, bytes]:
    doc = json.loads(GOLDEN.read_text())
    return {k: bytes.fromhex(v) for k, v in doc.items() if k != "latest"}


def _sync(version: int) -> Callable[[bytes], object]:
    def run(data: bytes) -> object:
        return read_sync_group_request(data, version, parse_request_header(data).body_offset)
    return run


def _heartbeat(version: int) -> Callable[[bytes], object]:
    def run(data: bytes) -> object:
        return read_heartbeat(data, version, parse_request_header(data).body_offset)
    return run


def _join_request(version: int) -> Callable[[bytes], object]:
    def run(data: bytes) -> object:
        return read_join_group_request(data, version, parse_request_header(data).body_offset)
    return run


def _join(version: int) -> Callable[[bytes], object]:
    return lambda data: read_join_group_response(data, version)


def _describe(version: int) -> Callable[[bytes], object]:
    return lambda data: read_describe_groups_response(data, version)


def streams_targets() -> list[Spec]:
    """(name, decoder, seeds) for every Streams decoder and version."""
    from kafka.protocol.admin import DescribeGroupsResponse
    from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse, SyncGroupRequest

    g = _golden()
    subs = [v for k, v in g.items() if k.startswith("subscription")]
    assigns = [v for k, v in g.items() if k.startswith("assignment")]
    sub, assign = g["envelope_subscription"], g["envelope_assignment"]
    out: list[Spec] = [
        ("streams subscription info", parse_streams_subscription, subs),
        ("streams assignment info", parse_streams_assignment, assigns),
        ("streams subscription envelope", member_subscription, [sub]),
        ("streams assignment envelope", member_assignment, [assign]),
        ("streams group describe v0", lambda d: read_response(d, 0),
         [streams_describe_response(True), streams_describe_response(False)]),
    ]
    for v in (0, 1):
        out.append((f"streams group heartbeat v{v}", _heartbeat(v),
                    [streams_heartbeat_request(v, True), streams_heartbeat_request(v, False)]))
    proto = JoinGroupRequest.JoinGroupRequestProtocol
    for v in range(10):
        frame = framed(JoinGroupRequest(
            version=v, group_id="app", session_timeout_ms=45000, rebalance_timeout_ms=300000,
            member_id="m-1", group_instance_id=None, protocol_type="consumer",
            protocols=[proto(name="stream", metadata=sub)], reason=None))
        out.append((f"join group request v{v}", _join_request(v), [frame]))
    member = JoinGroupResponse.JoinGroupResponseMember
    for v in range(10):
        frame = framed(JoinGroupResponse(
            version=v, throttle_time_ms=0, error_code=0, generation_id=7,
            protocol_type="consumer", protocol_name="stream", leader="m-1",
            skip_assignment=False, member_id="m-1",
            members=[member(member_id="m-1", group_instance_id=None, metadata=sub)]))
        out.append((f"join group response v{v}", _join(v), [frame]))
    item = SyncGroupRequest.SyncGroupRequestAssignment
    for v in range(6):
        frame = framed(SyncGroupRequest(
            version=v, group_id="app", generation_id=7, member_id="m-1",
            group_instance_id=None, protocol_type="consumer", protocol_name="stream",
            assignments=[item(member_id="m-1", assignment=assign)]))
        out.append((f"sync group request v{v}", _sync(v), [frame]))
    grp = DescribeGroupsResponse.DescribedGroup
    mem = grp.DescribedGroupMember
    for v in range(7):
        frame = framed(DescribeGroupsResponse(version=v, throttle_time_ms=0, groups=[
            grp(error_code=0, error_message=None, group_id="app", group_state="Stable",
                protocol_type="consumer", protocol_data="stream",
                members=[mem(member_id="m-1", group_instance_id=None, client_id="c",
                             client_host="/127.0.0.1", member_metadata=sub,
                             member_assignment=assign)])]))
        out.append((f"describe groups response v{v}", _describe(v), [frame]))
    return out
