"""proxy.streams.audit on the KIP-708 example (9 instances: 3 clusters x 3 zones, two
standbys, 12 stateful tasks) and its variants: the ideal distribution is recognised,
a collapsed dimension is named, "not possible" (two zones only) is told apart from
"possible but not done", untagged instances and copied zone tags are named."""

from __future__ import annotations

from proxy.streams.audit import SIDECAR_ZONE, audit, spread_of
from proxy.streams.model import AppState, Instance, MemberData, app_from_members

ZONES = ("eu-central-1a", "eu-central-1b", "eu-central-1c")
CLUSTERS = ("k8s-cluster1", "k8s-cluster2", "k8s-cluster3")


def kip_instances(zones: tuple[str, ...] = ZONES, copied: dict[int, str] | None = None
                  ) -> list[Instance]:
    """Node-1..Node-9 as in the KIP (cluster-major); ``copied``: node -> the zone its
    client.tag.zone says, where it differs from the zone it runs in."""
    out = []
    for c, cluster in enumerate(CLUSTERS):
        for z, zone in enumerate(zones):
            n = c * len(zones) + z + 1
            tag = (copied or {}).get(n, zone)
            out.append(Instance(f"p{n}", {"cluster": cluster, "zone": tag},
                                client_ids=(f"node-{n}",), sidecar_zone=zone))
    return out


def ideal(instances: list[Instance], tasks: int = 12) -> AppState:
    """Task i active on instance (c, z) and standbys on (c+1, z+1), (c+2, z+2)."""
    n = len(instances)
    zones = n // 3
    active, standby = {}, {}
    for t in range(tasks):
        c, z = t % 3, (t // 3) % zones
        pick = [instances[((c + k) % 3) * zones + (z + k) % zones] for k in range(3)]
        active[f"0_{t}"] = pick[0].process_id
        standby[f"0_{t}"] = tuple(p.process_id for p in pick[1:])
    assert n == 3 * zones
    return AppState("wordcount", tuple(instances), active, standby)


def test_spread_of() -> None:
    assert spread_of(["a", "b", "c"]) == "full"
    assert spread_of(["a", "a", "c"]) == "partial"
    assert spread_of(["a", "a"]) == "same"
    assert spread_of(["a"]) == "single"


def test_the_kips_ideal_distribution_is_full_on_both_dimensions() -> None:
    report = audit(ideal(kip_instances()), ("zone", "cluster"))
    assert len(report.tasks) == 12 and report.copies == 3
    assert report.fully_spread == 12
    for dim in ("zone", "cluster", SIDECAR_ZONE):
        assert report.counts(dim) == {"full": 12, "partial": 0, "same": 0, "single": 0}
    assert report.ideal_possible is True
    assert report.untagged == {} and report.zone_mismatch == ()
    assert report.verdicts()["full"] == 12


def test_dimensions_default_to_every_tag_key() -> None:
    assert audit(ideal(kip_instances())).dimensions == ("cluster", "zone", SIDECAR_ZONE)


def test_a_collapsed_dimension_that_could_have_been_spread() -> None:
    state = ideal(kip_instances())
    # task 0_0: standbys moved into the active's cluster (p1 -> p2, p3)
    standby = dict(state.standby)
    standby["0_0"] = ("p2", "p3")
    report = audit(AppState(state.app, state.instances, state.active, standby),
                   ("zone", "cluster"))
    task = report.tasks[0]
    assert task.task == "0_0" and task.copies == ("p1", "p2", "p3")
    assert task.spread == {"zone": "full", "cluster": "same", SIDECAR_ZONE: "full"}
    assert task.collapsed == ("cluster",)
    assert task.verdict == "possible but not done"
    assert report.fully_spread == 11


def test_two_zones_only_is_not_possible_rather_than_not_done() -> None:
    instances = kip_instances(ZONES[:2])  # 6 instances: 3 clusters x 2 zones
    report = audit(ideal(instances), ("zone", "cluster"))
    assert report.ideal_possible is False
    for t in report.tasks:
        assert t.spread["zone"] == "partial" and t.spread["cluster"] == "full"
        assert t.verdict == "not possible"
    assert report.counts("zone")["partial"] == 12


def test_copied_zone_tags_are_named_and_the_real_spread_shown() -> None:
    # nodes 3, 6, 9 run in eu-central-1c with a configuration copied from eu-central-1a
    instances = kip_instances(copied={3: ZONES[0], 6: ZONES[0], 9: ZONES[0]})
    report = audit(ideal(instances), ("zone", "cluster"))
    assert [(m.label, m.tag_value, m.sidecar_zone) for m in report.zone_mismatch] == [
        ("node-3", ZONES[0], ZONES[2]), ("node-6", ZONES[0], ZONES[2]),
        ("node-9", ZONES[0], ZONES[2])]
    # the placement is really spread (the sidecars' zones) but the tags say otherwise
    assert report.counts(SIDECAR_ZONE)["full"] == 12
    assert report.counts("zone")["full"] == 0
    assert report.ideal_possible is False  # by the tags only two zones exist


def test_untagged_instances_and_unknown_zones() -> None:
    instances = kip_instances()
    instances[4] = Instance("p5", {"cluster": CLUSTERS[1]}, client_ids=("node-5",))
    report = audit(ideal(instances), ("zone", "cluster"))
    assert report.untagged == {"p5": ("zone",)}
    assert SIDECAR_ZONE not in report.dimensions  # not every sidecar zone is known


def test_members_become_instances_by_process_id() -> None:
    members = [
        MemberData("m1", "p1", {"zone": "a"}, frozenset({"0_0"}), frozenset({"0_1"}),
                   client_id="node-1-t1"),
        MemberData("m2", "p1", {"zone": "a"}, frozenset({"0_2"}), frozenset(),
                   frozenset({"0_3"}), client_id="node-1-t2"),
        MemberData("m3", "p2", {"zone": "b"}, frozenset({"0_1"}), frozenset({"0_0", "0_2"})),
    ]
    state = app_from_members("app", members, {"p1": "a"})
    assert [i.members for i in state.instances] == [("m1", "m2"), ("m3",)]
    assert state.active == {"0_0": "p1", "0_2": "p1", "0_1": "p2"}
    assert state.standby == {"0_1": ("p1",), "0_0": ("p2",), "0_2": ("p2",)}
    assert state.stateful == {"0_3"}
    report = audit(state, ("zone",))
    assert [t.task for t in report.tasks] == ["0_0", "0_1", "0_2"]
    assert all(t.verdict == "full" for t in report.tasks)
