"""How an AlterConfigs / IncrementalAlterConfigs request is split between the broker
and the proxy: a pure function of the request and frozen values.

Per resource of the request (``min.insync.racks`` below stands as well for a rack
dimension's minimum, ``min.insync.racks.DIMENSION``; each entry is one change):
- no ``min.insync.racks`` entry (and nothing implied): forwarded untouched;
- the entry on a TOPIC or on the cluster default (BROKER ""), valid: the entry is
  taken out and becomes a :class:`~.state.Change`, applied once the broker has
  accepted the rest of the resource (mixed) or has accepted a validate-only probe
  of the resource (entry alone: answered by the proxy);
- invalid (not an integer, < 1, > 1 with a rackless broker, APPEND/SUBTRACT, on
  one broker, changes turned off): the whole resource is taken out of the request
  and answered INVALID_CONFIG with the reason, so nothing of it is applied.
AlterConfigs replaces a resource's whole set: a TOPIC or cluster-default resource
without the entry deletes a dynamic value that exists, and the resource always goes
to the broker (its other configs are replaced there).

Invariant: no I/O; the plan names every resource of the request exactly once, in
``upstream`` (the broker answers it) or in ``local`` (the proxy does), or in both
(mixed: the broker's refusal wins, see ``merge_alter_configs_responses``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from protocol.alter_configs import (
    ALTER_CONFIGS,
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    AlterableConfig,
    AlterConfigsRequest,
    AlterResource,
    ResourceKey,
    ResourceResult,
)
from proxy.admin.rules import NAME, ClusterFacts, Refused, dimension_of, is_ours, validate
from proxy.admin.state import (
    BROKER,
    CLUSTER_DEFAULT,
    TOPIC,
    Change,
    DynamicConfigs,
    Resource,
    StoredValue,
)

INVALID_CONFIG = 40
INVALID_REQUEST = 42


@dataclass(frozen=True, slots=True)
class Context:
    """What the plan depends on besides the request."""

    dynamic: DynamicConfigs
    facts: ClusterFacts
    client: str  # recorded with a change
    now: float  # seconds since the epoch, recorded with a change
    refuse_changes: str | None = None  # the reason changes are off (read-only), or None


@dataclass(frozen=True, slots=True)
class AlterPlan:
    upstream: AlterConfigsRequest | None  # what goes to the broker; None: nothing
    local: Mapping[ResourceKey, ResourceResult]  # the proxy's answers
    # applied once the broker or the probe agrees (one per config of ours in the resource)
    changes: Mapping[ResourceKey, tuple[Change, ...]]
    probe: tuple[ResourceKey, ...]  # resources answered by the proxy alone: ask first
    warnings: tuple[str, ...] = ()


def resource_of(key: ResourceKey) -> Resource | None:
    """The min.insync.racks resource a config resource stands for (None: not ours)."""
    rtype, name = key
    if rtype == TOPIC:
        return Resource(name)
    if rtype == BROKER and name == "":
        return CLUSTER_DEFAULT
    return None


def plan_alter(request: AlterConfigsRequest, ctx: Context) -> AlterPlan:
    forwarded: list[AlterResource] = []
    local: dict[ResourceKey, ResourceResult] = {}
    changes: dict[ResourceKey, tuple[Change, ...]] = {}
    probe: list[ResourceKey] = []
    warnings: list[str] = []
    whole_set = request.api_key == ALTER_CONFIGS
    for res in request.resources:
        mine = [c for c in res.configs if is_ours(c.name)]
        rest = tuple(c for c in res.configs if not is_ours(c.name))
        target = resource_of(res.key)
        if (not mine and not (whole_set and target is not None)) or (
                target is None and res.resource_type != BROKER):
            forwarded.append(res)  # not a resource rackguard serves: the broker's answer
            continue
        outcome = _decide_all(mine, target, whole_set, ctx)
        if isinstance(outcome, Refused):
            local[res.key] = ResourceResult(outcome.error_code, outcome.message, *res.key)
            continue
        found, warning = outcome
        if warning:
            warnings.append(warning)
        if found:
            changes[res.key] = found
        if rest or whole_set:
            forwarded.append(replace(res, configs=rest))
            if found or warning:
                local[res.key] = ResourceResult(0, warning, *res.key)
        else:
            local[res.key] = ResourceResult(0, warning, *res.key)
            probe.append(res.key)
    upstream = replace(request, resources=tuple(forwarded)) if forwarded else None
    return AlterPlan(upstream, local, changes, tuple(probe), tuple(warnings))


def _decide_all(mine: list[AlterableConfig], target: Resource | None, whole_set: bool,
                ctx: Context) -> tuple[tuple[Change, ...], str | None] | Refused:
    """The changes a resource's entries of ours make (AlterConfigs: with the deletion
    of each dynamic value it leaves out), or why any cannot (then none is made)."""
    if target is None:
        name = mine[0].name if mine else NAME
        return Refused(f"{name} is set per topic or as the cluster-wide default "
                       "(--entity-default), not per broker")
    by_name: dict[str, list[AlterableConfig]] = {}
    for entry in mine:
        by_name.setdefault(entry.name, []).append(entry)
    if whole_set:  # the whole set is replaced: a value left out is deleted
        for other in _dynamic_names(target, ctx.dynamic):
            by_name.setdefault(other, [])
    changes: list[Change] = []
    warnings: list[str] = []
    for name, entries in by_name.items():
        dimension = dimension_of(name)
        outcome = _decide(entries, replace(target, dimension=dimension), name, ctx)
        if isinstance(outcome, Refused):
            return outcome
        change, warning = outcome
        if change is not None:
            changes.append(change)
        if warning:
            warnings.append(warning)
    return tuple(changes), "; ".join(warnings) or None


def _dynamic_names(target: Resource, dynamic: DynamicConfigs) -> list[str]:
    """The configs of ours with a dynamic value for ``target`` (a topic or the default)."""
    names = [NAME] if dynamic.get(target) is not None else []
    return names + sorted(r.config for r in dynamic.dimensions if r.topic == target.topic)


def _decide(mine: list[AlterableConfig], target: Resource, name: str, ctx: Context
            ) -> tuple[Change | None, str | None] | Refused:
    """The change a resource's entries of one config make, or why they cannot."""
    if len(mine) > 1:
        return Refused(f"{name} appears {len(mine)} times for {target}", INVALID_REQUEST)
    existing = ctx.dynamic.get(target)
    if not mine:  # AlterConfigs without the entry: the whole set is replaced
        if existing is None or ctx.refuse_changes is not None:
            return None, None
        return Change(target, None, ctx.client), None
    if ctx.refuse_changes is not None:
        return Refused(ctx.refuse_changes)
    entry = mine[0]
    if entry.operation in (APPEND, SUBTRACT):
        return Refused(f"{name} is not a list: APPEND and SUBTRACT do not apply to it")
    if entry.operation == DELETE:
        return Change(target, None, ctx.client), None
    if entry.operation != SET:
        return Refused(f"unknown config operation {entry.operation} for {name}",
                       INVALID_REQUEST)
    checked = validate(entry.value, ctx.facts, str(target), name)
    if isinstance(checked, Refused):
        return checked
    return Change(target, StoredValue(checked.value, ctx.now, ctx.client)), checked.warning
