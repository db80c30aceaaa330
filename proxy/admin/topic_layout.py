"""What the config topic must look like to take a change in any outage that leaves a
rack serving, what is wrong with one that exists, and why a write to it failed.

Pure: values in, values out (the IO is :mod:`.topic_check` and :mod:`.store`).

The trade-off (docs/admin-configs.md, "The config topic"): one partition with a
replica in every rack and ``min.insync.replicas=1``, written with acks=all. A write
is then acknowledged by every replica in sync at that moment, and refused only when
no leader can be elected (every in-sync replica down; unclean election stays off).
What it gives up: with a single replica in sync, a value acknowledged by it alone
is lost if that broker's disk is lost before the others copy it. The value is small,
set again in one command, and every proxy logs each value it applies.

Invariant: a message built here names the partition, its leader and ISR (with their
racks) and what would make it writable, so the operator's tool shows the cause.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

WANTED_MIN_ISR = 1
WANTED_CONFIGS = {"cleanup.policy": "compact", "min.insync.replicas": str(WANTED_MIN_ISR)}

# reasons (the ``reason`` label of rackguard_config_store_write_failures_total)
NOT_ENOUGH_REPLICAS = "not_enough_replicas"
NO_LEADER = "no_leader"
TIMEOUT = "timeout"
AUTHORIZATION = "authorization"
UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class PartitionLayout:
    """The config topic's partition 0 as the brokers describe it."""

    leader: int  # -1: none
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_insync_replicas: int | None = None  # None: not known


@dataclass(frozen=True, slots=True)
class Problem:
    """A setting of an existing config topic that makes it refuse writes in an outage."""

    text: str  # for the log and /readyz: what is wrong and what to change
    fix: Mapping[str, str] | None = None  # topic configs the proxy can set itself


def replication_factor(racks: Mapping[int, str]) -> int:
    """One replica per rack, and at least three where there are three brokers."""
    brokers = len(racks)
    return max(1, min(brokers, max(len(set(racks.values())), 3)))


def assignment(racks: Mapping[int, str]) -> list[int]:
    """Brokers for a new config topic: one in every rack first (the lowest id of each),
    then others, rack by rack, up to :func:`replication_factor`."""
    by_rack: dict[str, list[int]] = {}
    for node in sorted(racks):
        by_rack.setdefault(racks[node], []).append(node)
    queues = [by_rack[r] for r in sorted(by_rack)]
    chosen: list[int] = []
    depth = 0
    while len(chosen) < replication_factor(racks) and queues:
        row = [q[depth] for q in queues if depth < len(q)]
        if not row:
            break
        chosen.extend(row)
        depth += 1
    return chosen[:replication_factor(racks)]


def problems(topic: str, layout: PartitionLayout, rack_of: Callable[[int], str],
             racks: set[str], bootstrap: str) -> list[Problem]:
    """What keeps ``topic`` (as ``layout`` describes it) from taking a change while only
    one rack serves. ``racks``: every rack of the cluster."""
    found = []
    min_isr = layout.min_insync_replicas
    if min_isr is not None and min_isr > WANTED_MIN_ISR:
        found.append(Problem(
            f"config topic {topic} has min.insync.replicas={min_isr}: with fewer than "
            f"{min_isr} replicas in sync (two of three racks down) it takes no "
            f"min.insync.racks change; set it to 1: kafka-configs.sh --bootstrap-server "
            f"{bootstrap} --alter --entity-type topics --entity-name {topic} "
            f"--add-config min.insync.replicas=1",
            {"min.insync.replicas": str(WANTED_MIN_ISR)}))
    covered = {rack_of(n) for n in layout.replicas}
    missing = sorted(racks - covered)
    if missing and len(racks) > 1:
        found.append(Problem(
            f"config topic {topic} has replicas on brokers {list(layout.replicas)} "
            f"({_racks(layout.replicas, rack_of)}), none in {', '.join(missing)}: while "
            f"only {', '.join(missing)} serves it takes no change; add a replica there "
            f"(kafka-reassign-partitions.sh)"))
    return found


def explain_failure(topic: str, error: str, layout: PartitionLayout | None,
                    rack_of: Callable[[int], str], live: set[int],
                    timeout_s: float) -> tuple[str, str]:
    """(reason, message) for a write to ``topic`` that failed with ``error`` (the Kafka
    error's class name, or ``TimeoutError``); ``layout``: the partition as a broker
    described it just after (None: no broker answered); ``live``: the brokers the
    proxy's metadata lists."""
    where = f"partition {topic}-0"
    if "Authorization" in error:
        return AUTHORIZATION, (f"{where}: rackguard's own identity may not write to it "
                               f"({error}); grant it WRITE on topic {topic}")
    if layout is None:
        return UNAVAILABLE, (f"{where}: no broker answered ({error}); it takes writes "
                             "again when a broker holding one of its replicas answers")
    state = (f"leader {_node(layout.leader, rack_of)}, ISR "
             f"{_nodes(layout.isr, rack_of)}, replicas {_nodes(layout.replicas, rack_of)}")
    if layout.leader < 0:
        back = [n for n in layout.isr if n not in live] or list(layout.isr)
        wait = (f"it takes writes again when one of its in-sync replicas, "
                f"{_nodes(tuple(back), rack_of)}, is back" if back
                else "it takes writes again when a replica is back")
        return NO_LEADER, (f"{where} has no leader ({state}); {wait} (unclean leader "
                           f"election is off, so no out-of-sync replica is elected)")
    min_isr = layout.min_insync_replicas
    if "NotEnoughReplicas" in error or (min_isr is not None and len(layout.isr) < min_isr):
        need = f"min.insync.replicas={min_isr}" if min_isr is not None else \
            "its min.insync.replicas"
        return NOT_ENOUGH_REPLICAS, (
            f"{where} has fewer in-sync replicas than {need} ({state}); it takes writes "
            f"again when enough replicas are back in sync, or at once with "
            f"min.insync.replicas=1 on {topic} (kafka-configs.sh --alter --entity-type "
            f"topics --entity-name {topic} --add-config min.insync.replicas=1)")
    if error in ("TimeoutError", "KafkaTimeoutError", "RequestTimedOutError"):
        return TIMEOUT, (
            f"{where}: no acknowledgement within {timeout_s:.0f} s ({state}); a hung leader "
            "is fenced by the controller after its session timeout and another in-sync "
            "replica takes over: try again (the value may still have been stored; "
            "--describe shows it)")
    return UNAVAILABLE, (f"{where}: {error} ({state}); try again: aiokafka follows "
                         "the leadership as it moves")


def _node(node: int, rack_of: Callable[[int], str]) -> str:
    return "none" if node < 0 else f"{node} ({rack_of(node) or 'no rack'})"


def _nodes(nodes: tuple[int, ...], rack_of: Callable[[int], str]) -> str:
    return "[" + ", ".join(_node(n, rack_of) for n in nodes) + "]"


def _racks(nodes: tuple[int, ...], rack_of: Callable[[int], str]) -> str:
    return ", ".join(sorted({rack_of(n) or "no rack" for n in nodes}))
