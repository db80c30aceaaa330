"""Pure rules of min.insync.racks as a Kafka config: validation, precedence, and the
entry DescribeConfigs shows.

Precedence, highest first: a topic's dynamic value (Admin API) > the topic's
static value (rackguard's file/flags, exact name then longest prefix) > the
dynamic cluster default (Admin API) > the static default (file/flags, else 1).

Invariants: no I/O, no clock, no state; every function maps frozen values to a
new frozen value. :func:`effective_rule` is the only way dynamic values reach the
Produce rule: it returns a new ``RackRule``, never a changed one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

from protocol.describe_configs_rewrite import (
    DEFAULT_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    INT_TYPE,
    STATIC_BROKER_CONFIG,
    ConfigEntry,
    Synonym,
)
from proxy.admin.state import DynamicConfigs
from proxy.enforce.policy import RackRule

NAME = "min.insync.racks"
INVALID_CONFIG = 40
BUILT_IN_DEFAULT = 1
_INT32_MAX = 2**31 - 1
DOCUMENTATION = (
    "rackguard (KIP-1290): an acks=all produce is acknowledged only while the partition's "
    "in-sync replicas span at least this many racks. 1 disables the check. Lower it for "
    "the topic while a rack is out, restore it afterwards.")


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What validation needs to know of the cluster."""

    racks: int  # distinct racks of the known brokers
    rackless: tuple[int, ...]  # brokers without a rack
    observe: bool = False  # observe mode: a rackless broker is a warning, not an error


@dataclass(frozen=True, slots=True)
class Validated:
    """A value that may be set (``value``), with a warning to log and return."""

    value: int
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """A value that must not be set: INVALID_CONFIG with ``message``."""

    message: str
    error_code: int = INVALID_CONFIG


def validate(raw: str | None, facts: ClusterFacts, where: str) -> Validated | Refused:
    """Whether ``raw`` may become min.insync.racks of ``where`` (e.g. "topic 'orders'")."""
    text = (raw or "").strip()
    try:
        value = int(text, 10)
    except ValueError:
        return Refused(f"{NAME} of {where} must be an integer >= 1, got {raw!r}")
    if not 1 <= value <= _INT32_MAX:
        return Refused(f"{NAME} of {where} must be an integer >= 1, got {raw!r}")
    warnings = []
    if value > 1 and facts.rackless:
        text = (f"{NAME}={value} for {where} needs every broker to have a rack, but "
                f"broker(s) {list(facts.rackless)} have none (set broker.rack, or give "
                "rackguard --broker-rack ID=RACK)")
        if not facts.observe:
            return Refused(text)
        warnings.append(text + " [observe mode: not enforced]")
    if value > facts.racks > 0:
        warnings.append(f"{NAME}={value} for {where} exceeds the {facts.racks} rack(s) in the "
                        "cluster: every acks=all produce to it will be rejected")
    return Validated(value, "; ".join(warnings) or None)


def static_topic_value(rule: RackRule, topic: str) -> int | None:
    """The topic's value from rackguard's own file/flags (exact name, then prefix)."""
    if rule.topic_min_racks:
        exact = rule.topic_min_racks.get(topic)
        if exact is not None:
            return exact
    for prefix, value in rule.prefix_min_racks:
        if topic.startswith(prefix):
            return value
    return None


def effective_rule(static: RackRule, dynamic: DynamicConfigs) -> RackRule:
    """The rule the Produce hook applies: ``static`` with the dynamic values in force.

    A dynamic topic value beats every static one; the dynamic cluster default
    replaces only the static default (a static exact or prefix value still wins)."""
    if not dynamic.topics and dynamic.cluster_default is None:
        return static
    topics = dict(static.topic_min_racks or {})
    topics.update((name, v.value) for name, v in dynamic.topics.items())
    default = (dynamic.cluster_default.value if dynamic.cluster_default is not None
               else static.default_min_racks)
    return replace(static, default_min_racks=default, topic_min_racks=MappingProxyType(topics))


@dataclass(frozen=True, slots=True)
class StaticValues:
    """rackguard's own settings as a config source."""

    rule: RackRule  # from the file/flags only, no dynamic value in it
    default_is_set: bool  # min_insync_racks given in the file, flags or environment


def synonyms_for_topic(topic: str | None, static: StaticValues, dynamic: DynamicConfigs
                       ) -> list[Synonym]:
    """Every source with a value, highest precedence first (Kafka's synonym order);
    ``topic`` None: a broker's view (the cluster-wide levels only)."""
    out = []
    if topic is not None:
        dyn = dynamic.topics.get(topic)
        if dyn is not None:
            out.append(Synonym(NAME, str(dyn.value), DYNAMIC_TOPIC_CONFIG))
        value = static_topic_value(static.rule, topic)
        if value is not None:
            out.append(Synonym(NAME, str(value), STATIC_BROKER_CONFIG))
    if dynamic.cluster_default is not None:
        out.append(Synonym(NAME, str(dynamic.cluster_default.value),
                           DYNAMIC_DEFAULT_BROKER_CONFIG))
    if static.default_is_set:
        out.append(Synonym(NAME, str(static.rule.default_min_racks), STATIC_BROKER_CONFIG))
    out.append(Synonym(NAME, str(BUILT_IN_DEFAULT), DEFAULT_CONFIG))
    return out


@dataclass(frozen=True, slots=True)
class DescribeOptions:
    version: int
    include_synonyms: bool
    include_documentation: bool
    read_only: bool  # Admin-API changes turned off


def describe_entry(resource_type: int, resource_name: str, static: StaticValues,
                   dynamic: DynamicConfigs, options: DescribeOptions) -> ConfigEntry | None:
    """The min.insync.racks entry of a DescribeConfigs result, or None for none.

    TOPIC: the topic's effective value. BROKER "": the dynamic cluster default only
    (as Kafka shows dynamic defaults), none while there is none. BROKER "<id>": the
    cluster-wide value in force. Any other resource type: none."""
    if resource_type == 2:
        chain = synonyms_for_topic(resource_name, static, dynamic)
    elif resource_type == 4 and resource_name == "":
        if dynamic.cluster_default is None:
            return None
        chain = [Synonym(NAME, str(dynamic.cluster_default.value),
                         DYNAMIC_DEFAULT_BROKER_CONFIG)]
    elif resource_type == 4:
        chain = synonyms_for_topic(None, static, dynamic)
    else:
        return None
    top = chain[0]
    return ConfigEntry(
        name=NAME, value=top.value, read_only=options.read_only, source=top.source,
        is_default=top.source == DEFAULT_CONFIG, is_sensitive=False,
        synonyms=tuple(chain) if options.include_synonyms else (),
        config_type=INT_TYPE,
        documentation=DOCUMENTATION if options.include_documentation else None)
