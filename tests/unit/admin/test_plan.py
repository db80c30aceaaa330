"""proxy.admin.plan and plan_create: how a config request is split.

Invariants under test: every resource is answered once (broker, proxy, or both for
a mixed one); min.insync.racks never reaches the broker; an invalid entry takes its
whole resource out (nothing of it applied); SET/DELETE become changes, APPEND and
SUBTRACT are refused; AlterConfigs without the entry deletes a dynamic value; a
per-broker entry and changes turned off are refused; CreateTopics likewise.
"""

from __future__ import annotations

from protocol.alter_configs import (
    ALTER_CONFIGS,
    APPEND,
    DELETE,
    INCREMENTAL_ALTER_CONFIGS,
    SET,
    SUBTRACT,
    AlterableConfig,
    AlterConfigsRequest,
    AlterResource,
)
from protocol.create_topics import CreateTopicsRequest, NewTopic, TopicConfig
from proxy.admin.plan import Context, plan_alter
from proxy.admin.plan_create import plan_create
from proxy.admin.rules import ClusterFacts
from proxy.admin.state import (
    CLUSTER_DEFAULT,
    Change,
    DynamicConfigs,
    Resource,
    StoredValue,
)

R = "min.insync.racks"
CTX = Context(DynamicConfigs(), ClusterFacts(racks=3, rackless=()), "adm@1.2.3.4:5", 100.0)


def res(rtype: int, name: str, *configs: tuple[str, int, str | None]) -> AlterResource:
    return AlterResource(rtype, name, tuple(AlterableConfig(n, v, op) for n, op, v in configs))


def incremental(*resources: AlterResource, validate: bool = False) -> AlterConfigsRequest:
    return AlterConfigsRequest(INCREMENTAL_ALTER_CONFIGS, 1, resources, validate)


def test_incremental_split() -> None:
    request = incremental(
        res(2, "only", (R, SET, "2")),
        res(2, "mixed", ("retention.ms", SET, "5"), (R, DELETE, None)),
        res(2, "other", ("retention.ms", SET, "5")),
        res(4, "", (R, SET, "4")),  # above the rack count: a warning
        res(2, "bad", ("retention.ms", SET, "5"), (R, SET, "two")),
        res(2, "listy", (R, APPEND, "2")),
        res(2, "subtract", (R, SUBTRACT, "2")),
        res(4, "1", (R, SET, "2")),
        res(8, "x", (R, SET, "2")),  # not a config type rackguard serves: the broker's
    )
    plan = plan_alter(request, CTX)
    assert plan.upstream is not None
    sent = {r.resource_name: [c.name for c in r.configs] for r in plan.upstream.resources}
    assert sent == {"mixed": ["retention.ms"], "other": ["retention.ms"], "x": [R]}
    assert plan.probe == ((2, "only"), (4, ""))
    assert plan.changes == {
        (2, "only"): (Change(Resource("only"), StoredValue(2, 100.0, "adm@1.2.3.4:5")),),
        (2, "mixed"): (Change(Resource("mixed"), None, "adm@1.2.3.4:5"),),
        (4, ""): (Change(CLUSTER_DEFAULT, StoredValue(4, 100.0, "adm@1.2.3.4:5")),)}
    codes = {k[1]: (r.error_code, r.error_message) for k, r in plan.local.items()}
    assert codes["only"] == (0, None) and codes["mixed"] == (0, None)
    assert codes[""][0] == 0 and "exceeds the 3 rack(s)" in (codes[""][1] or "")
    assert codes["bad"][0] == 40 and "'two'" in (codes["bad"][1] or "")
    assert codes["listy"][0] == 40 and "not a list" in (codes["listy"][1] or "")
    assert codes["subtract"][0] == 40
    assert codes["1"][0] == 40 and "per topic" in (codes["1"][1] or "")
    assert "other" not in codes and "x" not in codes
    assert len(plan.warnings) == 1
    everyone = {r.key for r in request.resources}
    assert everyone == set(plan.local) | {r.key for r in plan.upstream.resources}


def test_only_local_entries_send_nothing_upstream() -> None:
    plan = plan_alter(incremental(res(2, "a", (R, SET, "1")), validate=True), CTX)
    assert plan.upstream is None and plan.probe == ((2, "a"),)
    rackless = Context(DynamicConfigs(), ClusterFacts(3, (7,)), "c", 1.0)
    refused = plan_alter(incremental(res(2, "a", (R, SET, "2"))), rackless)
    assert refused.upstream is None and refused.probe == () and refused.changes == {}
    assert refused.local[(2, "a")].error_code == 40
    dup = plan_alter(incremental(res(2, "a", (R, SET, "2"), (R, SET, "3"))), CTX)
    assert dup.local[(2, "a")].error_code == 42


def test_alter_configs_replaces_the_whole_set() -> None:
    dynamic = DynamicConfigs().apply(Change(Resource("had"), StoredValue(2, 1.0, "x")))
    dynamic = dynamic.apply(Change(CLUSTER_DEFAULT, StoredValue(2, 1.0, "x")))
    ctx = Context(dynamic, CTX.facts, "c", 5.0)
    request = AlterConfigsRequest(ALTER_CONFIGS, 1, (
        res(2, "had", ("retention.ms", SET, "5")),
        res(2, "never", ("retention.ms", SET, "5")),
        res(2, "set", (R, SET, "3")),
        res(4, ""),
        res(4, "2", ("log.cleaner.threads", SET, "2")),
    ), False)
    plan = plan_alter(request, ctx)
    assert plan.upstream is not None
    assert [(r.resource_name, [c.name for c in r.configs]) for r in plan.upstream.resources] == [
        ("had", ["retention.ms"]), ("never", ["retention.ms"]), ("set", []), ("", []),
        ("2", ["log.cleaner.threads"])]
    assert plan.probe == ()  # the broker answers every resource of an AlterConfigs
    assert plan.changes[(2, "had")] == (Change(Resource("had"), None, "c"),)
    assert plan.changes[(4, "")] == (Change(CLUSTER_DEFAULT, None, "c"),)
    assert plan.changes[(2, "set")][0].value == StoredValue(3, 5.0, "c")
    assert (2, "never") not in plan.changes and (2, "never") not in plan.local


def test_changes_turned_off() -> None:
    off = Context(DynamicConfigs().apply(Change(Resource("had"), StoredValue(2, 1.0, "x"))),
                  CTX.facts, "c", 1.0, refuse_changes="read-only here")
    plan = plan_alter(incremental(res(2, "a", (R, SET, "2")), res(2, "b", ("x", SET, "1"))),
                      off)
    assert plan.local[(2, "a")].error_message == "read-only here" and plan.changes == {}
    whole = plan_alter(AlterConfigsRequest(ALTER_CONFIGS, 0, (res(2, "had"),), False), off)
    assert whole.changes == {} and whole.upstream is not None  # no implied delete


def test_create_topics() -> None:
    def topic(name: str, *configs: tuple[str, str | None]) -> NewTopic:
        return NewTopic(name, 3, 3, (), tuple(TopicConfig(n, v) for n, v in configs))

    request = CreateTopicsRequest(5, (
        topic("plain", ("cleanup.policy", "compact")),
        topic("racks", ("cleanup.policy", "compact"), (R, "2")),
        topic("bad", (R, "0")),
        topic("dup", (R, "2"), (R, "2")),
    ), 1000, False)
    plan = plan_create(request, CTX)
    assert plan.upstream is not None
    assert [(t.name, [c.name for c in t.configs]) for t in plan.upstream.topics] == [
        ("plain", ["cleanup.policy"]), ("racks", ["cleanup.policy"])]
    assert plan.changes == {"racks": (Change(Resource("racks"),
                                             StoredValue(2, 100.0, "adm@1.2.3.4:5")),)}
    assert plan.local["bad"].error_code == 40 and plan.local["dup"].error_code == 42
    only_bad = plan_create(CreateTopicsRequest(5, (topic("bad", (R, "x")),), 1, False), CTX)
    assert only_bad.upstream is None
