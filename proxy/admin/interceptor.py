"""The request hooks of the config APIs: DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs and CreateTopics, as the Produce hook is for Produce.

- DescribeConfigs: forwarded unchanged; when a TOPIC or BROKER resource asks for
  every key or for ``min.insync.racks`` (or a rack dimension's minimum,
  ``min.insync.racks.DIMENSION``, which stands with it everywhere below), the broker's
  answer gets the entry (value, source, synonyms and documentation as asked, see
  :func:`.rules.describe_entry`).
- AlterConfigs / IncrementalAlterConfigs: split by :func:`.plan.plan_alter`; the
  rest goes upstream, the broker's per-resource answers are merged with the
  proxy's in request order; a request naming only ``min.insync.racks`` is
  answered by the proxy. Authorization stays the broker's: a resource the proxy
  answers alone is first sent, on the client's own connection, as a validate-only
  IncrementalAlterConfigs that deletes an ordinary config of the same resource (no
  change either way); a refusal goes back for that resource and nothing is
  applied. A mixed resource is applied only when the broker accepted the rest.
- CreateTopics: a new topic's ``min.insync.racks`` is taken out, applied once the
  broker created the topic, and shown in the answer's configs (v5+).
Changes are written to the config topic before the answer leaves; ``validate_only``
applies nothing.

Invariant: every resource / topic of a request gets exactly one answer, in
request order; a value is in force only after the config topic acknowledged it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Protocol

from protocol.alter_configs import (
    DELETE,
    INCREMENTAL_ALTER_CONFIGS,
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterResource,
    ResourceKey,
    ResourceResult,
    build_alter_configs_request,
    encode_alter_configs_request,
    merge_alter_configs_responses,
    parse_alter_configs_request,
    parse_alter_configs_response,
)
from protocol.create_topics import (
    CreatedConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
    encode_create_topics_request,
    merge_create_topics_responses,
    parse_create_topics_request,
    parse_create_topics_response,
)
from protocol.describe_configs_rewrite import (
    ConfigEntry,
    DescribeConfigsRequest,
    DescribeResult,
    encode_describe_configs_response,
    parse_describe_configs_request,
    parse_describe_configs_response,
)
from protocol.headers import RequestHeader, parse_request_header
from proxy.admin.plan import Context, plan_alter
from proxy.admin.plan_create import CreatePlan, plan_create
from proxy.admin.rules import (
    NAME,
    ClusterFacts,
    DescribeOptions,
    StaticValues,
    config_names,
    describe_entry,
    is_ours,
)
from proxy.admin.state import BROKER, TOPIC, Change, DynamicConfigs
from proxy.admin.store import StoreError
from proxy.relay.actions import Action, ClientInfo, Forward, Reply

log = logging.getLogger("rackguard.admin")

UNKNOWN_SERVER_ERROR = -1
# The ordinary config the authorization probe deletes, validate-only (nothing changes).
PROBE_CONFIGS = {TOPIC: "retention.ms", BROKER: "log.retention.ms"}


class ConfigStore(Protocol):
    """What the hooks need of the config topic (:class:`.store.ConfigTopicStore`)."""

    @property
    def state(self) -> DynamicConfigs: ...

    async def write(self, change: Change) -> None: ...


class ConfigInterceptor:
    def __init__(
        self,
        store: ConfigStore | None,
        static: Callable[[], StaticValues],
        facts: Callable[[], ClusterFacts],
        wall_clock: Callable[[], float],
        refuse_changes: str | None = None,
    ) -> None:
        """``store`` None: no config topic (every change refused); ``refuse_changes``:
        the reason Admin-API changes are turned off (read-only), or None."""
        self._store = store
        self._static = static
        self._facts = facts
        self._wall = wall_clock
        self._refusal = refuse_changes
        if store is None and refuse_changes is None:
            self._refusal = (f"{NAME} cannot be changed through the Admin API here: "
                             "rackguard has no config topic (config_topic is empty)")

    @property
    def read_only(self) -> bool:
        return self._refusal is not None

    def _dynamic(self) -> DynamicConfigs:
        return self._store.state if self._store is not None else DynamicConfigs()

    def _context(self, client: ClientInfo, header: RequestHeader) -> Context:
        who = f"{header.client_id or '-'}@{client.peer}"
        return Context(self._dynamic(), self._facts(), who, self._wall(), self._refusal)

    # ----- DescribeConfigs
    def describe(self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int,
                 corr: int) -> Action:
        header = parse_request_header(frame)
        request = parse_describe_configs_request(frame, header)
        names = config_names(self._static())
        if not any(r.resource_type in (TOPIC, BROKER) and r.wants(n)
                   for r in request.resources for n in names):
            return Forward(frame, True, None)
        return Forward(frame, True, self._describe_transform(request, corr, names))

    def _describe_transform(self, request: DescribeConfigsRequest, corr: int,
                            names: tuple[str, ...]) -> Callable[[memoryview, int], bytes]:
        wanted = {(r.resource_type, r.resource_name): [n for n in names if r.wants(n)]
                  for r in request.resources if r.resource_type in (TOPIC, BROKER)}
        options = DescribeOptions(request.version, request.include_synonyms,
                                  request.include_documentation, self.read_only)

        def add_entries(frame: memoryview, version: int) -> bytes:
            response = parse_describe_configs_response(frame, version)
            static, dynamic = self._static(), self._dynamic()
            results = []
            for result in response.results:
                key = (result.resource_type, result.resource_name)
                if result.error_code == 0:
                    for name in wanted.get(key, ()):
                        entry = describe_entry(*key, static, dynamic, options, name)
                        if entry is not None:
                            result = _with_entry(result, entry)
                results.append(result)
            return encode_describe_configs_response(
                version, corr, replace(response, results=tuple(results)))

        return add_entries

    # ----- AlterConfigs / IncrementalAlterConfigs
    def alter(self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int,
              corr: int) -> Action | Awaitable[Action]:
        header = parse_request_header(frame)
        request = parse_alter_configs_request(frame, header)
        if not any(is_ours(c.name) for r in request.resources for c in r.configs) and not (
                request.api_key != INCREMENTAL_ALTER_CONFIGS and self._has_dynamic(request)):
            return Forward(frame, True, None)
        return self._alter(client, frame, header, request)

    def _has_dynamic(self, request: AlterConfigsRequest) -> bool:
        dynamic = self._dynamic()
        return any((r.resource_type == TOPIC and dynamic.has_values(r.resource_name))
                   or (r.key == (BROKER, "") and dynamic.has_values(None))
                   for r in request.resources)

    async def _alter(self, client: ClientInfo, frame: memoryview, header: RequestHeader,
                     request: AlterConfigsRequest) -> Action:
        plan = plan_alter(request, self._context(client, header))
        for warning in plan.warnings:
            log.warning("%s", warning)
        local = dict(plan.local)
        changes = dict(plan.changes)
        if plan.probe:
            for key, refusal in (await self._probe(client, header, plan.probe)).items():
                local[key] = refusal
                changes.pop(key, None)
        corr = header.correlation_id
        if plan.upstream is None:
            if not request.validate_only:
                await self._apply(changes, local)
            return Reply(merge_alter_configs_responses(request, corr, None, local))
        upstream_request = encode_alter_configs_request(frame, header, plan.upstream)

        def merge(response_frame: memoryview, version: int) -> Awaitable[bytes]:
            upstream = parse_alter_configs_response(response_frame, request.api_key, version)
            return self._finish_alter(request, corr, upstream, local, changes)

        return Forward(upstream_request, True, merge)

    async def _finish_alter(self, request: AlterConfigsRequest, corr: int,
                            upstream: AlterConfigsResponse,
                            local: dict[ResourceKey, ResourceResult],
                            changes: Mapping[ResourceKey, tuple[Change, ...]]) -> bytes:
        refused = {r.key for r in upstream.results if r.error_code != 0}
        if not request.validate_only:
            await self._apply({k: c for k, c in changes.items() if k not in refused}, local)
        return merge_alter_configs_responses(request, corr, upstream, local)

    async def _probe(self, client: ClientInfo, header: RequestHeader,
                     keys: tuple[ResourceKey, ...]) -> dict[ResourceKey, ResourceResult]:
        """The broker's refusals of a validate-only change of each resource, asked on the
        client's own connection (so with the client's identity)."""
        probe = AlterConfigsRequest(INCREMENTAL_ALTER_CONFIGS, 0, tuple(
            AlterResource(t, n, (AlterableConfig(PROBE_CONFIGS[t], None, DELETE),))
            for t, n in keys), validate_only=True)
        answer = await client.ask(
            lambda corr: build_alter_configs_request(probe, corr, header.client_id),
            INCREMENTAL_ALTER_CONFIGS, 0)
        response = parse_alter_configs_response(answer, INCREMENTAL_ALTER_CONFIGS, 0)
        return {r.key: r for r in response.results if r.error_code != 0}

    async def _apply(self, changes: Mapping[ResourceKey, tuple[Change, ...]],
                     answers: dict[ResourceKey, ResourceResult]) -> None:
        """Write each change; a failure becomes that resource's answer."""
        for key, found in changes.items():
            for change in found:
                failure = await self._write(change)
                if failure is not None:
                    answers[key] = ResourceResult(UNKNOWN_SERVER_ERROR, failure, *key)
                    break

    async def _write(self, change: Change) -> str | None:
        if self._store is None:
            return "rackguard has no config topic"
        try:
            await self._store.write(change)
        except StoreError as exc:
            log.error("%s: not applied: %s", change.resource, exc)
            return str(exc)
        return None

    # ----- CreateTopics
    def create(self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int,
               corr: int) -> Action | Awaitable[Action]:
        header = parse_request_header(frame)
        request = parse_create_topics_request(frame, header)
        plan = plan_create(request, self._context(client, header))
        for warning in plan.warnings:
            log.warning("%s", warning)
        if plan.upstream is None:
            return Reply(merge_create_topics_responses(request, corr, None, plan.local))
        if not plan.local and not plan.changes and api_version < 5:
            return Forward(frame, True, None)  # no configs in the answer to add to
        upstream_request = (frame if not plan.local and not plan.changes
                            else encode_create_topics_request(frame, header, plan.upstream))

        def merge(response_frame: memoryview, version: int) -> Awaitable[bytes]:
            upstream = parse_create_topics_response(response_frame, version)
            return self._finish_create(request, corr, upstream, plan)

        return Forward(upstream_request, True, merge)

    async def _finish_create(self, request: CreateTopicsRequest, corr: int,
                             upstream: CreateTopicsResponse, plan: CreatePlan) -> bytes:
        failed: dict[str, str] = {}
        created = {t.name for t in upstream.topics if t.error_code == 0}
        if not request.validate_only:
            for name, found in plan.changes.items():
                if name in created:
                    for change in found:
                        failure = await self._write(change)
                        if failure is not None:
                            failed[name] = failure
                            break
        dynamic = self._dynamic()
        if request.validate_only:  # show what would be set
            for found in plan.changes.values():
                for change in found:
                    dynamic = dynamic.apply(change)
        static = self._static()
        options = DescribeOptions(5, False, False, self.read_only)
        topics = []
        for t in upstream.topics:
            if t.name in failed:
                t = replace(t, error_code=UNKNOWN_SERVER_ERROR, error_message=(
                    f"the topic was created without {NAME}: {failed[t.name]}"))
            elif t.error_code == 0 and t.configs is not None:
                for name in config_names(static):
                    entry = describe_entry(TOPIC, t.name, static, dynamic, options, name)
                    if entry is not None:
                        added = CreatedConfig(name, entry.value, entry.read_only,
                                              entry.source, False)
                        t = replace(t, configs=_sorted_in(t.configs, added))
            topics.append(t)
        response = replace(upstream, topics=tuple(topics))
        return merge_create_topics_responses(request, corr, response, plan.local)


def _with_entry(result: DescribeResult, entry: ConfigEntry) -> DescribeResult:
    configs = [c for c in result.configs if c.name != entry.name]
    at = next((i for i, c in enumerate(configs) if c.name > entry.name), len(configs))
    configs.insert(at, entry)
    return replace(result, configs=tuple(configs))


def _sorted_in(configs: tuple[CreatedConfig, ...], added: CreatedConfig
               ) -> tuple[CreatedConfig, ...]:
    kept = [c for c in configs if c.name != added.name]
    at = next((i for i, c in enumerate(kept) if c.name > added.name), len(kept))
    kept.insert(at, added)
    return tuple(kept)

