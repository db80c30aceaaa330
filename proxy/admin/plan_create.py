"""How a CreateTopics request is split: a ``min.insync.racks`` entry in a new topic's
configs (or a rack dimension's minimum, ``min.insync.racks.DIMENSION``) is taken out
before the broker sees it (a broker refuses a config it does not know), validated, and
applied once the broker has created the topic.

Invariant: no I/O; every topic of the request is either forwarded (its other
configs untouched) or answered by the proxy with INVALID_CONFIG / INVALID_REQUEST
and the reason, never both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from protocol.create_topics import CreateTopicsRequest, NewTopic, TopicResult
from proxy.admin.plan import INVALID_REQUEST, Context
from proxy.admin.rules import Refused, dimension_of, is_ours, validate
from proxy.admin.state import Change, Resource, StoredValue


@dataclass(frozen=True, slots=True)
class CreatePlan:
    upstream: CreateTopicsRequest | None  # None: every topic is answered by the proxy
    local: Mapping[str, TopicResult]  # refused topics
    changes: Mapping[str, tuple[Change, ...]]  # applied once the broker created the topic
    warnings: tuple[str, ...] = ()


def plan_create(request: CreateTopicsRequest, ctx: Context) -> CreatePlan:
    forwarded: list[NewTopic] = []
    local: dict[str, TopicResult] = {}
    changes: dict[str, tuple[Change, ...]] = {}
    warnings: list[str] = []
    for topic in request.topics:
        mine: dict[str, list[str | None]] = {}
        for c in topic.configs:
            if is_ours(c.name):
                mine.setdefault(c.name, []).append(c.value)
        if not mine:
            forwarded.append(topic)
            continue
        found: list[Change] = []
        refused: Refused | None = None
        for name, values in mine.items():
            outcome = _decide(topic, name, values, ctx)
            if isinstance(outcome, Refused):
                refused = outcome
                break
            change, warning = outcome
            found.append(change)
            if warning:
                warnings.append(warning)
        if refused is not None:
            local[topic.name] = TopicResult(topic.name, refused.error_code, refused.message)
            continue
        changes[topic.name] = tuple(found)
        forwarded.append(replace(topic, configs=tuple(c for c in topic.configs
                                                      if not is_ours(c.name))))
    upstream = replace(request, topics=tuple(forwarded)) if forwarded else None
    return CreatePlan(upstream, local, changes, tuple(warnings))


def _decide(topic: NewTopic, name: str, values: list[str | None], ctx: Context
            ) -> tuple[Change, str | None] | Refused:
    target = Resource(topic.name, dimension_of(name))
    if len(values) > 1:
        return Refused(f"{name} appears {len(values)} times for {target}", INVALID_REQUEST)
    if ctx.refuse_changes is not None:
        return Refused(ctx.refuse_changes)
    checked = validate(values[0], ctx.facts, str(target), name)
    if isinstance(checked, Refused):
        return checked
    return Change(target, StoredValue(checked.value, ctx.now, ctx.client)), checked.warning
