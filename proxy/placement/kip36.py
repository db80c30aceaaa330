"""Kafka's rack-aware replica assignment for a new topic (KIP-36), as a pure function.

Invariant: for the same inputs the result equals what Kafka's
``AdminUtils.assignReplicasToBrokers`` returns (org.apache.kafka.admin in
server-common; kafka.admin.AdminUtils before 3.x). Written from its documented
behaviour and checked against the expectations of Kafka's own tests:

* brokers are taken in node id order;
* with no rack on any broker, the rack-unaware round robin is used; a rack on
  some brokers but not all is an error (as in Kafka);
* rack-aware: the brokers are arranged rack by rack in turn (racks sorted by
  name, brokers by id within a rack: the *rack-alternated list*); partition
  ``p``'s first replica (its preferred leader) is ``list[(p + start) % n]``;
  the followers walk the list from a shift that grows by one each time the
  partition id wraps around the list, skipping a broker whose rack already
  holds a replica while some rack holds none, and a broker already holding
  one while some broker holds none;
* ``start_index`` is Kafka's ``fixedStartIndex``: it fixes both the first
  leader's position and the initial follower shift, which Kafka otherwise
  draws at random (two separate draws); ``start_partition`` is
  ``startPartitionId`` (the first new partition when partitions are added).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

Assignment = dict[int, tuple[int, ...]]


class PlacementError(ValueError):
    """A request no assignment can satisfy; the message says why."""


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Broker ids alternating over the racks: the first of each rack (racks sorted by
    name, brokers by id), then the second of each, and so on."""
    by_rack: dict[str, list[int]] = {}
    for node_id in sorted(racks):
        by_rack.setdefault(racks[node_id], []).append(node_id)
    columns = [by_rack[name] for name in sorted(by_rack)]
    out: list[int] = []
    for depth in range(max((len(c) for c in columns), default=0)):
        out.extend(column[depth] for column in columns if depth < len(column))
    return out


def _follower_index(first: int, shift: int, step: int, size: int) -> int:
    """Position of the ``step``-th follower candidate: never the first replica's own."""
    return (first + 1 + (shift + step) % (size - 1)) % size


def _check(brokers: int, partitions: int, replication_factor: int) -> None:
    if partitions <= 0:
        raise PlacementError("the number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise PlacementError("the replication factor must be larger than 0")
    if replication_factor > brokers:
        raise PlacementError(
            f"replication factor {replication_factor} larger than the {brokers} "
            "available brokers")


def assign(
    racks: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    start_index: int | None = None,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> Assignment:
    """Partition id -> replicas (preferred leader first), as Kafka assigns a new topic.

    ``racks`` maps every broker that may hold a replica to its rack (None: no rack).
    Without ``start_index`` the leader position and the follower shift are drawn from
    ``rng`` as Kafka draws them.
    """
    _check(len(racks), partitions, replication_factor)
    given = [r for r in racks.values() if r is not None]
    if given and len(given) != len(racks):
        rackless = sorted(n for n, r in racks.items() if r is None)
        raise PlacementError(
            "not all brokers have rack information for a rack-aware assignment "
            f"(no rack: {', '.join(map(str, rackless))})")
    size = len(racks)
    if start_index is None:
        draw = rng or random.Random()
        start, shift = draw.randrange(size), draw.randrange(size)
    else:
        if start_index < 0:
            raise PlacementError("the start index must be >= 0")
        start = shift = start_index
    if not given:
        return _rack_unaware(sorted(racks), partitions, replication_factor, start, shift,
                             start_partition)
    known = {n: r for n, r in racks.items() if r is not None}
    return _rack_aware(known, partitions, replication_factor, start, shift, start_partition)


def _rack_unaware(
    brokers: list[int], partitions: int, rf: int, start: int, shift: int, first_id: int,
) -> Assignment:
    size = len(brokers)
    out: Assignment = {}
    for partition in range(max(0, first_id), max(0, first_id) + partitions):
        if partition > 0 and partition % size == 0:
            shift += 1
        first = (partition + start) % size
        followers = [brokers[_follower_index(first, shift, j, size)] for j in range(rf - 1)]
        out[partition] = (brokers[first], *followers)
    return out


def _rack_aware(
    racks: Mapping[int, str], partitions: int, rf: int, start: int, shift: int, first_id: int,
) -> Assignment:
    arranged = rack_alternated(racks)
    size = len(arranged)
    rack_count = len(set(racks.values()))
    out: Assignment = {}
    for partition in range(max(0, first_id), max(0, first_id) + partitions):
        if partition > 0 and partition % size == 0:
            shift += 1
        first = (partition + start) % size
        leader = arranged[first]
        chosen = [leader]
        racks_used = {racks[leader]}
        step = 0
        while len(chosen) < rf:
            broker = arranged[_follower_index(first, shift * rack_count, step, size)]
            step += 1
            rack_ok = racks[broker] not in racks_used or len(racks_used) == rack_count
            broker_ok = broker not in chosen or len(chosen) == size
            if rack_ok and broker_ok:
                chosen.append(broker)
                racks_used.add(racks[broker])
        out[partition] = tuple(chosen)
    return out
