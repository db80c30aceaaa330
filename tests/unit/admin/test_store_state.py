"""proxy.admin.store without a cluster, and the readiness it gives /readyz.

Invariants under test: records apply in offset order per key (our own acknowledged
write is not undone by an older record read later); ``on_change`` sees the old and the
new state only when a value changed; silence from the config topic beyond the bound is
one counted failure, shown until reading resumes; /readyz is not ready until the topic
was read to its end, and shows a later failure while staying ready.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from proxy.admin.service import AdminConfigs
from proxy.admin.state import Change, DynamicConfigs, Resource, StoredValue
from proxy.admin.store import ConfigTopicStore, StoreSettings
from proxy.cluster.view import ClusterView
from proxy.ops.health import Health
from proxy.settings import load_settings
from tests.unit.admin.no_cluster import NoCluster


def store(changes: list[tuple[DynamicConfigs, DynamicConfigs, Change]],
          failures: list[int]) -> ConfigTopicStore:
    return ConfigTopicStore(StoreSettings("t", ("b:1",), 1.0), ClusterView, NoCluster(),
                            lambda old, new, change: changes.append((old, new, change)),
                            lambda: failures.append(1))


def value(n: int) -> StoredValue:
    return StoredValue(n, 1.0, "c")


def test_records_apply_in_offset_order_and_changes_are_reported_once() -> None:
    seen: list[tuple[DynamicConfigs, DynamicConfigs, Change]] = []
    s = store(seen, [])
    orders = Resource("orders")
    s._apply(Change(orders, value(1)), 10)  # our own write, acknowledged at offset 10
    s._apply(Change(orders, value(2)), 7)  # an older record read later: skipped
    assert s.state.get(orders) == value(1)
    s._apply(Change(orders, value(1)), 10)  # the same record read back: no change
    s._apply(Change(orders, None, "adm"), 11)
    assert s.state.get(orders) is None
    assert [(old.get(orders), new.get(orders)) for old, new, _ in seen] == [
        (None, value(1)), (value(1), None)]


def test_silence_is_one_counted_failure_until_reading_resumes() -> None:
    failures: list[int] = []
    s = store([], failures)
    assert s.last_error is None
    s._silence("broker 1 did not answer a Fetch within 1.0 s")  # the follower's bound
    assert s.last_error is not None and "no answer" in s.last_error and failures == [1]
    assert "broker 1 did not answer" in s.last_error
    s._silence(None)  # an answer again
    assert s.last_error is None and failures == [1]


def test_readiness_waits_for_the_config_topic() -> None:
    settings = load_settings({"upstream": "127.0.0.1:9"}, env={})
    admin = AdminConfigs(settings, CollectorRegistry(), lambda: None,  # type: ignore[arg-type]
                         lambda: None, lambda: None,  # type: ignore[arg-type, return-value]
                         NoCluster())
    assert admin.store is not None
    base = Health(True, "ready: metadata 0.1 s old")
    waiting = admin.health(base)
    assert not waiting.ok and "not read to its end" in waiting.reason
    admin.store.caught_up = True
    assert admin.health(base) == base
    admin.store.last_error = "no answer from its leader for 9 s"
    shown = admin.health(base)
    assert shown.ok and "no answer from its leader" in shown.reason
    assert admin.health(Health(False, "no metadata")) == Health(False, "no metadata")
    off = AdminConfigs(load_settings({"upstream": "127.0.0.1:9", "config_topic": ""}, env={}),
                       CollectorRegistry(), lambda: None,  # type: ignore[arg-type]
                       lambda: None, lambda: None,  # type: ignore[arg-type, return-value]
                       NoCluster())
    assert off.store is None and off.health(base) == base
