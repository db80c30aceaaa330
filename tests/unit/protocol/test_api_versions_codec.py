"""ApiVersions response codec: version capping, checked against kafka-python's
codec for every version 0-4, including the v0-format UNSUPPORTED_VERSION answer."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsResponse

from protocol.api_versions import (
    PROXY_VERSION_CAPS,
    VersionCap,
    cap_api_versions,
    read_api_versions,
)
from protocol.apis import API_NAMES
from protocol.primitives import ProtocolError
from tests.unit.protocol._codec_checks import (
    check_corruptions,
    check_truncations,
    ok_or_protocol_error,
    with_size,
)

_A = ApiVersionsResponse
KNOWN = API_NAMES.keys()

BROKER = [
    (0, 3, 12),  # Produce: under the cap, unchanged
    (1, 4, 17),  # Fetch: capped to 15
    (3, 0, 13),  # Metadata: at the cap
    (10, 0, 6),
    (18, 0, 4),
    (55, 2, 2),  # DescribeQuorum: min above the cap -> removed
    (57, 0, 1),  # UpdateFeatures: not capped
    (60, 0, 2),
    (78, 1, 1),  # ShareFetch: removed
    (79, 1, 1),  # ShareAcknowledge: removed
    (200, 0, 1),  # unknown to the proxy: removed
]
EXPECTED = [(0, 3, 12), (1, 4, 15), (3, 0, 13), (10, 0, 6), (18, 0, 4), (57, 0, 1), (60, 0, 2)]
EXPECTED_CHANGES = [
    VersionCap(1, 17, 15, 4),
    VersionCap(55, 2, -1, 2),
    VersionCap(78, 1, -1, 1),
    VersionCap(79, 1, -1, 1),
    VersionCap(200, 1, -1, 0),
]


def encode(
    version: int,
    keys: list[tuple[int, int, int]],
    error_code: int = 0,
    features: bool = True,
    corr: int = 11,
) -> bytes:
    kwargs: dict[str, Any] = {}
    if version >= 3 and features:
        kwargs = dict(
            supported_features=[
                _A.SupportedFeatureKey(name="metadata.version", min_version=1, max_version=27),
                _A.SupportedFeatureKey(name="kraft.version", min_version=0, max_version=1),
            ],
            finalized_features_epoch=1234,
            finalized_features=[
                _A.FinalizedFeatureKey(
                    name="metadata.version", max_version_level=21, min_version_level=21
                )
            ],
            zk_migration_ready=True,
        )
    resp = _A(
        version=version,
        error_code=error_code,
        api_keys=[_A.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in keys],
        throttle_time_ms=77,
        **kwargs,
    )
    resp.with_header(correlation_id=corr)
    return bytes(resp.encode(header=True, framed=True))


def decode(frame: bytes, version: int) -> Any:
    return _A.decode(frame, version=version, header=True, framed=True)


def keys_of(resp: Any) -> list[tuple[int, int, int]]:
    return [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("features", [True, False])
def test_cap_matches_oracle(version: int, features: bool) -> None:
    frame = encode(version, BROKER, features=features)
    out, changes = cap_api_versions(memoryview(frame), version, PROXY_VERSION_CAPS, KNOWN)
    assert changes == EXPECTED_CHANGES
    assert [tuple(c) for c in changes] == [tuple(c) for c in EXPECTED_CHANGES]
    expected = decode(frame, version)
    expected.api_keys = [k for k in expected.api_keys if (k.api_key, k.min_version) in
                         {(a, b) for a, b, _ in EXPECTED}]
    for k in expected.api_keys:
        if k.api_key == 1:
            k.max_version = 15
    got = decode(out, version)
    assert got == expected
    assert keys_of(got) == EXPECTED
    assert got.header.correlation_id == 11
    if version >= 3 and features:
        assert got.finalized_features_epoch == 1234
        assert got.zk_migration_ready is True
        assert [f.name for f in got.supported_features] == ["metadata.version", "kraft.version"]
        # the top-level tagged fields are copied verbatim
        assert out.endswith(frame[-60:])
    assert read_api_versions(out, version) == (0, EXPECTED)


@pytest.mark.parametrize("version", range(5))
def test_nothing_to_cap_returns_identical_bytes(version: int) -> None:
    frame = encode(version, EXPECTED)
    out, changes = cap_api_versions(frame, version, PROXY_VERSION_CAPS, KNOWN)
    assert changes == []
    assert out == frame


@pytest.mark.parametrize("version", range(1, 5))
def test_unsupported_version_answer_is_v0_format(version: int) -> None:
    keys = [(18, 0, 9), (250, 0, 1)]
    frame = encode(0, keys, error_code=35)
    out, changes = cap_api_versions(frame, version, PROXY_VERSION_CAPS, KNOWN)
    assert changes == [VersionCap(18, 9, 4, 0), VersionCap(250, 1, -1, 0)]
    got = decode(out, version)  # kafka-python falls back to v0 on an error
    assert got.error_code == 35
    assert keys_of(got) == [(18, 0, 4)]
    assert out == encode(0, [(18, 0, 4)], error_code=35)
    assert read_api_versions(out, version) == (35, [(18, 0, 4)])


def test_other_errors_use_the_request_version() -> None:
    frame = encode(3, [(18, 0, 9)], error_code=42)  # INVALID_REQUEST, v3 layout
    out, changes = cap_api_versions(frame, 3, PROXY_VERSION_CAPS, KNOWN)
    assert changes == [VersionCap(18, 9, 4, 0)]
    assert read_api_versions(out, 3) == (42, [(18, 0, 4)])
    assert out[-60:] == frame[-60:]


def test_header_is_v0_even_when_flexible() -> None:
    frame = encode(3, [(18, 0, 3)], features=False, corr=0x01020304)
    # size, correlation id, then directly the error code (no header tagged fields)
    assert frame[4:10] == bytes.fromhex("01020304" "0000")


def test_golden_v3() -> None:
    body = bytes.fromhex(
        "00000001"  # correlation id (header v0)
        "0000"  # error code
        "03"  # 2 api keys
        "0001" "0000" "0011" "00"  # Fetch 0..17, no tags
        "004e" "0000" "0001" "00"  # ShareFetch 0..1
        "00000000"  # throttle
        "01" "03" "01" "01"  # tagged fields: ZkMigrationReady = true
    )
    out, changes = cap_api_versions(with_size(body), 3, PROXY_VERSION_CAPS, KNOWN)
    assert changes == [(1, 17, 15, 0), (78, 1, -1, 0)]
    assert out == with_size(bytes.fromhex(
        "00000001" "0000" "02" "0001" "0000" "000f" "00" "00000000" "01030101"
    ))


def test_entry_tagged_fields_survive_capping() -> None:
    body = bytes.fromhex(
        "00000001" "0000" "02"
        "0001" "0000" "0011" "01" "05" "02" "abcd"  # Fetch with an unknown tag 5
        "00000000" "00"
    )
    out, _ = cap_api_versions(with_size(body), 3, PROXY_VERSION_CAPS, KNOWN)
    assert out == with_size(body.replace(bytes.fromhex("0011"), bytes.fromhex("000f")))


def test_custom_caps() -> None:
    frame = encode(2, [(0, 3, 12), (3, 0, 13)])
    out, changes = cap_api_versions(frame, 2, {0: 2, 3: 13}, KNOWN)
    assert changes == [VersionCap(0, 12, -1, 3)]
    assert read_api_versions(out, 2) == (0, [(3, 0, 13)])


@pytest.mark.parametrize("version", range(5))
def test_malformed_raises_protocol_error(version: int) -> None:
    frame = encode(version, BROKER[:4])

    def fn(b: bytes) -> object:
        return cap_api_versions(b, version, PROXY_VERSION_CAPS, KNOWN)

    check_truncations(fn, frame, strict=True)
    check_truncations(lambda b: read_api_versions(b, version), frame, strict=True)
    check_corruptions(fn, frame)
    for bad in (-1, 5):
        with pytest.raises(ProtocolError):
            cap_api_versions(frame, bad, PROXY_VERSION_CAPS, KNOWN)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 4))
def test_garbage_raises_protocol_error_only(data: bytes, version: int) -> None:
    def fn(b: bytes) -> object:
        return cap_api_versions(b, version, PROXY_VERSION_CAPS, KNOWN)

    ok_or_protocol_error(fn, data)
    ok_or_protocol_error(fn, with_size(data))
    ok_or_protocol_error(fn, with_size(struct.pack(">ih", 1, 35) + data))


_key = st.tuples(st.integers(0, 300), st.integers(0, 20), st.integers(0, 20))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 4),
    st.lists(_key, max_size=30),
    st.dictionaries(st.integers(0, 300), st.integers(-1, 20), max_size=20),
    st.booleans(),
)
def test_roundtrip_random(
    version: int, keys: list[tuple[int, int, int]], caps: dict[int, int], features: bool
) -> None:
    frame = encode(version, keys, features=features)
    out, changes = cap_api_versions(frame, version, caps, KNOWN)
    expected: list[tuple[int, int, int]] = []
    expected_changes = []
    for k, lo, hi in keys:
        cap = caps.get(k)
        if k not in API_NAMES or (cap is not None and hi > cap and (cap < 0 or lo > cap)):
            expected_changes.append(VersionCap(k, hi, -1, lo))
        elif cap is not None and hi > cap:
            expected_changes.append(VersionCap(k, hi, cap, lo))
            expected.append((k, lo, cap))
        else:
            expected.append((k, lo, hi))
    assert changes == expected_changes
    got = decode(out, version)
    assert keys_of(got) == expected
    original = decode(frame, version)
    original.api_keys = got.api_keys
    assert got == original
