"""Placement metrics, computed from the current cluster view at scrape time.

Invariant: like the KIP-1290 rack-coverage metrics (ops/kip_metrics.py), no
request is made and nothing is kept between views: each scrape reads the one
immutable :class:`ClusterView` current at that moment and the rack rule in
force. The figures of one (view, rule) pair are computed once and reused
while both stay the same objects (both are immutable), so frequent scrapes of
an unchanged cluster cost a dictionary lookup.

Per topic whose ``min.insync.racks`` (N) is above 1, counting all replicas'
racks as the rule counts them (the rack of a rackless broker is ""; a broker
never seen counts for none):

* ``rackguard_placement_unsatisfiable_partitions{topic}``: replicas span < N racks;
* ``rackguard_placement_fragile_partitions{topic}``: replicas span exactly N racks;

and over every partition, by the current leader's rack (``none``: no leader):

* ``rackguard_placement_leaders{rack}``.

Topics with N = 1 are not checked (as the rule and the coverage metrics), so a
cluster without the rule exports only the leaders per rack. Where racks have
dimensions and the topic a minimum per dimension, a partition's status is the worst
over the racks and each dimension (:func:`.audit.worst_dimension`), and such a topic
is checked whatever its N.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from proxy.cluster.view import ClusterView
from proxy.enforce.policy import RackRule
from proxy.placement.audit import Spread, Status, classify, worst_dimension

UNSATISFIABLE = "rackguard_placement_unsatisfiable_partitions"
FRAGILE = "rackguard_placement_fragile_partitions"
LEADERS = "rackguard_placement_leaders"
NO_LEADER = "none"

HELP = {
    UNSATISFIABLE: "Partitions of the topic whose replicas span fewer racks than "
                   "min.insync.racks: acks=all is refused even with every broker up",
    FRAGILE: "Partitions of the topic whose replicas span exactly min.insync.racks racks: "
             "losing one of those racks refuses acks=all",
    LEADERS: "Partitions led by a broker of this rack (the rack \"\" is a rackless broker's)",
}


@dataclass(frozen=True, slots=True)
class PlacementFigures:
    per_topic: dict[str, tuple[int, int]]  # topic -> (unsatisfiable, fragile), N > 1 only
    leaders_per_rack: dict[str, int]


def compute(view: ClusterView, rule: RackRule) -> PlacementFigures:
    per_topic: dict[str, tuple[int, int]] = {}
    leaders: dict[str, int] = {view.rack_of(n): 0 for n in view.brokers}
    spread = Spread(rule.dimensions, rule.minimums) if rule.dimensions is not None else None
    for name, topic in view.topics.items():
        required = rule.required_racks(name)
        minimums = rule.minimums(name)
        checked = required > 1 or minimums is not None
        unsatisfiable = fragile = 0
        for p in topic.partitions.values():
            rack = view.rack_of(p.leader) if p.leader >= 0 else NO_LEADER
            leaders[rack] = leaders.get(rack, 0) + 1
            if checked:
                racks = view.isr_racks(p.replicas)
                status = classify(len(racks), required) if required > 1 else Status.HEALTHY
                if minimums is not None:
                    status, _ = worst_dimension(frozenset(racks), status, spread, minimums)
                unsatisfiable += status is Status.UNSATISFIABLE
                fragile += status is Status.FRAGILE
        if checked:
            per_topic[name] = (unsatisfiable, fragile)
    return PlacementFigures(per_topic, leaders)


class PlacementCollector:
    """Renders the placement figures of whatever view and rule are current when scraped."""

    def __init__(self, view: Callable[[], ClusterView], rule: Callable[[], RackRule]) -> None:
        self._view = view
        self._rule = rule
        self._last: tuple[ClusterView, RackRule, PlacementFigures] | None = None

    def figures(self) -> PlacementFigures:
        view, rule = self._view(), self._rule()
        last = self._last
        if last is not None and last[0] is view and last[1] is rule:
            return last[2]
        figures = compute(view, rule)
        self._last = (view, rule, figures)
        return figures

    def exposition(self) -> bytes:
        """The families in the Prometheus text format (0.0.4)."""
        f = self.figures()
        topics = sorted(f.per_topic)
        out = [
            _header(UNSATISFIABLE),
            *(f'{UNSATISFIABLE}{{topic="{_escape(t)}"}} {f.per_topic[t][0]}\n' for t in topics),
            _header(FRAGILE),
            *(f'{FRAGILE}{{topic="{_escape(t)}"}} {f.per_topic[t][1]}\n' for t in topics),
            _header(LEADERS),
            *(f'{LEADERS}{{rack="{_escape(r)}"}} {n}\n'
              for r, n in sorted(f.leaders_per_rack.items())),
        ]
        return "".join(out).encode()


def _header(name: str) -> str:
    return f"# HELP {name} {HELP[name]}\n# TYPE {name} gauge\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
