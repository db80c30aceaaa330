"""A rack dimension's minimum as a Kafka config, ``min.insync.racks.DIMENSION``: set
through the Admin API and the config topic like min.insync.racks.

Invariants under test: a value names a dimension of ``rack_dimensions`` and is an
integer >= 1, else the whole resource is refused; each config of a resource is its
own change (its own record key in the config topic, round-tripping); AlterConfigs
replacing a set deletes a dimension value it leaves out; the effective rule takes a
topic's dynamic value per dimension over the file's, the dynamic default over the
file's default; DescribeConfigs shows each dimension's value with its source.
"""

from __future__ import annotations

import pytest

from protocol.alter_configs import (
    ALTER_CONFIGS,
    DELETE,
    INCREMENTAL_ALTER_CONFIGS,
    SET,
    AlterableConfig,
    AlterConfigsRequest,
    AlterResource,
)
from protocol.create_topics import CreateTopicsRequest, NewTopic, TopicConfig
from protocol.describe_configs_rewrite import (
    DEFAULT_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
)
from proxy.admin.plan import Context, plan_alter
from proxy.admin.plan_create import plan_create
from proxy.admin.rules import (
    ClusterFacts,
    DescribeOptions,
    Refused,
    StaticValues,
    Validated,
    config_names,
    describe_entry,
    effective_rule,
    validate,
)
from proxy.admin.state import (
    Change,
    DynamicConfigs,
    RecordError,
    Resource,
    StoredValue,
    decode_record,
    encode_record,
)
from proxy.enforce.dimensions import RackDimensions
from proxy.enforce.policy import RackRule

R, REGION, ZONE = "min.insync.racks", "min.insync.racks.region", "min.insync.racks.zone"
DIMS = RackDimensions.parse("region/zone")
FACTS = ClusterFacts(3, (), dimensions=DIMS, rack_names=(
    "eu-central-1/eu-central-1a", "eu-central-1/eu-central-1b", "eu-west-1/eu-west-1a"))
CTX = Context(DynamicConfigs(), FACTS, "adm@1.2.3.4:5", 100.0)
OPTIONS = DescribeOptions(4, True, False, False)


def stored(n: int) -> StoredValue:
    return StoredValue(n, 1.0, "adm")


def incremental(*resources: AlterResource, api_key: int = INCREMENTAL_ALTER_CONFIGS
                ) -> AlterConfigsRequest:
    return AlterConfigsRequest(api_key, 1, resources, False)


def res(rtype: int, name: str, *configs: tuple[str, int, str | None]) -> AlterResource:
    return AlterResource(rtype, name, tuple(AlterableConfig(n, v, op) for n, op, v in configs))


def test_validation_needs_a_known_dimension() -> None:
    assert validate("2", FACTS, "topic 'a'", REGION) == Validated(2)
    unknown = validate("2", FACTS, "topic 'a'", "min.insync.racks.rack")
    assert isinstance(unknown, Refused) and "rack_dimensions is region/zone" in unknown.message
    unset = validate("2", ClusterFacts(3, ()), "topic 'a'", ZONE)
    assert isinstance(unset, Refused) and "rack_dimensions is not set" in unset.message
    for raw in ("0", "x", None):
        bad = validate(raw, FACTS, "topic 'a'", ZONE)
        assert isinstance(bad, Refused) and f"{ZONE} of topic 'a' must be an integer >= 1" \
            in bad.message
    above = validate("3", FACTS, "topic 'a'", REGION)  # two regions in the cluster
    assert isinstance(above, Validated) and "exceeds the 2 region(s)" in (above.warning or "")
    assert validate("3", FACTS, "topic 'a'", ZONE) == Validated(3)  # three zones
    rackless = validate("2", ClusterFacts(3, (7,), dimensions=DIMS), "topic 'a'", ZONE)
    assert isinstance(rackless, Refused) and "[7]" in rackless.message


def test_records_round_trip_under_their_own_keys() -> None:
    for resource in (Resource("orders", "zone"), Resource(None, "region")):
        change = Change(resource, stored(2))
        key, value = encode_record(change)
        assert key.decode().startswith("dimension:")
        assert decode_record(key, value) == change
    assert encode_record(Change(Resource("orders", "zone"), None))[0] == \
        b"dimension:zone/topic:orders"
    for bad in (b"dimension:zone", b"dimension:/topic:t", b"dimension:a/dimension:b/topic:t",
                b"dimension:zone/other"):
        with pytest.raises(RecordError):
            decode_record(bad, stored(2).encode())
    state = DynamicConfigs().apply(Change(Resource("t"), stored(2)))
    state = state.apply(Change(Resource("t", "zone"), stored(3)))
    assert state.get(Resource("t")) == stored(2) and state.get(Resource("t", "zone")) == stored(3)
    assert state.has_values("t") and not state.has_values(None)
    gone = state.apply(Change(Resource("t", "zone"), None))
    assert gone.get(Resource("t", "zone")) is None and gone.get(Resource("t")) == stored(2)
    assert state.get(Resource("t", "zone")) == stored(3)  # the old value is unchanged


STATIC = RackRule(2, dimensions=DIMS, dimension_minimums={"zone": 2},
                  topic_dimension_minimums={"pinned": {"region": 2}})


def test_effective_rule_per_dimension() -> None:
    assert effective_rule(STATIC, DynamicConfigs()) is STATIC
    dynamic = DynamicConfigs()
    for change in (Change(Resource(None, "region"), stored(2)),
                   Change(Resource("orders", "zone"), stored(3)),
                   Change(Resource("pinned", "zone"), stored(2)),
                   Change(Resource("gone", "rack"), stored(5))):  # not a dimension now
        dynamic = dynamic.apply(change)
    rule = effective_rule(STATIC, dynamic)
    assert rule.minimums("any") == {"zone": 2, "region": 2}  # the default over the file's
    assert rule.minimums("orders") == {"zone": 3, "region": 2}
    assert rule.minimums("pinned") == {"region": 2, "zone": 2}  # the file's map, then ours
    assert rule.minimums("gone") == {"zone": 2, "region": 2}
    assert rule.default_min_racks == 2 and STATIC.dimension_minimums == {"zone": 2}
    lowered = effective_rule(STATIC, DynamicConfigs().apply(
        Change(Resource("orders", "zone"), stored(1))))
    assert lowered.minimums("orders") is None and lowered.minimums("x") == {"zone": 2}


def test_describe_shows_each_dimension_with_its_source() -> None:
    static = StaticValues(STATIC, True)
    assert config_names(static) == (R, REGION, ZONE)
    assert config_names(StaticValues(RackRule(), False)) == (R,)
    dynamic = DynamicConfigs().apply(Change(Resource("orders", "zone"), stored(3)))
    dynamic = dynamic.apply(Change(Resource(None, "zone"), stored(2)))
    entry = describe_entry(2, "orders", static, dynamic, OPTIONS, ZONE)
    assert entry is not None and entry.value == "3" and entry.source == DYNAMIC_TOPIC_CONFIG
    assert [(s.value, s.source) for s in entry.synonyms] == [
        ("3", DYNAMIC_TOPIC_CONFIG), ("2", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("2", STATIC_BROKER_CONFIG), ("1", DEFAULT_CONFIG)]
    pinned = describe_entry(2, "pinned", static, dynamic, OPTIONS, ZONE)
    assert pinned is not None and (pinned.value, pinned.source) == ("1", STATIC_BROKER_CONFIG)
    region = describe_entry(2, "orders", static, dynamic, OPTIONS, REGION)
    assert region is not None and (region.value, region.source) == ("1", DEFAULT_CONFIG)
    default = describe_entry(4, "", static, dynamic, OPTIONS, ZONE)
    assert default is not None and default.source == DYNAMIC_DEFAULT_BROKER_CONFIG
    assert describe_entry(4, "", static, dynamic, OPTIONS, REGION) is None
    assert describe_entry(2, "orders", static, dynamic, OPTIONS, "min.insync.racks.x") is None


def test_alter_takes_each_config_out_as_its_own_change() -> None:
    plan = plan_alter(incremental(
        res(2, "both", (R, SET, "2"), (ZONE, SET, "3"), ("retention.ms", SET, "5")),
        res(2, "dims", (REGION, SET, "2"), (ZONE, DELETE, None)),
        res(2, "bad", (REGION, SET, "2"), (ZONE, SET, "0")),
        res(2, "unknown", ("min.insync.racks.rack", SET, "2")),
        res(4, "", (REGION, SET, "2")),
    ), CTX)
    assert plan.upstream is not None
    assert [(r.resource_name, [c.name for c in r.configs]) for r in plan.upstream.resources] \
        == [("both", ["retention.ms"])]
    who = "adm@1.2.3.4:5"
    assert plan.changes[(2, "both")] == (Change(Resource("both"), StoredValue(2, 100.0, who)),
                                         Change(Resource("both", "zone"),
                                                StoredValue(3, 100.0, who)))
    assert plan.changes[(2, "dims")] == (
        Change(Resource("dims", "region"), StoredValue(2, 100.0, who)),
        Change(Resource("dims", "zone"), None, who))
    assert plan.changes[(4, "")] == (Change(Resource(None, "region"),
                                            StoredValue(2, 100.0, who)),)
    assert (2, "bad") not in plan.changes and plan.local[(2, "bad")].error_code == 40
    assert "rack_dimensions is region/zone" in (plan.local[(2, "unknown")].error_message or "")
    assert set(plan.probe) == {(2, "dims"), (4, "")}


def test_alter_configs_replacing_the_set_deletes_a_dimension_left_out() -> None:
    dynamic = DynamicConfigs().apply(Change(Resource("t", "zone"), stored(2)))
    dynamic = dynamic.apply(Change(Resource("t", "region"), stored(2)))
    ctx = Context(dynamic, FACTS, "c", 5.0)
    plan = plan_alter(incremental(res(2, "t", (REGION, SET, "2")), api_key=ALTER_CONFIGS), ctx)
    assert plan.changes[(2, "t")] == (Change(Resource("t", "region"), StoredValue(2, 5.0, "c")),
                                      Change(Resource("t", "zone"), None, "c"))


def test_create_topics_takes_dimension_configs_out() -> None:
    def topic(name: str, *configs: tuple[str, str]) -> NewTopic:
        return NewTopic(name, 3, 3, (), tuple(TopicConfig(n, v) for n, v in configs))

    plan = plan_create(CreateTopicsRequest(5, (
        topic("good", ("cleanup.policy", "compact"), (REGION, "2"), (ZONE, "2")),
        topic("bad", (REGION, "2"), ("min.insync.racks.rack", "2")),
    ), 1000, False), CTX)
    assert plan.upstream is not None
    assert [(t.name, [c.name for c in t.configs]) for t in plan.upstream.topics] == [
        ("good", ["cleanup.policy"])]
    assert [c.resource for c in plan.changes["good"]] == [Resource("good", "region"),
                                                         Resource("good", "zone")]
    assert plan.local["bad"].error_code == 40 and "bad" not in plan.changes
