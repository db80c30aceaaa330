"""proxy.streams.watch: the JoinGroup and SyncGroup hooks read a Streams rebalance as it
passes and change no byte; the sidecar in front of the leader audits the application
(the KIP-708 example), a sidecar whose instance's zone tag is not its client_rack says
so, a sidecar whose instance stops leading drops the audit, and anything unreadable is
counted and forwarded as it came."""

from __future__ import annotations

import json
import struct
from typing import Any

from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse, SyncGroupRequest
from prometheus_client import CollectorRegistry, generate_latest

from benchmarks.fuzz_admin import framed
from benchmarks.fuzz_streams import streams_heartbeat_request
from protocol.streams_assignment import parse_streams_assignment
from protocol.streams_subscription import parse_streams_subscription
from proxy.relay.actions import ClientInfo, Forward
from proxy.streams.metrics import StreamsCollector, streams_document
from proxy.streams.watch import StreamsWatch
from tests.prometheus_text import Samples, parse_samples, sample
from tests.unit.protocol.test_streams_codecs import golden
from tests.unit.streams._wire import (
    assignment_info,
    member_assignment,
    member_metadata,
    subscription_info,
)

ZONES = ("eu-central-1a", "eu-central-1b", "eu-central-1c")
CLUSTERS = ("k8s-cluster1", "k8s-cluster2", "k8s-cluster3")
CLIENT = ClientInfo("127.0.0.1:5555", "bootstrap")
APP = "wordcount"


def test_wire_writers_match_kafka_streams() -> None:
    sub = subscription_info("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
                            {"cluster": "k8s-cluster1", "zone": "eu-central-1a"},
                            {"0_0": -2, "0_3": 1234, "1_2": 7}, "host-a:8080", 5)
    assert sub == golden("subscription_v11")
    a = parse_streams_assignment(assignment_info(["0_0"], ["0_3"]))
    assert a is not None and [str(t) for t in a.standby] == ["0_3"]


def process(n: int) -> str:
    return f"00000000-0000-0000-0000-{n:012d}"


def tags(n: int, copied: dict[int, str] | None = None) -> dict[str, str]:
    c, z = (n - 1) // 3, (n - 1) % 3
    return {"cluster": CLUSTERS[c], "zone": (copied or {}).get(n, ZONES[z])}


def kip_assignments() -> dict[int, tuple[list[str], list[str]]]:
    """node -> (active, standby) tasks: task t active on (c, z), standbys on (c+1, z+1)
    and (c+2, z+2) (node = 3c + z + 1)."""
    out: dict[int, tuple[list[str], list[str]]] = {n: ([], []) for n in range(1, 10)}
    for t in range(12):
        c, z = t % 3, (t // 3) % 3
        for k in range(3):
            node = 3 * ((c + k) % 3) + (z + k) % 3 + 1
            out[node][0 if k == 0 else 1].append(f"0_{t}")
    return out


def join_request(n: int, version: int = 9, copied: dict[int, str] | None = None) -> bytes:
    info = subscription_info(process(n), tags(n, copied), {})
    proto = JoinGroupRequest.JoinGroupRequestProtocol
    return framed(JoinGroupRequest(
        version=version, group_id=APP, session_timeout_ms=45000, rebalance_timeout_ms=300000,
        member_id=f"m-{n}", group_instance_id=None, protocol_type="consumer",
        protocols=[proto(name="stream", metadata=member_metadata(info))], reason=None))


def join_response(n: int, leader: bool, version: int = 9, generation: int = 3,
                  copied: dict[int, str] | None = None) -> bytes:
    member = JoinGroupResponse.JoinGroupResponseMember
    members = [member(member_id=f"m-{i}", group_instance_id=None,
                      metadata=member_metadata(subscription_info(process(i),
                                                                 tags(i, copied), {})))
               for i in range(1, 10)] if leader else []
    return framed(JoinGroupResponse(
        version=version, throttle_time_ms=0, error_code=0, generation_id=generation,
        protocol_type="consumer", protocol_name="stream", leader="m-1", skip_assignment=False,
        member_id=f"m-{n}", members=members))


def sync_request(generation: int = 3, version: int = 5,
                 plan: dict[int, tuple[list[str], list[str]]] | None = None) -> bytes:
    item = SyncGroupRequest.SyncGroupRequestAssignment
    plan = plan or kip_assignments()
    return framed(SyncGroupRequest(
        version=version, group_id=APP, generation_id=generation, member_id="m-1",
        group_instance_id=None, protocol_type="consumer", protocol_name="stream",
        assignments=[item(member_id=f"m-{n}", assignment=member_assignment(
            assignment_info(*plan[n]))) for n in range(1, 10)]))


def through(watch: StreamsWatch, request: bytes, response: bytes | None = None,
            api_key: int = 11, version: int = 9) -> None:
    hook = watch.join_group if api_key == 11 else watch.sync_group
    action = hook(CLIENT, memoryview(request), api_key, version, 7)
    assert isinstance(action, Forward)
    assert bytes(action.frame) == request  # never a byte changed
    if response is not None and action.transform is not None:
        assert bytes(action.transform(memoryview(response), version)) == response  # type: ignore[arg-type]


def scrape(watch: StreamsWatch) -> Samples:
    registry = CollectorRegistry()
    registry.register(StreamsCollector(watch))
    return parse_samples(generate_latest(registry).decode())


def test_the_leaders_sidecar_audits_the_kip_example() -> None:
    watch = StreamsWatch(ZONES[0], "zone", ("zone", "cluster"))
    through(watch, join_request(1), join_response(1, leader=True))
    through(watch, sync_request(), api_key=14, version=5)
    report = watch.audits[APP]
    assert report.fully_spread == 12 and len(report.tasks) == 12
    got = scrape(watch)
    for dim in ("zone", "cluster"):
        assert sample(got, "rackguard_streams_tasks", app=APP, dimension=dim,
                      spread="full") == 12
        assert sample(got, "rackguard_streams_tasks", app=APP, dimension=dim,
                      spread="same") == 0
    assert sample(got, "rackguard_streams_untagged_instances", app=APP) == 0
    assert sample(got, "rackguard_streams_ideal_possible", app=APP) == 1
    assert sample(got, "rackguard_streams_sidecar_instances", app=APP,
                  zone_tag="matches") == 1
    assert sample(got, "rackguard_streams_task_verdicts", app=APP, verdict="full") == 12
    doc = json.loads(streams_document(watch))
    assert doc["audits"][APP]["tasks_fully_spread"] == 12
    assert doc["members"][0]["process_id"] == process(1)


def test_a_member_that_is_not_leader_gives_no_audit_and_drops_an_old_one() -> None:
    watch = StreamsWatch(ZONES[0], "zone", ())
    through(watch, join_request(1), join_response(1, leader=True))
    through(watch, sync_request(), api_key=14, version=5)
    assert APP in watch.audits
    through(watch, join_request(1), join_response(1, leader=False, generation=4))
    assert APP not in watch.audits
    # a SyncGroup of a generation it holds no metadata for is not audited
    through(watch, sync_request(generation=4), api_key=14, version=5)
    assert APP not in watch.audits


def test_a_copied_zone_tag_is_reported_by_the_instances_sidecar() -> None:
    copied = {3: ZONES[0]}  # node 3 runs in zone c, its configuration says zone a
    watch = StreamsWatch(ZONES[2], "zone", ())
    through(watch, join_request(3, copied=copied), join_response(3, leader=False))
    (own,) = watch.own.values()
    assert own.zone_state == "differs" and own.zone_tag == ZONES[0]
    got = scrape(watch)
    assert sample(got, "rackguard_streams_sidecar_instances", app=APP,
                  zone_tag="differs") == 1


def test_unreadable_data_is_counted_and_forwarded() -> None:
    watch = StreamsWatch(None, "zone", ())
    bad = bytearray(join_request(1))
    bad[-30:] = b"\xff" * 30
    through(watch, bytes(bad))
    assert watch.unreadable == 1
    through(watch, join_request(1), join_response(1, leader=True))
    # assignments of an unknown AssignmentInfo version: the member is skipped, counted
    item = SyncGroupRequest.SyncGroupRequestAssignment
    frame = framed(SyncGroupRequest(
        version=5, group_id=APP, generation_id=3, member_id="m-1", group_instance_id=None,
        protocol_type="consumer", protocol_name="stream",
        assignments=[item(member_id=f"m-{n}",
                          assignment=member_assignment(struct.pack(">i", 99) + b"\x00" * 8))
                     for n in range(1, 10)]))
    through(watch, frame, api_key=14, version=5)
    assert watch.unreadable == 1  # members are still read; their tasks are unknown
    assert watch.audits[APP].tasks == ()


def test_other_groups_and_protocols_are_left_alone() -> None:
    watch = StreamsWatch(ZONES[0], "zone", ())
    proto = JoinGroupRequest.JoinGroupRequestProtocol
    frame = framed(JoinGroupRequest(
        version=9, group_id="consumers", session_timeout_ms=45000, rebalance_timeout_ms=1,
        member_id="", group_instance_id=None, protocol_type="consumer",
        protocols=[proto(name="range", metadata=member_metadata(b""))], reason=None))
    action: Any = watch.join_group(CLIENT, memoryview(frame), 11, 9, 1)
    assert action.transform is None and watch.own == {}
    assert parse_streams_subscription(subscription_info(process(1), {}, {})) is not None


def test_a_kip1071_member_behind_the_sidecar_is_checked_from_its_heartbeat() -> None:
    watch = StreamsWatch(ZONES[2], "zone", ())  # the member's tags say eu-central-1a
    for joining in (True, False):
        frame = streams_heartbeat_request(1, joining)
        action = watch.streams_group_heartbeat(CLIENT, memoryview(frame), 88, 1, 5)
        assert isinstance(action, Forward) and bytes(action.frame) == frame
    (own,) = watch.own.values()  # the steady heartbeat (tags unchanged: null) changes nothing
    assert own.group == APP and own.zone_state == "differs"
    assert own.client_id == "node-1-StreamThread-1-consumer"
    bad = streams_heartbeat_request(1, True)[:-5]
    watch.streams_group_heartbeat(CLIENT, memoryview(bad), 88, 1, 5)
    assert watch.unreadable == 1
