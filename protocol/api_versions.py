"""ApiVersions responses (api key 18), versions 0-4: capping the advertised
version ranges to what the proxy can parse.

Invariant: :func:`cap_api_versions` changes only the ``api_keys`` array:
entries for APIs the proxy does not know are removed, entries whose max
version is above the proxy's cap are lowered to the cap (or removed when the
broker's min version is above it), and every other byte -- error code, the
untouched entries and their tagged fields, throttle time, and the top-level
tagged fields (SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures,
ZkMigrationReady, and any tag this code does not know) -- is copied verbatim,
so it is byte-identical and therefore identical in meaning. The response
header is always v0 (no tagged fields), even for v3+. When a broker does not
support the request's version it answers UNSUPPORTED_VERSION (35) with a body
in v0 format; that body is detected and capped in v0 format.
Malformed input raises :class:`ProtocolError` only.

Why each entry of :data:`PROXY_VERSION_CAPS`:

* Produce (0) <= 13: the Produce walker understands request versions up to 13
  (v13 names topics by id); a newer Produce would be forwarded unchecked.
* Metadata (3) <= 13: the newest version the broker-address rewriter and the
  cluster-view reader parse.
* FindCoordinator (10) <= 6: coordinator addresses are rewritten; v0-v6 are
  the versions whose layout is known.
* DescribeCluster (60) <= 2: broker addresses are rewritten; v0-v2 known.
* CreateTopics (19) <= 7, DescribeConfigs (32) <= 4, AlterConfigs (33) <= 2,
  IncrementalAlterConfigs (44) <= 1: read for ``min.insync.racks``
  (docs/admin-configs.md); the versions whose layout is known. CreateTopics is also
  read by the placement guard.
* ApiVersions (18) <= 4: this module's own range.
* CreatePartitions (37) <= 3: the placement guard reads its explicit replica
  assignments (and CreateTopics'); these are the versions it knows.
* Fetch (1) <= 15: v16+ responses carry NodeEndpoints (leader addresses for
  leader changes) that would have to be rewritten; capping to 15 means the
  proxy never has to parse large fetch responses. librdkafka needs Fetch >= 4
  for record format v2, which 15 satisfies.
* SaslHandshake (17) <= 1 and SaslAuthenticate (36) <= 2: with SASL relayed, the
  proxy reads a handshake's mechanism name and an authentication answer's error
  code and token length (never a client's token) to know when the broker has
  authenticated the client; these are Kafka's newest versions today.
* DescribeQuorum (55) <= 1: v2+ responses carry node listener endpoints.
* ShareFetch (78) and ShareAcknowledge (79) are removed (cap -1): their
  responses carry NodeEndpoints that the proxy does not rewrite.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import NamedTuple

from protocol._wire import (
    as_view,
    check_frame,
    expect_end,
    finish_frame,
)
from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_array_len,
    need,
    read_array_len,
    read_int16,
    skip_tagged_fields,
)

API_KEY = 18
MAX_VERSION = 4
FLEXIBLE_FROM = 3
UNSUPPORTED_VERSION = 35

__all__ = ["PROXY_VERSION_CAPS", "VersionCap", "cap_api_versions", "read_api_versions"]

PROXY_VERSION_CAPS: Mapping[int, int] = MappingProxyType(
    {
        0: 13,  # Produce
        1: 15,  # Fetch: v16+ responses carry NodeEndpoints
        3: 13,  # Metadata
        10: 6,  # FindCoordinator
        17: 1,  # SaslHandshake: the mechanism name is read (v0 is refused where SASL is relayed)
        18: 4,  # ApiVersions
        36: 2,  # SaslAuthenticate: the broker's answers are read (error, token length)
        19: 7,  # CreateTopics: min.insync.racks and explicit assignments read (v0-v7 known)
        32: 4,  # DescribeConfigs: min.insync.racks added to answers (v0-v4 known)
        33: 2,  # AlterConfigs: min.insync.racks taken out (v0-v2 known)
        44: 1,  # IncrementalAlterConfigs: min.insync.racks taken out (v0-v1 known)
        37: 3,  # CreatePartitions: the placement guard reads v0-v3
        55: 1,  # DescribeQuorum: v2+ responses carry node endpoints
        60: 2,  # DescribeCluster
        78: -1,  # ShareFetch: removed (NodeEndpoints not rewritten)
        79: -1,  # ShareAcknowledge: removed (NodeEndpoints not rewritten)
    }
)
"""Max version per API key that the proxy lets clients use; -1 removes the API."""


class VersionCap(NamedTuple):
    """One change made to an ApiVersions response (a plain 4-tuple too)."""

    api_key: int
    broker_max: int
    new_max: int  # -1: the API was removed from the response
    broker_min: int


_ENTRY = struct.Struct(">hhh")


def _body_format(mv: memoryview, body: int, version: int) -> list[int]:
    """Versions to try for the body layout, most likely first."""
    error_code, _ = read_int16(mv, body)
    if error_code == UNSUPPORTED_VERSION and version > 0:
        return [0, version]
    return [version]


def _parse(
    mv: memoryview, body: int, fmt: int
) -> tuple[int, list[tuple[int, int, int, int, int]], int]:
    """(array start, entries as (key, min, max, start, end), array end) for layout ``fmt``."""
    compact = fmt >= FLEXIBLE_FROM
    n, pos = read_array_len(mv, body + 2, compact, nullable=False)
    array_start = pos
    entries = []
    for _ in range(n):
        need(mv, pos, 6)
        key, lo, hi = _ENTRY.unpack_from(mv, pos)
        end = pos + 6
        if compact:
            end = skip_tagged_fields(mv, end)
        entries.append((key, lo, hi, pos, end))
        pos = end
    array_end = pos
    if fmt >= 1:
        need(mv, pos, 4)
        pos += 4
    if compact:
        pos = skip_tagged_fields(mv, pos)
    expect_end(mv, pos)
    return array_start, entries, array_end


def _parse_any(
    mv: memoryview, body: int, version: int
) -> tuple[int, int, list[tuple[int, int, int, int, int]], int]:
    formats = _body_format(mv, body, version)
    error: ProtocolError | None = None
    for fmt in formats:
        try:
            return (fmt, *_parse(mv, body, fmt))
        except ProtocolError as exc:
            error = error or exc
    assert error is not None
    raise error


def read_api_versions(frame: Buffer, version: int) -> tuple[int, list[tuple[int, int, int]]]:
    """(error code, [(api key, min version, max version), ...]) of a response."""
    mv = as_view(frame)
    body = check_frame(mv, API_KEY, version, MAX_VERSION)
    _, _, entries, _ = _parse_any(mv, body, version)
    error_code, _ = read_int16(mv, body)
    return error_code, [(key, lo, hi) for key, lo, hi, _, _ in entries]


def cap_api_versions(
    frame: Buffer, version: int, caps: Mapping[int, int], known: Collection[int]
) -> tuple[bytes, list[tuple[int, int, int, int]]]:
    """Cap the advertised max versions to ``caps``; drop APIs not in ``known``.

    Returns the new frame and the changes as :class:`VersionCap` tuples
    ``(api key, broker max, new max or -1 if removed, broker min)``.
    """
    mv = as_view(frame)
    body = check_frame(mv, API_KEY, version, MAX_VERSION)
    fmt, _, entries, array_end = _parse_any(mv, body, version)
    changes: list[tuple[int, int, int, int]] = []
    out_entries: list[Buffer] = []
    kept = 0
    for key, lo, hi, start, end in entries:
        if key not in known:
            changes.append(VersionCap(key, hi, -1, lo))
            continue
        cap = caps.get(key)
        if cap is None or hi <= cap:
            out_entries.append(mv[start:end])
            kept += 1
        elif cap < 0 or lo > cap:
            changes.append(VersionCap(key, hi, -1, lo))
        else:
            changes.append(VersionCap(key, hi, cap, lo))
            out_entries.append(_ENTRY.pack(key, lo, cap))
            out_entries.append(mv[start + 6 : end])
            kept += 1
    if not changes:
        return bytes(mv), changes
    compact = fmt >= FLEXIBLE_FROM
    parts: list[Buffer] = [mv[4 : body + 2], encode_array_len(kept, compact)]
    parts.extend(out_entries)
    parts.append(mv[array_end:])
    return finish_frame(parts), changes


def unsupported_version_response(correlation_id: int, max_version: int = MAX_VERSION) -> bytes:
    """The v0-format answer a broker gives to an ApiVersions request it cannot parse.

    Error UNSUPPORTED_VERSION and one entry, ApiVersions itself with the versions the
    proxy reads, so the client retries with one of them (KIP-511's negotiation).
    """
    body = struct.pack(">hihhh", UNSUPPORTED_VERSION, 1, API_KEY, 0, max_version)
    return struct.pack(">ii", 4 + len(body), correlation_id) + body
