"""Reads one Streams application's group from a live cluster, for ``rackguard streams
audit``: the group's coordinator (FindCoordinator), then StreamsGroupDescribe where the
broker offers it (KIP-1071 streams groups) and DescribeGroups for a classic group; and
the sidecars' ``/streams`` documents, which tell the zone each instance's sidecar runs in.

Invariant: read-only, one blocking connection at a time with a timeout, PLAINTEXT only;
the proxy's serving path never imports it. Failures raise :class:`LiveError` naming
the step and the address.
"""

from __future__ import annotations

import json
import socket
import struct
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol._message import Reader
from protocol.api_versions import read_api_versions
from protocol.group_members import (
    encode_describe_groups_request,
    read_describe_groups_response,
)
from protocol.primitives import ProtocolError, encode_string
from protocol.streams_group_describe import API_KEY as STREAMS_DESCRIBE
from protocol.streams_group_describe import encode_request, read_response
from proxy.streams.model import MemberData
from proxy.streams.sources import classic_members, streams_group_members

CLIENT_ID = "rackguard-streams-audit"
API_VERSIONS, FIND_COORDINATOR, DESCRIBE_GROUPS = 18, 10, 15
DESCRIBE_GROUPS_VERSION = 5
GROUP_ID_NOT_FOUND = 69  # also the answer for a group of another type


class LiveError(RuntimeError):
    """The cluster or a sidecar could not be read; the message says where and why."""


@dataclass(slots=True)
class GroupRead:
    protocol: str  # "classic" or "streams"
    state: str
    members: list[MemberData] = field(default_factory=list)
    stateful: frozenset[str] = frozenset()
    skipped: int = 0


class _Conn:
    def __init__(self, address: str, timeout: float) -> None:
        host, _, port = address.rpartition(":")
        self.address = address
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        except (OSError, ValueError) as exc:
            raise LiveError(f"{address}: cannot connect: {exc}") from None
        self.corr = 0

    def ask(self, api_key: int, version: int, body: bytes, flexible: bool) -> bytes:
        self.corr += 1
        head = struct.pack(">hhi", api_key, version, self.corr) + encode_string(CLIENT_ID,
                                                                               False)
        frame = head + (b"\x00" if flexible else b"") + body
        try:
            self.sock.sendall(struct.pack(">i", len(frame)) + frame)
            size = struct.unpack(">i", self._read(4))[0]
            answer = self._read(size)
        except OSError as exc:
            raise LiveError(f"{self.address}: api {api_key}: {exc}") from None
        return struct.pack(">i", size) + answer

    def _read(self, n: int) -> bytes:
        parts, left = [], n
        while left:
            chunk = self.sock.recv(min(left, 1 << 20))
            if not chunk:
                raise OSError("connection closed")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        self.sock.close()


def _coordinator(conn: _Conn, group: str) -> str:
    frame = conn.ask(FIND_COORDINATOR, 2, encode_string(group, False) + b"\x00", False)
    r = Reader(frame, 8, False)
    r.int32()
    error = r.int16()
    message = r.nullable_string()
    node, host, port = r.int32(), r.string(), r.int32()
    if error:
        raise LiveError(f"{conn.address}: FindCoordinator for group {group!r}: error {error}"
                        f"{': ' + message if message else ''}")
    del node
    return f"{host}:{port}"


def read_group(bootstrap: str, group: str, protocol: str = "auto", timeout: float = 10.0
               ) -> GroupRead:
    """The group's members with their Streams data. ``protocol``: auto (streams where
    the coordinator offers StreamsGroupDescribe and knows the group, else classic),
    classic or streams."""
    first = _Conn(bootstrap.split(",")[0].strip(), timeout)
    try:
        address = _coordinator(first, group)
    except ProtocolError as exc:
        raise LiveError(f"{bootstrap}: bad FindCoordinator answer: {exc}") from None
    finally:
        first.close()
    conn = _Conn(address, timeout)
    try:
        _, apis = read_api_versions(conn.ask(API_VERSIONS, 0, b"", False), 0)
        offered = {key: hi for key, _lo, hi in apis}
        if protocol in ("auto", "streams") and STREAMS_DESCRIBE in offered:
            found = _streams(conn, group)
            if found is not None or protocol == "streams":
                if found is None:
                    raise LiveError(f"{address}: group {group!r} is not a streams group")
                return found
        elif protocol == "streams":
            raise LiveError(f"{address}: the broker offers no StreamsGroupDescribe (KIP-1071)")
        return _classic(conn, group)
    except ProtocolError as exc:
        raise LiveError(f"{address}: bad answer: {exc}") from None
    finally:
        conn.close()


def _streams(conn: _Conn, group: str) -> GroupRead | None:
    frame = conn.ask(STREAMS_DESCRIBE, 0, encode_request([group], 0), True)
    (described,) = read_response(frame, 0)
    if described.error_code == GROUP_ID_NOT_FOUND:
        return None
    if described.error_code:
        raise LiveError(f"{conn.address}: StreamsGroupDescribe {group!r}: error "
                        f"{described.error_code} {described.error_message or ''}".rstrip())
    members, stateful = streams_group_members(described)
    return GroupRead("streams", described.state, members, stateful)


def _classic(conn: _Conn, group: str) -> GroupRead:
    frame = conn.ask(DESCRIBE_GROUPS, DESCRIBE_GROUPS_VERSION,
                     encode_describe_groups_request([group], DESCRIBE_GROUPS_VERSION), True)
    (described,) = read_describe_groups_response(frame, DESCRIBE_GROUPS_VERSION)
    if described.error_code:
        raise LiveError(f"{conn.address}: DescribeGroups {group!r}: error "
                        f"{described.error_code}")
    if described.state in ("Dead", "Empty") or not described.members:
        raise LiveError(f"{conn.address}: group {group!r} has no members ({described.state})")
    if described.state != "Stable":
        raise LiveError(f"{conn.address}: group {group!r} is {described.state}: a classic "
                        "group shows its members' data only while Stable; try again")
    if described.protocol != "stream":
        raise LiveError(f"{conn.address}: group {group!r} uses assignor "
                        f"{described.protocol!r}, not Kafka Streams' \"stream\"")
    decoded = classic_members(
        {m.member_id: m.metadata for m in described.members},
        {m.member_id: m.assignment for m in described.members},
        {m.member_id: m.client_id for m in described.members})
    return GroupRead("classic", described.state, decoded.members, skipped=decoded.skipped)


Fetch = Callable[[str, float], Any]


def _fetch_json(url: str, timeout: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 - operator's URL
        return json.loads(answer.read())


def sidecar_rows(urls: list[str], timeout: float = 5.0, fetch: Fetch = _fetch_json
                 ) -> list[dict[str, Any]]:
    """The ``members`` rows of each sidecar's ``/streams`` document."""
    rows: list[dict[str, Any]] = []
    for url in urls:
        target = url.rstrip("/")
        if not target.endswith("/streams"):
            target += "/streams"
        try:
            doc = fetch(target, timeout)
        except (OSError, ValueError) as exc:
            raise LiveError(f"--sidecar {url}: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("members"), list):
            raise LiveError(f"--sidecar {url}: not a rackguard /streams document")
        rows.extend(r for r in doc["members"] if isinstance(r, dict))
    return rows
