"""protocol.consumer_subscription, protocol.join_group and protocol.consumer_group_heartbeat.

Invariants under test (kafka-python's schema classes as the oracle): a v3 subscription
without a rack gets one and is otherwise byte-identical; a v0-v2 one is raised to v3
only when allowed, decoding to the same topics, user data, owned partitions and
generation (the defaults where the old version had none); a subscription naming a rack,
an unknown version or trailing bytes stays as it came. A JoinGroup (v0-v9) is rewritten
only for protocol type "consumer" and a protocol the chooser names, and decodes to the
client's request but for those metadata; every other protocol's bytes stay. A joining
ConsumerGroupHeartbeat without a rack gets one, nothing else does. Malformed frames raise
ProtocolError and nothing else.
"""

from __future__ import annotations

import random
import struct

import pytest
from kafka.protocol.consumer import JoinGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Sub

from protocol.consumer_group_heartbeat import fill_heartbeat_rack
from protocol.consumer_subscription import parse_subscription, with_rack
from protocol.headers import parse_request_header
from protocol.join_group import fill_join_group_rack
from protocol.primitives import (
    ProtocolError,
    encode_array_len,
    encode_string,
    pack_int32,
)
from tests.unit.protocol._codec_checks import check_corruptions, with_size

RACK = "europe-west1-b"
OWNED = [Sub.TopicPartition(topic="orders", partitions=[0, 3])]


def subscription(version: int, rack: str | None = None, user_data: bytes | None = b"\x00\x07",
                 ) -> Sub:
    return Sub(version=version, topics=["orders", "é" * 40], user_data=user_data,
               owned_partitions=OWNED if version >= 1 else [],
               generation_id=9 if version >= 2 else -1, rack_id=rack)


def sub_bytes(sub: Sub) -> bytes:
    return bytes(sub.encode())


@pytest.mark.parametrize("user_data", [None, b"", b"u" * 300])
def test_v3_without_rack_gets_it(user_data: bytes | None) -> None:
    for none in (None, ""):
        data = sub_bytes(subscription(3, none, user_data))
        new = with_rack(data, RACK, upgrade=False)
        assert new == sub_bytes(subscription(3, RACK, user_data))
        assert Sub.decode(new).rack_id == RACK


@pytest.mark.parametrize("version", range(3))
def test_older_versions_rise_to_v3_only_when_allowed(version: int) -> None:
    data = sub_bytes(subscription(version))
    assert with_rack(data, RACK, upgrade=False) is None
    new = with_rack(data, RACK, upgrade=True)
    assert new is not None
    decoded = Sub.decode(new)
    old = Sub.decode(data)
    assert decoded.version == 3 and decoded.rack_id == RACK
    assert (decoded.topics, decoded.user_data) == (old.topics, old.user_data)
    assert decoded.owned_partitions == [Sub.TopicPartition(version=3, topic=t.topic,
                                                           partitions=t.partitions)
                                        for t in old.owned_partitions]
    assert decoded.generation_id == (9 if version >= 2 else -1)
    # what an old reader sees in it: the same message it was
    assert Sub.decode(new[2:], version=version, header=False) == Sub.decode(
        data[2:], version=version, header=False)


def test_left_alone() -> None:
    named = sub_bytes(subscription(3, "other"))
    assert with_rack(named, RACK, upgrade=True) is None
    assert parse_subscription(named) is not None
    for data in (named + b"\x00",  # trailing bytes: not a format we know
                 struct.pack(">h", 4) + named[2:],  # a future version
                 struct.pack(">h", -1) + named[2:],
                 named[:-3], b"", b"\x00"):
        assert with_rack(data, RACK, upgrade=True) is None
    bad_utf8 = sub_bytes(subscription(3, "ab"))[:-2] + b"\xff\xfe"
    assert with_rack(bad_utf8, RACK, upgrade=True) is None


def test_subscription_fuzz_never_raises() -> None:
    data = sub_bytes(subscription(2))
    rng = random.Random(3)
    for _ in range(2000):
        junk = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            junk[rng.randrange(len(junk))] = rng.randrange(256)
        with_rack(bytes(junk[:rng.randint(0, len(junk))]), RACK, upgrade=True)


# ----- JoinGroup

_Proto = JoinGroupRequest.JoinGroupRequestProtocol


def join(version: int, protocols: list[tuple[str, bytes]], protocol_type: str = "consumer"
         ) -> bytes:
    req = JoinGroupRequest(version=version, group_id="g" * 130, session_timeout_ms=10_000,
                           rebalance_timeout_ms=30_000, member_id="m-1",
                           group_instance_id="static-1", protocol_type=protocol_type,
                           protocols=[_Proto(name=n, metadata=m) for n, m in protocols],
                           reason="joining")
    req.with_header(correlation_id=5, client_id="c")
    return bytes(req.encode(header=True, framed=True))


def choose(name: str) -> bool | None:
    return {"range": True, "cooperative-sticky": True, "custom": False}.get(name)


def fill(data: bytes) -> bytes | None:
    header = parse_request_header(data)
    return fill_join_group_rack(memoryview(data), header.api_version, header.body_offset,
                                RACK, choose)


@pytest.mark.parametrize("version", range(10))
def test_join_group_fills_the_chosen_protocols(version: int) -> None:
    v0 = sub_bytes(subscription(0))
    v3 = sub_bytes(subscription(3))
    v3_named = sub_bytes(subscription(3, "us-1"))
    protocols = [("range", v0), ("custom", v0), ("custom", v3), ("stream", v3),
                 ("cooperative-sticky", v3_named), ("range", b"\x00")]
    data = join(version, protocols)
    filled = fill(data)
    assert filled is not None
    expected = [("range", with_rack(v0, RACK, True)), ("custom", v0),
                ("custom", with_rack(v3, RACK, False)), ("stream", v3),
                ("cooperative-sticky", v3_named), ("range", b"\x00")]
    assert filled == join(version, expected)  # byte for byte what kafka-python encodes


@pytest.mark.parametrize("version", range(10))
def test_join_group_left_alone(version: int) -> None:
    v3 = sub_bytes(subscription(3))
    assert fill(join(version, [("range", v3)], protocol_type="connect")) is None
    assert fill(join(version, [("stream", v3), ("range", b"")])) is None
    assert fill(join(version, [])) is None


@pytest.mark.parametrize("version", [0, 5, 6, 9])
def test_join_group_malformed(version: int) -> None:
    data = join(version, [("range", sub_bytes(subscription(1))), ("x", b"")])
    body = parse_request_header(data).body_offset
    for i in range(body, len(data)):
        with pytest.raises(ProtocolError):
            fill(with_size(data[4:i]))
    with pytest.raises(ProtocolError):
        fill(with_size(data[4:] + b"\x00"))
    with pytest.raises(ProtocolError):
        fill_join_group_rack(data, 10, body, RACK, choose)
    check_corruptions(fill, data)


# ----- ConsumerGroupHeartbeat (no kafka-python schema: the layout of Kafka's
# ConsumerGroupHeartbeatRequest.json v0-v1, written out here field by field)

def heartbeat(version: int, epoch: int, rack: str | None, instance: str | None = "i-1"
              ) -> bytes:
    body = b"".join((
        encode_string("group", True), encode_string("member-" * 5, True), pack_int32(epoch),
        encode_string(instance, True), encode_string(rack, True), pack_int32(45_000),
        encode_array_len(1, True), encode_string("orders", True),
        *((encode_string(None, True),) if version >= 1 else ()),  # SubscribedTopicRegex
        encode_string("uniform", True), encode_array_len(None, True), b"\x00"))
    header = struct.pack(">hhi", 68, version, 11) + struct.pack(">h", 1) + b"c" + b"\x00"
    return with_size(header + body)


def hb_fill(data: bytes) -> bytes | None:
    return fill_heartbeat_rack(memoryview(data), struct.unpack_from(">h", data, 6)[0], RACK)


@pytest.mark.parametrize("version", [0, 1])
def test_joining_heartbeat_gets_the_rack(version: int) -> None:
    for none in (None, ""):
        assert hb_fill(heartbeat(version, 0, none)) == heartbeat(version, 0, RACK)
        assert hb_fill(heartbeat(version, 0, none, None)) == heartbeat(version, 0, RACK, None)
    for epoch in (-2, -1, 1, 7):
        assert hb_fill(heartbeat(version, epoch, None)) is None
    assert hb_fill(heartbeat(version, 0, "mine")) is None


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_malformed(version: int) -> None:
    data = heartbeat(version, 0, None)
    body = 4 + 8 + 3 + 1
    rack_end = body + len(encode_string("group", True) + encode_string("member-" * 5, True)) \
        + 4 + len(encode_string("i-1", True)) + 1
    for i in range(16, rack_end):
        with pytest.raises(ProtocolError):
            hb_fill(with_size(data[4:i]))
    with pytest.raises(ProtocolError):
        fill_heartbeat_rack(data, 2, RACK)
    check_corruptions(hb_fill, data)
