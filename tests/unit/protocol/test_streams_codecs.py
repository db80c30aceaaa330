"""protocol.streams_subscription, protocol.streams_assignment, protocol.group_members and
protocol.streams_group_describe.

Oracles: golden bytes written by Kafka Streams 4.4's own classes
(``streams_golden.json``, made by tests/integration/java/StreamsWireGolden.java; the
integration test of that name checks the file against the jar), kafka-python's schema
classes for the group APIs, and StreamsGroupDescribe written field by field from
Kafka's StreamsGroupDescribeResponse.json. Invariants: every version 1-11 decodes to
what the Java program put in; unknown versions are opaque (None), never an error;
malformed bytes raise ProtocolError and nothing else.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from kafka.protocol.admin import DescribeGroupsResponse
from kafka.protocol.consumer import JoinGroupResponse, SyncGroupRequest

from benchmarks.fuzz_admin import framed
from benchmarks.fuzz_streams import streams_describe_response, streams_heartbeat_request
from protocol.group_members import (
    encode_describe_groups_request,
    read_describe_groups_response,
    read_join_group_response,
    read_sync_group_request,
)
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError
from protocol.streams_assignment import member_assignment, parse_streams_assignment
from protocol.streams_group_describe import encode_request, read_response
from protocol.streams_group_heartbeat import read_heartbeat
from protocol.streams_subscription import (
    TaskId,
    member_subscription,
    parse_streams_subscription,
)
from tests.unit.protocol._codec_checks import check_corruptions, ok_or_protocol_error

GOLDEN = json.loads((Path(__file__).parent / "streams_golden.json").read_text())
PROCESS = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
TAGS = {"cluster": "k8s-cluster1", "zone": "eu-central-1a"}


def golden(name: str) -> bytes:
    return bytes.fromhex(GOLDEN[name])


@pytest.mark.parametrize("version", range(1, 12))
def test_every_subscription_version_decodes_as_java_wrote_it(version: int) -> None:
    sub = parse_streams_subscription(golden(f"subscription_v{version}"))
    assert sub is not None
    assert sub.version == version
    assert sub.latest_supported == (11 if version >= 3 else -1)
    assert sub.process_id == PROCESS
    assert sub.user_endpoint == ("host-a:8080" if version >= 2 else None)
    assert sub.active == {TaskId(0, 0)}
    assert sub.state == {TaskId(0, 3), TaskId(1, 2)}
    assert sub.unique_field == (5 if version >= 8 else -1)
    assert sub.client_tags == (TAGS if version >= 11 else {})


def test_named_topologies_and_untagged_members() -> None:
    named = parse_streams_subscription(golden("subscription_named"))
    assert named is not None
    assert named.active == {TaskId(0, 0, "orders-topology")}
    assert str(TaskId(0, 0, "orders-topology")) == "orders-topology__0_0"
    untagged = parse_streams_subscription(golden("subscription_untagged"))
    assert untagged is not None and untagged.client_tags == {} and untagged.user_endpoint is None


@pytest.mark.parametrize("version", range(1, 12))
def test_every_assignment_version_decodes_as_java_wrote_it(version: int) -> None:
    a = parse_streams_assignment(golden(f"assignment_v{version}"))
    assert a is not None
    assert a.version == version
    assert a.active == (TaskId(0, 0), TaskId(1, 2))
    assert a.standby == (TaskId(0, 3), TaskId(1, 4))
    assert a.error_code == 0
    assert a.commonly_supported == (11 if version >= 3 else -1)


def test_the_consumer_envelopes() -> None:
    envelope, sub = member_subscription(golden("envelope_subscription"))
    assert envelope.version == 3 and envelope.topics == ("words",)
    assert envelope.rack == "eu-central-1a"
    assert sub is not None and sub.client_tags == TAGS
    a = member_assignment(golden("envelope_assignment"))
    assert a is not None and a.standby == (TaskId(0, 3), TaskId(1, 4))
    assert member_assignment(b"") is None


@pytest.mark.parametrize("version", [0, -1, 12, 1 << 30])
def test_unknown_versions_are_opaque(version: int) -> None:
    body = struct.pack(">i", version) + b"\x00" * 40
    assert parse_streams_subscription(body) is None
    assert parse_streams_assignment(body) is None


@pytest.mark.parametrize("name", ["subscription_v1", "subscription_v7", "subscription_v11",
                                  "subscription_named", "assignment_v2", "assignment_v5",
                                  "assignment_v11"])
def test_malformed_bytes_raise_protocol_error_only(name: str) -> None:
    data = golden(name)
    parse = parse_streams_subscription if name.startswith("sub") else parse_streams_assignment
    for i in range(4, len(data)):
        with pytest.raises(ProtocolError):
            parse(data[:i])
    with pytest.raises(ProtocolError):
        parse(data + b"\x00")
    check_corruptions(lambda d: parse(d[4:]), b"\x00" * 4 + data)


# ----- the group APIs around them

SUB = golden("envelope_subscription")
ASSIGN = golden("envelope_assignment")


@pytest.mark.parametrize("version", range(10))
def test_join_group_response_members(version: int) -> None:
    member = JoinGroupResponse.JoinGroupResponseMember
    frame = framed(JoinGroupResponse(
        version=version, throttle_time_ms=0, error_code=0, generation_id=7,
        protocol_type="consumer", protocol_name="stream", leader="m-1",
        skip_assignment=False, member_id="m-1",
        members=[member(member_id=f"m-{i}", group_instance_id=None, metadata=SUB)
                 for i in (1, 2)]))
    answer = read_join_group_response(frame, version)
    assert answer.protocol_name == "stream" and answer.leader == answer.member_id == "m-1"
    assert answer.generation == 7
    assert [m.member_id for m in answer.members] == ["m-1", "m-2"]
    assert all(m.metadata == SUB for m in answer.members)
    check_corruptions(lambda d: read_join_group_response(d, version), frame[:200])
    with pytest.raises(ProtocolError):
        read_join_group_response(frame[:-1], version)


@pytest.mark.parametrize("version", range(6))
def test_sync_group_request_assignments(version: int) -> None:
    item = SyncGroupRequest.SyncGroupRequestAssignment
    frame = framed(SyncGroupRequest(
        version=version, group_id="wordcount", generation_id=7, member_id="m-1",
        group_instance_id=None, protocol_type="consumer", protocol_name="stream",
        assignments=[item(member_id="m-1", assignment=ASSIGN),
                     item(member_id="m-2", assignment=b"")]))
    body = parse_request_header(frame).body_offset
    sync = read_sync_group_request(frame, version, body)
    assert sync.group_id == "wordcount" and sync.generation == 7
    assert sync.protocol_name == ("stream" if version >= 5 else None)
    assert sync.assignments == {"m-1": ASSIGN, "m-2": b""}
    with pytest.raises(ProtocolError):
        read_sync_group_request(frame[:-3], version, body)


@pytest.mark.parametrize("version", range(7))
def test_describe_groups(version: int) -> None:
    assert encode_describe_groups_request(["wordcount"], version)
    grp = DescribeGroupsResponse.DescribedGroup
    mem = grp.DescribedGroupMember
    frame = framed(DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=[
        grp(error_code=0, error_message=None, group_id="wordcount", group_state="Stable",
            protocol_type="consumer", protocol_data="stream",
            members=[mem(member_id="m-1", group_instance_id=None, client_id="c",
                         client_host="/127.0.0.1", member_metadata=SUB,
                         member_assignment=ASSIGN)])]))
    (group,) = read_describe_groups_response(frame, version)
    assert (group.group_id, group.state, group.protocol) == ("wordcount", "Stable", "stream")
    (m,) = group.members
    assert (m.metadata, m.assignment, m.client_host) == (SUB, ASSIGN, "/127.0.0.1")
    for i in range(4, len(frame)):
        with pytest.raises(ProtocolError):
            read_describe_groups_response(frame[:i], version)


# ----- StreamsGroupDescribe (KIP-1071), written from StreamsGroupDescribeResponse.json
#       (benchmarks/fuzz_streams.py, which seeds the fuzzer with it)

def test_streams_group_describe() -> None:
    assert encode_request(["wordcount"], 0).startswith(b"\x02\x0awordcount")
    frame = streams_describe_response()
    (group,) = read_response(frame, 0)
    assert group.group_id == "wordcount" and group.state == "Stable"
    assert group.stateful_subtopologies == {"0"}
    (m,) = group.members
    assert (m.rack_id, m.process_id, m.client_tags) == ("eu-central-1a", PROCESS, TAGS)
    assert m.active == {"0": (0, 1)} and m.standby == {"0": (2,), "1": (4,)}
    assert read_response(streams_describe_response(False), 0)[0].stateful_subtopologies is None
    for i in range(4, len(frame)):
        with pytest.raises(ProtocolError):
            read_response(frame[:i], 0)
    for i in range(8, len(frame)):
        data = bytearray(frame)
        data[i] ^= 0xFF
        ok_or_protocol_error(lambda d: read_response(d, 0), bytes(data))
    with pytest.raises(ProtocolError):
        read_response(frame, 1)


@pytest.mark.parametrize("version", [0, 1])
def test_streams_group_heartbeat(version: int) -> None:
    frame = streams_heartbeat_request(version, True)
    body = parse_request_header(frame).body_offset
    beat = read_heartbeat(frame, version, body)
    assert (beat.group_id, beat.member_epoch, beat.process_id) == ("wordcount", 0, PROCESS)
    assert beat.client_tags == TAGS and beat.rack_id is None
    steady = streams_heartbeat_request(version, False)
    assert read_heartbeat(steady, version, body).client_tags is None
    for i in range(body, len(frame)):
        with pytest.raises(ProtocolError):
            read_heartbeat(frame[:i], version, body)
    check_corruptions(lambda d: read_heartbeat(d, version, body), frame)
    with pytest.raises(ProtocolError):
        read_heartbeat(frame, 2, body)
