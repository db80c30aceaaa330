"""The sidecar's view of Kafka Streams rebalances (classic protocol): request hooks on
JoinGroup and SyncGroup that read, never change, what passes.

- A JoinGroup request of a ``stream`` member behind this proxy: its process id and
  client tags, and whether its zone tag (``streams_zone_tag``) is the zone this proxy
  runs in (``client_rack``): the one place a configuration copied from another zone
  shows, since Kafka Streams will not start without the tag and the proxy cannot set it.
- The JoinGroup response to that member: when it is the group leader, every member's
  metadata (kept until the leader's SyncGroup); when it is not, any audit this proxy
  held for the group is dropped (the leader moved).
- A StreamsGroupHeartbeat request (KIP-1071 streams groups) of a member behind this
  proxy that names its process id and client tags (when joining, or when they change):
  the same zone check as for a JoinGroup. The broker assigns these groups, so their
  audit is the command's (StreamsGroupDescribe), not the sidecar's.
- The leader's SyncGroup request: every member's assignment. With the metadata of the
  same generation it makes the application's audit (:func:`~proxy.streams.audit.audit`),
  which replaces the last one whole.

Invariants: the frames are forwarded as they came (``Forward(frame)``), whatever is in
them; anything unreadable (a malformed frame, a version of Streams' data not known) is
counted and skipped, never an error on the client's connection. Work happens per
rebalance, never per fetch or produce. State is replaced whole (``own``, ``audits``), so
the scrape thread reads a consistent snapshot without a lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from protocol.group_members import (
    JOIN_GROUP_MAX,
    SYNC_GROUP_MAX,
    read_join_group_request,
    read_join_group_response,
    read_sync_group_request,
)
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError
from protocol.streams_group_heartbeat import MAX_VERSION as HEARTBEAT_MAX
from protocol.streams_group_heartbeat import read_heartbeat
from protocol.streams_subscription import STREAM_PROTOCOL
from proxy.relay.actions import Action, ClientInfo, Forward
from proxy.streams.audit import AppAudit, audit
from proxy.streams.model import app_from_members
from proxy.streams.sources import classic_member, classic_members

log = logging.getLogger("rackguard.streams")

JOIN_GROUP, SYNC_GROUP, STREAMS_GROUP_HEARTBEAT = 11, 14, 88
CONSUMER = "consumer"


@dataclass(frozen=True, slots=True)
class OwnInstance:
    """A Streams instance behind this proxy, as its last JoinGroup said."""

    group: str
    process_id: str
    client_id: str
    tags: dict[str, str]
    zone_tag: str | None  # its value of streams_zone_tag (None: it has none)
    client_rack: str | None
    member_id: str = ""

    @property
    def zone_state(self) -> str:
        """matches, differs, missing (no zone tag) or unknown (no client_rack)."""
        if self.client_rack is None:
            return "unknown"
        if self.zone_tag is None:
            return "missing"
        return "matches" if self.zone_tag == self.client_rack else "differs"


@dataclass(frozen=True, slots=True)
class _Pending:
    generation: int
    metadata: dict[str, bytes]


class StreamsWatch:
    def __init__(self, client_rack: str | None, zone_tag: str, dimensions: tuple[str, ...],
                 clock: Callable[[], float] = time.time) -> None:
        self.client_rack = client_rack
        self.zone_tag = zone_tag
        self.dimensions = dimensions
        self._clock = clock
        self.own: dict[tuple[str, str], OwnInstance] = {}
        self.audits: dict[str, AppAudit] = {}
        self.audited_at: dict[str, float] = {}
        self.audits_done: dict[str, int] = {}
        self.unreadable = 0
        self._pending: dict[str, _Pending] = {}

    # ----- JoinGroup
    def join_group(self, client: ClientInfo, frame: memoryview, api_key: int,
                   api_version: int, corr: int) -> Action:
        if api_version > JOIN_GROUP_MAX:
            return Forward(frame)
        try:
            request = read_join_group_request(frame, api_version,
                                              parse_request_header(frame).body_offset)
        except ProtocolError:
            self.unreadable += 1
            return Forward(frame)
        if request.protocol_type != CONSUMER:
            return Forward(frame)
        metadata = next((m for name, m in request.protocols if name == STREAM_PROTOCOL), None)
        if metadata is None:
            return Forward(frame)
        member = classic_member(request.member_id, metadata, None)
        if member is None:
            self.unreadable += 1
            return Forward(frame)
        group = request.group_id
        key = (group, member.process_id)
        self._own(client, group, member.process_id, dict(member.tags), request.member_id,
                  parse_request_header(frame).client_id or "")

        def joined(answer: memoryview, version: int) -> memoryview:
            self._joined(key, answer, version)
            return answer

        return Forward(frame, True, joined)

    def _own(self, client: ClientInfo, group: str, process: str, tags: dict[str, str],
             member_id: str, client_id: str) -> None:
        key = (group, process)
        own = OwnInstance(group, process, client_id, tags, tags.get(self.zone_tag),
                          self.client_rack, member_id)
        before = self.own.get(key)
        self.own = {**self.own, key: own}
        if own.zone_state == "differs" and (before is None or before.zone_state != "differs"):
            log.warning("Kafka Streams instance %s (process %s) of %r says "
                        "client.tag.%s=%r but runs behind this proxy in zone %r: a "
                        "configuration copied from another zone?", own.client_id or client.peer,
                        own.process_id, group, self.zone_tag, own.zone_tag, self.client_rack)

    # ----- StreamsGroupHeartbeat (KIP-1071)
    def streams_group_heartbeat(self, client: ClientInfo, frame: memoryview, api_key: int,
                                api_version: int, corr: int) -> Action:
        if api_version > HEARTBEAT_MAX:
            return Forward(frame)
        try:
            header = parse_request_header(frame)
            beat = read_heartbeat(frame, api_version, header.body_offset)
        except ProtocolError:
            self.unreadable += 1
            return Forward(frame)
        if beat.client_tags is not None and beat.process_id:
            self._own(client, beat.group_id, beat.process_id, beat.client_tags,
                      beat.member_id, header.client_id or "")
        return Forward(frame)

    def _joined(self, key: tuple[str, str], answer: memoryview, version: int) -> None:
        group = key[0]
        try:
            joined = read_join_group_response(answer, version)
        except ProtocolError:
            self.unreadable += 1
            return
        if joined.error_code:
            return
        own = self.own.get(key)
        if own is not None and own.member_id != joined.member_id:
            self.own = {**self.own, key: _with_member(own, joined.member_id)}
        if joined.members and joined.protocol_name in (None, STREAM_PROTOCOL):
            self._pending = {**self._pending, group: _Pending(
                joined.generation, {m.member_id: m.metadata for m in joined.members})}
        elif not joined.members and group in self.audits:
            self._forget(group)  # the leader is elsewhere now: its sidecar has the audit

    # ----- SyncGroup
    def sync_group(self, client: ClientInfo, frame: memoryview, api_key: int,
                   api_version: int, corr: int) -> Action:
        if api_version > SYNC_GROUP_MAX:
            return Forward(frame)
        try:
            sync = read_sync_group_request(frame, api_version,
                                           parse_request_header(frame).body_offset)
        except ProtocolError:
            self.unreadable += 1
            return Forward(frame)
        pending = self._pending.get(sync.group_id)
        if not sync.assignments or pending is None or pending.generation != sync.generation:
            return Forward(frame)
        self._pending = {g: p for g, p in self._pending.items() if g != sync.group_id}
        self._audit(sync.group_id, pending.metadata, sync.assignments)
        return Forward(frame)

    def _audit(self, group: str, metadata: dict[str, bytes], assignments: dict[str, bytes]
               ) -> None:
        decoded = classic_members(metadata, assignments)
        self.unreadable += decoded.skipped
        if not decoded.members:
            return
        zones = {o.process_id: o.client_rack for o in self.own.values()
                 if o.group == group and o.client_rack}
        report = audit(app_from_members(group, decoded.members, zones), self.dimensions,
                       self.zone_tag)
        self.audits = {**self.audits, group: report}
        self.audited_at = {**self.audited_at, group: self._clock()}
        self.audits_done = {**self.audits_done, group: self.audits_done.get(group, 0) + 1}
        verdicts = report.verdicts()
        log.info("Kafka Streams %r: %d instances, %d of %d stateful tasks fully spread over "
                 "%s (not possible: %d, possible but not done: %d), %d untagged instance(s)",
                 group, len(report.instances), report.fully_spread, len(report.tasks),
                 ", ".join(report.dimensions) or "no tag", verdicts["not possible"],
                 verdicts["possible but not done"], len(report.untagged))

    def _forget(self, group: str) -> None:
        self.audits = {g: a for g, a in self.audits.items() if g != group}
        self.audited_at = {g: t for g, t in self.audited_at.items() if g != group}


def _with_member(own: OwnInstance, member_id: str) -> OwnInstance:
    return OwnInstance(own.group, own.process_id, own.client_id, own.tags, own.zone_tag,
                       own.client_rack, member_id)
