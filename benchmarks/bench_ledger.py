"""The ledger's share of ``python -m benchmarks.bench``: the proxy's CPU at a fixed rate of checked
produce partitions, in observe mode, with the decision ledger off and on.

A client library decides for itself how many partitions go into one Produce
request (librdkafka sends one partition per request, the Java client one request
per broker with every ready partition), so the load here is made exactly: a few
connections send pre-encoded acks=all Produce v9 requests, each with a
one-record batch (100 bytes, or ``record_bytes``) for each of ``partitions``
partitions, ``requests_per_s`` times a second in all, at most ``WINDOW`` in
flight per connection, and read every answer. Each proxy's CPU over a whole
round (its turns, the other's turns, and a settle of ``SETTLE_S`` after the warm-up
and after the turns, longer than the ledger's default flush interval, so that a
round's rows, and only they, are written inside it) is
compared per checked partition it answered in that round, the two taking
mirrored turns within each round on the same broker and topic (a slow broker
caps the rate a round reaches, and the rate is reported next to them). The whole
round, not only a proxy's own turns: the ledger's writer thread flushes on its own
clock, so a turn's rows are written during a later turn, the other proxy's, or
during a settle (counted over its own turns only, the ledger's cost came out
about half its writer's share too low).

Invariant: the load is the same for both targets (same frame, same pacing);
every answer is read and any partition error fails the run loudly; nothing
here asserts a figure.
"""

from __future__ import annotations

import os
import select
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.framing import FrameSplitter
from protocol.produce_results import produce_results
from proxy.settings import Settings

WINDOW = 8
SLICES = 4  # turns per target per round
FLUSH_S = Settings.model_fields["ledger_flush_interval_ms"].default / 1000
SETTLE_S = FLUSH_S + 0.5  # before and after a round: the ledger's writer flushes
SMOKE_SETTLE_S = 1.0  # the smoke run checks only that the load is carried, not the CPU
CONNECTIONS = 4
PRODUCE_VERSION = 9


@dataclass(frozen=True)
class LedgerLoad:
    partitions: int  # per request
    requests_per_s: int

    @property
    def label(self) -> str:
        return f"{self.partitions}x{self.requests_per_s}/s"


# Rates Tansu carries steadily here: near its ~30,000/s ceiling the rate a round reaches
# varies, and the CPU per partition with it, more than the ledger costs.
DEFAULT_LOADS = (LedgerLoad(50, 300), LedgerLoad(1, 5000))


@dataclass
class LedgerSample:
    target: str
    load: str
    round: int
    cpu_per_s: float  # proxy CPU seconds over the round per wall second of its turns
    achieved_partitions_per_s: float

    @property
    def cpu_us_per_partition(self) -> float:
        return self.cpu_per_s / self.achieved_partitions_per_s * 1e6


@dataclass
class LedgerResults:
    samples: list[LedgerSample] = field(default_factory=list)
    rows_written: int = 0

    def summary(self) -> dict[str, dict[str, float]]:
        """Per load: each target's median CPU and rate, and the extra CPU per checked
        partition as the median (and quartiles) of each round's ratio, ledger on to off.
        The two targets of a round take turns within it, so the ratio of a pair is
        not moved by what the machine does between rounds (its neighbours, the
        broker's state), which the separate medians of a noisy 2-core machine would
        be."""
        out: dict[str, dict[str, float]] = {}
        for load in dict.fromkeys(s.load for s in self.samples):
            row: dict[str, float] = {}
            by_round: dict[str, dict[int, float]] = {}
            for target in ("observe", "observe+ledger"):
                mine = [s for s in self.samples if s.load == load and s.target == target]
                if mine:
                    row[f"{target}_cpu_per_s"] = statistics.median(s.cpu_per_s for s in mine)
                    row[f"{target}_partitions_per_s"] = statistics.median(
                        s.achieved_partitions_per_s for s in mine)
                    row[f"{target}_cpu_us_per_partition"] = statistics.median(
                        s.cpu_us_per_partition for s in mine)
                    by_round[target] = {s.round: s.cpu_us_per_partition for s in mine}
            ratios = [by_round["observe+ledger"][r] / off - 1
                      for r, off in by_round.get("observe", {}).items()
                      if r in by_round.get("observe+ledger", {}) and off > 0]
            if ratios:
                row["extra_cpu_ratio"] = statistics.median(ratios)
                low, _, high = (statistics.quantiles(ratios, n=4) if len(ratios) > 1
                                else (ratios[0],) * 3)
                row["extra_cpu_q1"], row["extra_cpu_q3"] = low, high
                row["rounds"] = len(ratios)
            out[load] = row
        return out


def produce_frame(topic: str, partitions: int, record_size: int = 100) -> bytes:
    """One acks=all Produce v9 request with a one-record batch per partition."""
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder

    def batch() -> bytes:
        builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
        builder.append(timestamp=int(time.time() * 1000), key=None,
                       value=os.urandom(record_size))
        builder.close()
        return bytes(builder.buffer())

    cls = ProduceRequest[PRODUCE_VERSION]
    tcls = cls.TopicProduceData
    pcls = tcls.PartitionProduceData
    request = cls(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
        tcls(name=topic, partition_data=[pcls(index=i, records=batch())
                                         for i in range(partitions)])])
    request.with_header(correlation_id=1, client_id="rackguard-bench-ledger")
    return bytes(request.encode(header=True, framed=True))


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(30)


def drive(bootstrap: str, frame: bytes, requests_per_s: int, seconds: float,
          connections: int = CONNECTIONS) -> int:
    """Send ``frame`` at the given rate for ``seconds`` over a few connections (round
    robin, at most ``WINDOW`` in flight on each); returns the answers read.

    Raises when an answer carries a partition error, the proxy closes a connection
    or stops answering: a benchmark that silently measured failures would be worse
    than none.
    """
    host, port = bootstrap.rsplit(":", 1)
    socks = [socket.create_connection((host, int(port)), 10) for _ in range(connections)]
    for sock in socks:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    readers = {sock: FrameSplitter() for sock in socks}
    in_flight = dict.fromkeys(socks, 0)
    total = int(seconds * requests_per_s)
    sent = answered = 0
    last_answer = start = time.perf_counter()
    try:
        while answered < total:
            now = time.perf_counter()
            due = min(int((now - start) * requests_per_s), total)
            while sent < due:
                sock = min(socks, key=in_flight.__getitem__)
                if in_flight[sock] >= WINDOW:
                    break
                sock.sendall(frame)
                in_flight[sock] += 1
                sent += 1
            if now - last_answer > 5.0:
                raise RuntimeError(f"no answer from {bootstrap} within 5 s")
            busy = [sock for sock in socks if in_flight[sock]]
            if not busy:
                time.sleep(0.0005)
                continue
            readable, _, _ = select.select(busy, [], [], 0.0005)
            for sock in readable:
                data = sock.recv(1 << 20)
                if not data:
                    raise RuntimeError(f"{bootstrap} closed the connection")
                for answer in readers[sock].feed(data):
                    in_flight[sock] -= 1
                    answered += 1
                    last_answer = time.perf_counter()
                    if answered == 1 or answered % 997 == 0:  # the first and a sample after
                        _check(bootstrap, answer)
        return answered
    finally:
        for sock in socks:
            sock.close()


def _check(bootstrap: str, answer: memoryview) -> None:
    errors = {k: v for k, v in produce_results(answer, PRODUCE_VERSION).items() if v[0] != 0}
    if errors:
        raise RuntimeError(f"{bootstrap}: partition errors {errors}")


def measure(
    targets: list[tuple[str, str, int]],
    loads: tuple[LedgerLoad, ...],
    topic: str,
    rounds: int,
    seconds: float,
    cpu_seconds: Any,
    fresh_broker: Callable[[], None] | None = None,
    record_bytes: int = 100,
    slices: int = SLICES,
    settle_s: float = SETTLE_S,
) -> LedgerResults:
    """``targets``: (name, bootstrap, proxy pid) for "observe" and "observe+ledger".

    Each target gets ``seconds`` a round, in ``slices`` turns taken in mirrored
    order (A B B A ...), so what the machine does during a round falls on both
    alike (in a trial, the rounds' ratios had an interquartile range of 10 points
    against 16 with one turn each).

    ``fresh_broker``, when given, restarts the broker and recreates ``topic`` before
    each round: Tansu's in-memory log grows round after round and the proxies' CPU
    per partition drifts up with it (by a third over a dozen rounds here).

    ``settle_s`` shorter than the ledger proxy's flush interval leaves some of its
    writer's work outside the rounds (the bench's smoke run, which checks only that
    the load is carried, uses one)."""
    results = LedgerResults()
    names = [name for name, _, _ in targets]
    for load in loads:
        frame = produce_frame(topic, load.partitions, record_bytes)
        for r in range(rounds):
            if fresh_broker is not None or r == 0:
                if fresh_broker is not None:
                    fresh_broker()
                for _, bootstrap, _ in targets:  # warm up: connections, metadata, caches
                    drive(bootstrap, frame, min(load.requests_per_s, 200), 0.5)
                time.sleep(settle_s)  # the warm-up's rows are written before the round
            wall = dict.fromkeys(names, 0.0)
            answered = dict.fromkeys(names, 0)
            start = {name: cpu_seconds(pid) for name, _, pid in targets}
            for turn in range(slices):
                order = targets if (r + turn) % 2 == 0 else list(reversed(targets))
                for name, bootstrap, _ in order:
                    t0 = time.perf_counter()
                    answered[name] += drive(bootstrap, frame, load.requests_per_s,
                                            seconds / slices)
                    wall[name] += time.perf_counter() - t0
            time.sleep(settle_s)
            cpu = {name: cpu_seconds(pid) - start[name] for name, _, pid in targets}
            for name in names:
                results.samples.append(LedgerSample(
                    name, load.label, r, cpu[name] / wall[name],
                    answered[name] * load.partitions / wall[name]))
    return results


def table(summary: dict[str, dict[str, float]]) -> str:
    lines = [f"{'ledger load':<16} {'partitions/s':>12}  {'CPU observe':>11}  "
             f"{'CPU +ledger':>11}  {'us/partition':>12}  {'extra CPU':>9}  "
             f"{'quartiles':>15}"]
    for load, row in summary.items():
        if "extra_cpu_ratio" not in row:
            continue
        per_partition = (f"{row['observe_cpu_us_per_partition']:.1f}->"
                         f"{row['observe+ledger_cpu_us_per_partition']:.1f}")
        lines.append(
            f"{load:<16} {row['observe+ledger_partitions_per_s']:12.0f}  "
            f"{row['observe_cpu_per_s']:11.1%}  {row['observe+ledger_cpu_per_s']:11.1%}  "
            f"{per_partition:>12}  {row['extra_cpu_ratio']:+9.1%}  "
            f"{row['extra_cpu_q1']:+6.1%}..{row['extra_cpu_q3']:+6.1%}")
    return "\n".join(lines)
