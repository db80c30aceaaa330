"""Pure rules of min.insync.racks as a Kafka config: validation, precedence, and the
entry DescribeConfigs shows; the same for each rack dimension's minimum,
``min.insync.racks.DIMENSION`` (DIMENSION one of ``rack_dimensions``).

Precedence, highest first: a topic's dynamic value (Admin API) > the topic's
static value (rackguard's file/flags, exact name then longest prefix) > the
dynamic cluster default (Admin API) > the static default (file/flags, else 1).
A dimension's minimum, per dimension: the topic's dynamic value > the topic's own
minimums in the file (which replace the defaults of every dimension, so a dimension
they leave out is 1) > the dynamic cluster default > the file's default > 1.

Invariants: no I/O, no clock, no state; every function maps frozen values to a
new frozen value. :func:`effective_rule` is the only way dynamic values reach the
Produce rule: it returns a new ``RackRule``, never a changed one.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from proxy.admin.state import NAME, DynamicConfigs, Resource
from proxy.enforce.dimensions import RackDimensions
from proxy.enforce.policy import RackRule

DIMENSION_PREFIX = NAME + "."
INVALID_CONFIG = 40
BUILT_IN_DEFAULT = 1
_INT32_MAX = 2**31 - 1
DOCUMENTATION = (
    "rackguard (KIP-1290): an acks=all produce is acknowledged only while the partition's "
    "in-sync replicas span at least this many racks. 1 disables the check. Lower it for "
    "the topic while a rack is out, restore it afterwards.")
DIMENSION_DOCUMENTATION = (
    "rackguard: an acks=all produce is acknowledged only while the partition's in-sync "
    "replicas span at least this many distinct values of the rack dimension (rack_dimensions "
    "splits broker.rack into named dimensions). 1 disables the check for it.")


def is_ours(name: str | None) -> bool:
    """Whether a config name is min.insync.racks or a dimension's minimum."""
    return name is not None and (name == NAME or name.startswith(DIMENSION_PREFIX))


def dimension_of(name: str) -> str | None:
    """``min.insync.racks.zone``: ``zone``; min.insync.racks itself: None."""
    return name[len(DIMENSION_PREFIX):] if name.startswith(DIMENSION_PREFIX) else None


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What validation needs to know of the cluster."""

    racks: int  # distinct racks of the known brokers
    rackless: tuple[int, ...]  # brokers without a rack
    observe: bool = False  # observe mode: a rackless broker is a warning, not an error
    dimensions: RackDimensions | None = None  # rack_dimensions, where set
    rack_names: tuple[str, ...] = ()  # the distinct racks (for a dimension's values)


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


def validate(raw: str | None, facts: ClusterFacts, where: str, name: str = NAME
             ) -> Validated | Refused:
    """Whether ``raw`` may become ``name`` (min.insync.racks or a dimension's minimum)
    of ``where`` (e.g. "topic 'orders'")."""
    dimension = dimension_of(name)
    if dimension is not None:
        known = facts.dimensions.names if facts.dimensions is not None else ()
        if dimension not in known:
            return Refused(f"{name}: {dimension!r} is not a rack dimension here ("
                           + (f"rack_dimensions is {'/'.join(known)})" if known else
                              "rack_dimensions is not set in rackguard's settings)"))
    text = (raw or "").strip()
    try:
        value = int(text, 10)
    except ValueError:
        return Refused(f"{name} of {where} must be an integer >= 1, got {raw!r}")
    if not 1 <= value <= _INT32_MAX:
        return Refused(f"{name} of {where} must be an integer >= 1, got {raw!r}")
    warnings = []
    if value > 1 and facts.rackless:
        text = (f"{name}={value} for {where} needs every broker to have a rack, but "
                f"broker(s) {list(facts.rackless)} have none (set broker.rack, or give "
                "rackguard --broker-rack ID=RACK)")
        if not facts.observe:
            return Refused(text)
        warnings.append(text + " [observe mode: not enforced]")
    if dimension is not None and facts.dimensions is not None and facts.rack_names:
        values = {facts.dimensions.values(r)[dimension] for r in facts.rack_names}
        if value > len(values):
            warnings.append(f"{name}={value} for {where} exceeds the {len(values)} "
                            f"{dimension}(s) in the cluster: every acks=all produce to it "
                            "will be rejected")
    elif dimension is None and value > facts.racks > 0:
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
    replaces only the static default (a static exact or prefix value still wins).
    The dimensions' minimums likewise, per dimension (values of a dimension that
    ``rack_dimensions`` no longer names are left out)."""
    rule = static
    if dynamic.topics or dynamic.cluster_default is not None:
        topics = dict(static.topic_min_racks or {})
        topics.update((name, v.value) for name, v in dynamic.topics.items())
        default = (dynamic.cluster_default.value if dynamic.cluster_default is not None
                   else static.default_min_racks)
        rule = replace(static, default_min_racks=default,
                       topic_min_racks=MappingProxyType(topics))
    dims = static.dimensions
    found = [(r, v) for r, v in dynamic.dimensions.items()
             if dims is not None and r.dimension in dims.names]
    if not found:
        return rule
    defaults = dict(static.dimension_minimums or {})
    defaults.update((r.dimension, v.value) for r, v in found
                    if r.topic is None and r.dimension is not None)
    by_topic = {t: dict(m) for t, m in (static.topic_dimension_minimums or {}).items()}
    for r, v in found:
        if r.topic is not None and r.dimension is not None:
            by_topic.setdefault(r.topic, dict(defaults))[r.dimension] = v.value
    return replace(rule, dimension_minimums=MappingProxyType(defaults) if defaults else None,
                   topic_dimension_minimums=MappingProxyType(by_topic) if by_topic else None)


@dataclass(frozen=True, slots=True)
class StaticValues:
    """rackguard's own settings as a config source."""

    rule: RackRule  # from the file/flags only, no dynamic value in it
    default_is_set: bool  # min_insync_racks given in the file, flags or environment


def dimension_synonyms(topic: str | None, dimension: str, static: StaticValues,
                       dynamic: DynamicConfigs) -> list[Synonym]:
    """:func:`synonyms_for_topic` for a dimension's minimum."""
    name = DIMENSION_PREFIX + dimension
    out = []
    rule = static.rule
    if topic is not None:
        dyn = dynamic.get(Resource(topic, dimension))
        if dyn is not None:
            out.append(Synonym(name, str(dyn.value), DYNAMIC_TOPIC_CONFIG))
        own: Mapping[str, int] | None = (rule.topic_dimension_minimums or {}).get(topic)
        if own is not None:  # the topic's own minimums replace every default
            out.append(Synonym(name, str(own.get(dimension, 1)), STATIC_BROKER_CONFIG))
    dyn = dynamic.get(Resource(None, dimension))
    if dyn is not None:
        out.append(Synonym(name, str(dyn.value), DYNAMIC_DEFAULT_BROKER_CONFIG))
    default = (rule.dimension_minimums or {}).get(dimension)
    if default is not None:
        out.append(Synonym(name, str(default), STATIC_BROKER_CONFIG))
    out.append(Synonym(name, str(BUILT_IN_DEFAULT), DEFAULT_CONFIG))
    return out


def config_names(static: StaticValues) -> tuple[str, ...]:
    """min.insync.racks and, where racks have dimensions, each dimension's minimum."""
    dims = static.rule.dimensions
    return (NAME, *(DIMENSION_PREFIX + d for d in (dims.names if dims is not None else ())))


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
                   dynamic: DynamicConfigs, options: DescribeOptions, name: str = NAME
                   ) -> ConfigEntry | None:
    """The ``name`` entry (min.insync.racks, or a dimension's minimum named in
    :func:`config_names`) of a DescribeConfigs result, or None for none.

    TOPIC: the topic's effective value. BROKER "": the dynamic cluster default only
    (as Kafka shows dynamic defaults), none while there is none. BROKER "<id>": the
    cluster-wide value in force. Any other resource type: none."""
    dimension = dimension_of(name)
    if dimension is not None and name not in config_names(static):
        return None

    def chain_for(topic: str | None) -> list[Synonym]:
        if dimension is None:
            return synonyms_for_topic(topic, static, dynamic)
        return dimension_synonyms(topic, dimension, static, dynamic)

    if resource_type == 2:
        chain = chain_for(resource_name)
    elif resource_type == 4 and resource_name == "":
        chain = [s for s in chain_for(None) if s.source == DYNAMIC_DEFAULT_BROKER_CONFIG]
        if not chain:
            return None
    elif resource_type == 4:
        chain = chain_for(None)
    else:
        return None
    top = chain[0]
    documentation = DOCUMENTATION if dimension is None else DIMENSION_DOCUMENTATION
    return ConfigEntry(
        name=name, value=top.value, read_only=options.read_only, source=top.source,
        is_default=top.source == DEFAULT_CONFIG, is_sensitive=False,
        synonyms=tuple(chain) if options.include_synonyms else (),
        config_type=INT_TYPE,
        documentation=documentation if options.include_documentation else None)
