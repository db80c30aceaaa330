"""How a CreateTopics request is split: a ``min.insync.racks`` entry in a new topic's
configs is taken out before the broker sees it (a broker refuses a config it does
not know), validated, and applied once the broker has created the topic.

Invariant: no I/O; every topic of the request is either forwarded (its other
configs untouched) or answered by the proxy with INVALID_CONFIG / INVALID_REQUEST
and the reason, never both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from protocol.create_topics import CreateTopicsRequest, NewTopic, TopicResult
from proxy.admin.plan import INVALID_REQUEST, Context
from proxy.admin.rules import NAME, Refused, validate
from proxy.admin.state import Change, Resource, StoredValue


@dataclass(frozen=True, slots=True)
class CreatePlan:
    upstream: CreateTopicsRequest | None  # None: every topic is answered by the proxy
    local: Mapping[str, TopicResult]  # refused topics
    changes: Mapping[str, Change]  # applied once the broker created the topic
    warnings: tuple[str, ...] = ()


def plan_create(request: CreateTopicsRequest, ctx: Context) -> CreatePlan:
    forwarded: list[NewTopic] = []
    local: dict[str, TopicResult] = {}
    changes: dict[str, Change] = {}
    warnings: list[str] = []
    for topic in request.topics:
        mine = [c for c in topic.configs if c.name == NAME]
        if not mine:
            forwarded.append(topic)
            continue
        outcome = _decide(topic, [c.value for c in mine], ctx)
        if isinstance(outcome, Refused):
            local[topic.name] = TopicResult(topic.name, outcome.error_code, outcome.message)
            continue
        change, warning = outcome
        changes[topic.name] = change
        if warning:
            warnings.append(warning)
        forwarded.append(replace(topic, configs=tuple(c for c in topic.configs
                                                      if c.name != NAME)))
    upstream = replace(request, topics=tuple(forwarded)) if forwarded else None
    return CreatePlan(upstream, local, changes, tuple(warnings))


def _decide(topic: NewTopic, values: list[str | None], ctx: Context
            ) -> tuple[Change, str | None] | Refused:
    target = Resource(topic.name)
    if len(values) > 1:
        return Refused(f"{NAME} appears {len(values)} times for {target}", INVALID_REQUEST)
    if ctx.refuse_changes is not None:
        return Refused(ctx.refuse_changes)
    checked = validate(values[0], ctx.facts, str(target))
    if isinstance(checked, Refused):
        return checked
    return Change(target, StoredValue(checked.value, ctx.now, ctx.client)), checked.warning
