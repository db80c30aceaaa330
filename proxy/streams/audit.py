"""The KIP-708 audit: does each stateful task's set of copies (the active task and its
standbys) have a distinct value for every tag dimension, and where not, could the
instances present have done better?

For a task with copies on instances S and a dimension d, ``spread`` is ``full`` when
the copies' values of d are all different, ``same`` when they all share one value,
``partial`` in between, and ``single`` when the task has one copy only. The KIP lets
the assignor fall short of the ideal ("best effort"), so a task that is not fully
spread gets a verdict:

- ``not possible``: no set of instances present (the task's anchor, its active
  instance, kept; as many copies as the application's tasks have at most) has more
  distinct values in some dimension without fewer in another;
- ``possible but not done``: such a set exists, the assignor did not choose it.

The search runs over tag classes (instances with equal tags are interchangeable),
once per anchor class and copy count, so its cost grows with the number of distinct
tag combinations, not with instances or tasks; past :data:`SEARCH_LIMIT` candidate
sets it stops and says ``not known``.

Also: instances without a value for a dimension (``untagged``), instances whose zone
tag differs from the zone of the sidecar they come through (a configuration copied
from another zone), and, where every copy's sidecar zone is known, the spread over
the sidecars' zones (dimension :data:`SIDECAR_ZONE`): the zones the copies are really in.

Invariant: a pure function of an :class:`~proxy.streams.model.AppState`; no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations_with_replacement
from typing import Literal

from proxy.streams.model import AppState, Instance

Spread = Literal["full", "partial", "same", "single"]
Verdict = Literal["full", "not possible", "possible but not done", "not known", "single"]
SPREADS: tuple[Spread, ...] = ("full", "partial", "same", "single")
VERDICTS: tuple[Verdict, ...] = ("full", "not possible", "possible but not done",
                                 "not known", "single")
SIDECAR_ZONE = "sidecar-zone"
UNTAGGED = ""  # the value of a dimension an instance has no tag for
SEARCH_LIMIT = 200_000


@dataclass(frozen=True, slots=True)
class TaskAudit:
    task: str
    copies: tuple[str, ...]  # process ids, the active first
    values: dict[str, tuple[str, ...]]  # dimension -> the copies' values, in copy order
    spread: dict[str, Spread]
    verdict: Verdict

    @property
    def collapsed(self) -> tuple[str, ...]:
        """Dimensions in which two copies share a value."""
        return tuple(d for d, s in self.spread.items() if s in ("partial", "same"))


@dataclass(frozen=True, slots=True)
class ZoneMismatch:
    process_id: str
    label: str
    tag_value: str | None
    sidecar_zone: str


@dataclass(frozen=True, slots=True)
class AppAudit:
    app: str
    dimensions: tuple[str, ...]
    instances: tuple[Instance, ...]
    copies: int  # the most copies a stateful task has
    tasks: tuple[TaskAudit, ...]
    untagged: dict[str, tuple[str, ...]]  # process id -> dimensions it has no tag for
    zone_mismatch: tuple[ZoneMismatch, ...]
    ideal_possible: bool | None  # some `copies` instances differ in every dimension

    def counts(self, dimension: str) -> dict[Spread, int]:
        out: dict[Spread, int] = dict.fromkeys(SPREADS, 0)
        for t in self.tasks:
            if dimension in t.spread:
                out[t.spread[dimension]] += 1
        return out

    def verdicts(self) -> dict[Verdict, int]:
        out: dict[Verdict, int] = dict.fromkeys(VERDICTS, 0)
        for t in self.tasks:
            out[t.verdict] += 1
        return out

    @property
    def fully_spread(self) -> int:
        return sum(1 for t in self.tasks if t.verdict == "full")


def spread_of(values: Sequence[str]) -> Spread:
    if len(values) < 2:
        return "single"
    distinct = len(set(values))
    if distinct == len(values):
        return "full"
    return "same" if distinct == 1 else "partial"


def audit(state: AppState, dimensions: Sequence[str] = (), zone_tag: str | None = "zone"
          ) -> AppAudit:
    """The audit of one application. ``dimensions``: the tag keys the assignor uses
    (``rack.aware.assignment.tags``; empty: every key some instance carries)."""
    instances = {i.process_id: i for i in state.instances}
    dims = tuple(dimensions) or tuple(sorted({k for i in state.instances for k in i.tags}))
    tasks = sorted(set(state.standby) | (state.stateful & set(state.active))
                   | (state.stateful & set(state.standby)), key=_task_order)
    copies_of = {t: _copies(state, t) for t in tasks}
    copies_of = {t: c for t, c in copies_of.items() if c}
    most = max((len(c) for c in copies_of.values()), default=0)
    zones_known = all(i.sidecar_zone for i in state.instances) and bool(state.instances)

    def vector(process: str, over: tuple[str, ...]) -> tuple[str, ...]:
        inst = instances.get(process)
        return tuple(_value(inst, d) if inst else UNTAGGED for d in over)

    def vector_zone(copies: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_value(instances[p], SIDECAR_ZONE) if p in instances else UNTAGGED
                     for p in copies)

    # the verdict weighs the assignor's dimensions only: it cannot see the sidecars' zones
    classes = Counter(vector(p, dims) for p in instances)
    frozen_classes = tuple(sorted(classes.items()))
    target = min(most, len(instances))
    audits = []
    for task in tasks:
        copies = copies_of.get(task)
        if not copies:
            continue
        vectors = [vector(p, dims) for p in copies]
        values = {d: tuple(v[k] for v in vectors) for k, d in enumerate(dims)}
        if zones_known:
            values[SIDECAR_ZONE] = vector_zone(copies)
        spread = {d: spread_of(v) for d, v in values.items()}
        tag_spread = {d: spread[d] for d in dims}
        audits.append(TaskAudit(task, copies, values, spread,
                                _verdict(vectors, tag_spread, frozen_classes, target)))
    untagged = {i.process_id: missing for i in state.instances
                if (missing := tuple(d for d in dims if d not in i.tags))}
    mismatch = tuple(
        ZoneMismatch(i.process_id, i.label, i.tags.get(zone_tag), i.sidecar_zone)
        for i in state.instances
        if zone_tag and i.sidecar_zone and i.tags.get(zone_tag) != i.sidecar_zone)
    ideal = _ideal_possible(frozen_classes, target) if target >= 2 else None
    space = dims + ((SIDECAR_ZONE,) if zones_known else ())
    return AppAudit(state.app, space, state.instances, most, tuple(audits), untagged,
                    mismatch, ideal)


def _value(inst: Instance, dimension: str) -> str:
    if dimension == SIDECAR_ZONE:
        return inst.sidecar_zone or UNTAGGED
    return inst.tags.get(dimension, UNTAGGED)


def _task_order(task: str) -> tuple[object, ...]:
    head, _, part = task.rpartition("_")
    return (head, int(part) if part.isdigit() else part)


def _copies(state: AppState, task: str) -> tuple[str, ...]:
    active = state.active.get(task)
    standbys = tuple(p for p in state.standby.get(task, ()) if p != active)
    return ((active,) if active else ()) + standbys


Classes = tuple[tuple[tuple[str, ...], int], ...]


def _verdict(vectors: list[tuple[str, ...]], spread: dict[str, Spread], classes: Classes,
             target: int) -> Verdict:
    if len(vectors) < 2 and target < 2:
        return "single"
    if len(vectors) >= target and all(s == "full" for s in spread.values()):
        return "full"
    current = _distinct(vectors)
    reachable = _reachable(classes, vectors[0], max(target, len(vectors)))
    if reachable is None:
        return "not known"
    better = any(all(r >= c for r, c in zip(v, current, strict=True)) and v != current
                 for v in reachable)
    return "possible but not done" if better else "not possible"


def _distinct(vectors: Sequence[tuple[str, ...]]) -> tuple[int, ...]:
    if not vectors:
        return ()
    return tuple(len({v[k] for v in vectors}) for k in range(len(vectors[0])))


@lru_cache(maxsize=256)
def _reachable(classes: Classes, anchor: tuple[str, ...], size: int
               ) -> frozenset[tuple[int, ...]] | None:
    """The distinct-count vectors of every set of ``size`` instances holding the anchor's
    class (None past the search limit)."""
    left = {vec: n - (1 if vec == anchor else 0) for vec, n in classes}
    names = [vec for vec, n in left.items() if n > 0]
    out: set[tuple[int, ...]] = set()
    tried = 0
    for pick in combinations_with_replacement(names, size - 1):
        tried += 1
        if tried > SEARCH_LIMIT:
            return None
        used = Counter(pick)
        if any(used[v] > left[v] for v in used):
            continue
        out.add(_distinct([anchor, *pick]))
    return frozenset(out)


def _ideal_possible(classes: Classes, size: int) -> bool | None:
    """Whether some ``size`` instances have pairwise different values in every dimension
    (the KIP's ideal distribution)."""
    full = tuple(size for _ in (classes[0][0] if classes else ()))
    for anchor, _n in classes:
        reachable = _reachable(classes, anchor, size)
        if reachable is None:
            return None
        if full in reachable:
            return True
    return False
