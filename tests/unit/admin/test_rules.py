"""proxy.admin.rules and proxy.admin.state: validation as in the KIP, precedence of the
four sources, the DescribeConfigs entry per source, records of the config topic.

Invariants under test: bad values are refused with the reason (not an integer, < 1,
> 1 with a rackless broker) and a value above the rack count is accepted with a
warning; a topic's dynamic value beats its static one, which beats the dynamic
default, which beats the static default; the rule is replaced, never changed; a
record round-trips and a bad record raises RecordError.
"""

from __future__ import annotations

import pytest

from protocol.describe_configs_rewrite import (
    DEFAULT_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
)
from proxy.admin.rules import (
    ClusterFacts,
    DescribeOptions,
    Refused,
    StaticValues,
    Validated,
    describe_entry,
    effective_rule,
    validate,
)
from proxy.admin.state import (
    CLUSTER_DEFAULT,
    Change,
    DynamicConfigs,
    RecordError,
    Resource,
    StoredValue,
    decode_record,
    encode_record,
)
from proxy.enforce.policy import RackRule

FACTS = ClusterFacts(racks=3, rackless=())


@pytest.mark.parametrize("raw", ["x", "", None, "1.5", "0", "-2", "2147483648", " "])
def test_bad_values_are_refused_with_the_reason(raw: str | None) -> None:
    out = validate(raw, FACTS, "topic 'a'")
    assert isinstance(out, Refused) and out.error_code == 40
    assert "integer >= 1" in out.message and "topic 'a'" in out.message


def test_rackless_brokers_and_rack_count() -> None:
    rackless = ClusterFacts(racks=2, rackless=(4, 5))
    refused = validate("2", rackless, "topic 'a'")
    assert isinstance(refused, Refused) and "[4, 5]" in refused.message
    assert validate("1", rackless, "topic 'a'") == Validated(1)  # 1 needs no rack
    observed = validate("2", ClusterFacts(2, (4,), observe=True), "topic 'a'")
    assert isinstance(observed, Validated) and "observe mode" in (observed.warning or "")
    above = validate(" 4 ", FACTS, "topic 'a'")
    assert isinstance(above, Validated) and above.value == 4
    assert "exceeds the 3 rack(s)" in (above.warning or "")
    assert validate("3", FACTS, "topic 'a'") == Validated(3)


def stored(n: int) -> StoredValue:
    return StoredValue(n, 1.0, "c")


STATIC = RackRule(default_min_racks=2, topic_min_racks={"exact": 3},
                  prefix_min_racks=(("pre.", 1),))


def test_precedence() -> None:
    dynamic = DynamicConfigs().apply(Change(Resource("exact"), stored(1)))
    dynamic = dynamic.apply(Change(Resource("dyn"), stored(4)))
    dynamic = dynamic.apply(Change(CLUSTER_DEFAULT, stored(3)))
    rule = effective_rule(STATIC, dynamic)
    assert rule.required_racks("exact") == 1  # topic dynamic > topic static
    assert rule.required_racks("dyn") == 4
    assert rule.required_racks("pre.x") == 1  # topic static (prefix) > dynamic default
    assert rule.required_racks("other") == 3  # dynamic default > static default
    assert STATIC.required_racks("exact") == 3 and STATIC.default_min_racks == 2  # unchanged
    assert effective_rule(STATIC, DynamicConfigs()) is STATIC
    back = dynamic.apply(Change(CLUSTER_DEFAULT, None)).apply(Change(Resource("exact"), None))
    assert effective_rule(STATIC, back).required_racks("other") == 2
    assert effective_rule(STATIC, back).required_racks("exact") == 3
    assert dynamic.get(Resource("exact")) == stored(1)  # the old value is untouched


def options(synonyms: bool = True) -> DescribeOptions:
    return DescribeOptions(version=4, include_synonyms=synonyms, include_documentation=True,
                           read_only=False)


def test_describe_sources() -> None:
    static = StaticValues(STATIC, default_is_set=True)
    dynamic = DynamicConfigs().apply(Change(Resource("exact"), stored(1)))
    entry = describe_entry(2, "exact", static, dynamic, options())
    assert entry is not None and (entry.value, entry.source) == ("1", DYNAMIC_TOPIC_CONFIG)
    assert [(s.value, s.source) for s in entry.synonyms] == [
        ("1", DYNAMIC_TOPIC_CONFIG), ("3", STATIC_BROKER_CONFIG), ("2", STATIC_BROKER_CONFIG),
        ("1", DEFAULT_CONFIG)]
    assert entry.config_type == 3 and entry.documentation and not entry.read_only
    plain = describe_entry(2, "other", StaticValues(RackRule(), False), DynamicConfigs(),
                           options(synonyms=False))
    assert plain is not None and (plain.value, plain.source, plain.is_default) == (
        "1", DEFAULT_CONFIG, True)
    assert plain.synonyms == ()
    assert describe_entry(4, "", static, dynamic, options()) is None  # no dynamic default
    with_default = dynamic.apply(Change(CLUSTER_DEFAULT, stored(2)))
    default = describe_entry(4, "", static, with_default, options())
    assert default is not None and (default.value, default.source) == (
        "2", DYNAMIC_DEFAULT_BROKER_CONFIG)
    broker = describe_entry(4, "1", static, with_default, options())
    assert broker is not None and (broker.value, broker.source) == (
        "2", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert describe_entry(8, "1", static, with_default, options()) is None


def test_records_round_trip() -> None:
    for change in (Change(Resource("t:1/x"), StoredValue(2, 1700000000.5, "adm@1.2.3.4:5")),
                   Change(CLUSTER_DEFAULT, StoredValue(1, 0.0, "")),
                   Change(Resource("gone"), None, "adm@h:1")):
        assert decode_record(*encode_record(change), change.client.encode()) == change
    for key, value in ((None, b"{}"), (b"what", None), (b"topic:", None), (b"\xff", None),
                       (b"topic:a", b"not json"), (b"topic:a", b'{"value": 0, "when": 1, '
                                                               b'"client": ""}'),
                       (b"topic:a", b'{"value": "2", "when": 1, "client": ""}'),
                       (b"topic:a", b'{"value": true, "when": 1, "client": ""}'),
                       (b"topic:a", b'[1]')):
        with pytest.raises(RecordError):
            decode_record(key, value)
