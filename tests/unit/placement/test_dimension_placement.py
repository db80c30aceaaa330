"""Placement audit and plan over rack dimensions (racks split into region/zone).

Invariants under test: a partition whose replicas span too few values of a dimension
is unsatisfiable (fewer than its minimum) or fragile (exactly it) even where its racks
are enough, and the finding names the dimension; ``plan --fix`` moves the fewest
replicas to reach the dimension's target without losing racks or moving the leader,
refuses a minimum above the cluster's values, and reports a replication factor too
small as not fixable; the command takes the dimensions from its flags.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from proxy.enforce.dimensions import RackDimensions
from proxy.placement.audit import Spread, Status, audit
from proxy.placement.command import run
from proxy.placement.kip36 import PlacementError
from proxy.placement.model import PartitionReplicas as P
from proxy.placement.model import replica_racks
from proxy.placement.plan import plan_fix

RACKS = {1: "eu-central-1/a", 2: "eu-central-1/b", 3: "eu-west-1/a", 4: "eu-central-1/c",
         5: "eu-west-1/b"}
DIMS = RackDimensions.parse("region/zone")


def spread(minimums: Mapping[str, int] | None) -> Spread:
    return Spread(DIMS, lambda topic: minimums if topic != "free" else None)


def regions(replicas: tuple[int, ...]) -> int:
    return len(spread(None).values(replica_racks(RACKS, replicas), "region"))


TOPICS = {"t": {0: P((1, 2, 4), 1), 1: P((1, 2, 3), 2), 2: P((1, 3, 5), 1)},
          "free": {0: P((1, 2, 4), 1)}}


def test_audit_names_the_dimension() -> None:
    result = audit(RACKS, TOPICS, lambda t: 2, spread({"region": 2}))
    t = next(a for a in result.topics if a.topic == "t")
    assert (t.unsatisfiable, t.fragile, t.healthy) == (1, 2, 0)
    one, two, three = t.findings
    assert one.status is Status.UNSATISFIABLE and one.dimension is not None
    assert (one.dimension.dimension, one.dimension.values, one.dimension.required) == (
        "region", ("eu-central-1",), 2)
    assert two.status is Status.FRAGILE and two.dimension is not None  # 2 regions of 2
    assert three.status is Status.FRAGILE and three.dimension is not None
    assert one.to_json()["dimension"] == {"name": "region", "values": ["eu-central-1"],
                                          "min_insync_racks": 2}
    free = next(a for a in result.topics if a.topic == "free")
    assert free.healthy == 1  # no minimum per dimension: 3 racks > 2
    plain = audit(RACKS, TOPICS, lambda t: 2)
    assert all(f.dimension is None for a in plain.topics for f in a.findings)
    assert next(a for a in plain.topics if a.topic == "t").healthy == 3


def test_racks_win_a_tie() -> None:
    result = audit(RACKS, {"t": {0: P((1, 1), 1)}}, lambda t: 2, spread({"region": 2}))
    [finding] = result.topics[0].findings
    assert finding.status is Status.UNSATISFIABLE and finding.dimension is None


def test_plan_adds_the_missing_region() -> None:
    plan = plan_fix(RACKS, {"t": {0: P((1, 2, 4), 1)}}, lambda t: 2, spare=False,
                    spread=spread({"region": 2}))
    [move] = plan.reassignments
    assert move.moves == 1 and move.after[0] == 1  # the leader stays
    assert regions(move.after) == 2 and move.racks_after >= move.racks_before
    spared = plan_fix(RACKS, {"t": {0: P((1, 2, 4), 1)}}, lambda t: 2,
                      spread=spread({"region": 2}))
    assert regions(spared.reassignments[0].after) == 2 and spared.moves == 1
    fine = plan_fix(RACKS, {"t": {0: P((1, 3, 4), 1)}}, lambda t: 2, spare=False,
                    spread=spread({"region": 2}))
    assert fine.reassignments == ()


def test_plan_zone_and_region_together() -> None:
    racks = {1: "r1/z1", 2: "r1/z1", 3: "r1/z2", 4: "r2/z3", 5: "r2/z3"}
    plan = plan_fix(racks, {"t": {0: P((1, 2, 3), 1)}}, lambda t: 1, spare=False,
                    spread=spread({"region": 2, "zone": 3}))
    [move] = plan.reassignments
    values = Spread(DIMS, lambda t: None).values(replica_racks(racks, move.after), "zone")
    assert len(values) == 3 and move.moves == 1 and move.after[:1] == (1,)


def test_plan_refuses_what_no_move_can_do() -> None:
    with pytest.raises(PlacementError, match=r"min.insync.racks.region 3 .* 2 value"):
        plan_fix(RACKS, TOPICS, lambda t: 1, spread=spread({"region": 3}))
    plan = plan_fix(RACKS, {"t": {0: P((1,), 1)}}, lambda t: 1, spread=spread({"region": 2}))
    [unfixable] = plan.unfixable
    assert "cannot span 2 values of region" in unfixable.reason and plan.reassignments == ()


def test_command_takes_dimensions_from_flags(tmp_path: Path) -> None:
    current = tmp_path / "current.json"
    current.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2, 4]}]}))
    brokers = ",".join(f"{b}={r}" for b, r in RACKS.items())
    base = ["--brokers", brokers, "--assignment", str(current), "--min-insync-racks", "2",
            "--rack-dimensions", "region/zone", "--min-insync-racks-by-dimension", "region=2"]
    out, err = io.StringIO(), io.StringIO()
    assert run(["audit", *base, "--json"], out, err) == 0, err.getvalue()
    [finding] = json.loads(out.getvalue())["topics"][0]["partitions_at_risk"]
    assert finding["status"] == "unsatisfiable" and finding["dimension"]["name"] == "region"
    out = io.StringIO()
    assert run(["audit", *base], out, err) == 0
    assert "min.insync.racks.region=2" in out.getvalue()
    out = io.StringIO()
    assert run(["plan", *base, "--fix"], out, err) == 0, err.getvalue()
    [moved] = json.loads(out.getvalue())["partitions"]
    assert regions(tuple(moved["replicas"])) == 2
    bad = io.StringIO()
    assert run(["audit", "--brokers", brokers, "--assignment", str(current),
                "--min-insync-racks-by-dimension", "region=2"], io.StringIO(), bad) == 2
    assert "needs --rack-dimensions" in bad.getvalue()



def test_placement_metrics_count_a_dimension() -> None:
    from proxy.cluster.view import ClusterViewStore
    from proxy.enforce.policy import RackRule
    from proxy.placement.metrics import compute
    from tests.unit._views import Clock, broker, part, snap, topic

    store = ClusterViewStore(Clock())
    store.apply_metadata(snap([
        topic("t", [part(0, (1, 2, 4), replicas=(1, 2, 4)),   # one region: unsatisfiable
                    part(1, (1, 3, 4), replicas=(1, 3, 4))]),  # two of two: fragile
        topic("u", [part(0, (1, 2, 4), replicas=(1, 2, 4))]),
    ], brokers=tuple(broker(b, r) for b, r in RACKS.items())), full=True)
    rule = RackRule(1, dimensions=DIMS, topic_dimension_minimums={"t": {"region": 2}})
    assert compute(store.view, rule).per_topic == {"t": (1, 1)}  # u: nothing to check
