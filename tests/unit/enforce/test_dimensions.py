"""proxy.enforce.dimensions: broker racks split into named levels, and the per-level
minimum of distinct in-sync values, refused naming the level that falls short."""

from __future__ import annotations

import pytest

from proxy.enforce.dimensions import (
    DimensionError,
    RackDimensions,
    parse_minimums,
    placement_shortfall,
    shortfall,
)

DIMS = RackDimensions.parse("region/zone")


def test_parse_and_split() -> None:
    assert DIMS.names == ("region", "zone") and DIMS.separator == "/"
    assert DIMS.values("eu-central-1/eu-central-1a") == {"region": "eu-central-1",
                                                          "zone": "eu-central-1a"}
    assert DIMS.values("zone=eu-west-1b,region=eu-west-1") == {"region": "eu-west-1",
                                                                "zone": "eu-west-1b"}
    assert DIMS.values("eu-central-1") == {"region": "eu-central-1", "zone": ""}
    assert DIMS.values(None) == {"region": "", "zone": ""}
    assert RackDimensions.parse("dc:rack").values("dc1:r7") == {"dc": "dc1", "rack": "r7"}
    for bad in ("", "region//zone", "zone/zone"):
        with pytest.raises(DimensionError):
            RackDimensions.parse(bad)


def test_minimums() -> None:
    assert parse_minimums("region=2, zone=3", DIMS) == {"region": 2, "zone": 3}
    for bad in ("city=2", "region", "region=x", "zone=0"):
        with pytest.raises(DimensionError):
            parse_minimums(bad, DIMS)


STRETCH = {1: "eu-central-1/eu-central-1a", 2: "eu-central-1/eu-central-1b",
           3: "eu-central-1/eu-central-1c", 4: "eu-west-1/eu-west-1a",
           5: "eu-west-1/eu-west-1b", 6: None}


def racks(*nodes: int) -> list[str | None]:
    return [STRETCH[n] for n in nodes]


def test_three_zones_of_one_region_fail_the_region_minimum() -> None:
    need = {"region": 2, "zone": 2}
    miss = shortfall(racks(1, 2, 3), DIMS, need)
    assert miss is not None and miss.dimension == "region"
    assert miss.values == ("eu-central-1",) and miss.required == 2
    assert miss.message("orders", 0, [1, 2, 3]) == (
        "NOT_ENOUGH_RACKS: orders-0: in-sync replicas [1, 2, 3] span 1 region(s) "
        "[eu-central-1], min.insync.racks.region=2")
    assert shortfall(racks(1, 4), DIMS, need) is None


def test_the_zone_minimum_is_checked_too_and_rackless_counts_as_empty() -> None:
    need = {"region": 2, "zone": 3}
    miss = shortfall(racks(1, 4), DIMS, need)
    assert miss is not None and miss.dimension == "zone" and len(miss.values) == 2
    assert shortfall(racks(1, 2, 4), DIMS, need) is None
    miss = shortfall(racks(1, 6), DIMS, {"region": 2})
    assert miss is None  # "" counts as a region of its own, as a rackless broker does
    assert shortfall(racks(1, 2), DIMS, {"zone": 1}) is None


def test_placement_uses_the_same_rule_over_replicas() -> None:
    assert placement_shortfall(racks(1, 2, 3), DIMS, {"region": 2}) is not None
    assert placement_shortfall(racks(1, 2, 5), DIMS, {"region": 2, "zone": 3}) is None
