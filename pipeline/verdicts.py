"""Each report's verdict in plain words, and what to do about it.

Pure functions over small facts the Spark jobs collected (no Spark here), so
every sentence is tested against hand-computed ledgers.

Invariant: a verdict names its numbers (shares with the absolute bytes and
records behind them, counts, times in UTC); a report with nothing at risk
says so in one sentence instead of saying nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.labels import count, human_bytes, human_seconds, percent, utc_time

OUTAGE_PROCEDURE = ("lower min.insync.racks for the topics that must stay writable while the "
                    "rack is out, and restore it when the rack is back (the outage "
                    "procedure in docs/enforcement.md)")


@dataclass(frozen=True)
class Verdict:
    """What a report found (sentences), and what to do (steps)."""

    findings: tuple[str, ...]
    advice: tuple[str, ...]
    at_risk: bool = False  # acknowledged records were (or are) exposed to a rack's loss

    @property
    def headline(self) -> str:
        return self.findings[0]


@dataclass(frozen=True)
class RackSet:
    """Acknowledged writes whose in-sync replicas were on exactly these racks."""

    racks: tuple[str, ...]
    records: int
    bytes: int


@dataclass(frozen=True)
class DurabilityFacts:
    min_racks: int
    acked_bytes: int
    acked_records: int
    acked_writes: int
    topics: int
    under_bytes: int
    under_records: int
    under_topics: tuple[str, ...]
    under_first_ts: float | None
    under_last_ts: float | None
    under_rack_sets: tuple[RackSet, ...]  # most bytes first
    rejections: dict[str, int]  # reason -> partition writes refused by the proxy
    observed_would_reject: int
    seconds_under: float


NO_RACK_NAME = "the brokers without a rack"
"""How a sentence names the rack of brokers that have none (the ledger's "")."""


def rack_name(rack: str) -> str:
    return rack or NO_RACK_NAME


def racks_list(racks: Sequence[str]) -> str:
    """Racks for a table cell or a short list: "rack-a, no rack"."""
    return ", ".join(r or "no rack" for r in racks)


def _racks_phrase(racks: Sequence[str]) -> str:
    names = [rack_name(r) for r in racks]
    if not names:
        return "no known rack (an empty ISR)"
    if len(names) == 1:
        return f"{names[0]} only"
    return ", ".join(names[:-1]) + f" and {names[-1]}"


def _window(first: float | None, last: float | None) -> str:
    if first is None or last is None:
        return ""
    if last - first < 1:
        return f" at {utc_time(first, False)} UTC"
    return (f", for {human_seconds(last - first)} (between {utc_time(first, False)} and "
            f"{utc_time(last, False)} UTC)")


def durability(f: DurabilityFacts) -> Verdict:
    n = f.min_racks
    findings: list[str] = []
    advice: list[str] = []
    if f.acked_writes == 0:
        findings.append("No write in this ledger was acknowledged, so nothing was at risk.")
    elif f.under_bytes > 0:
        share = f.under_bytes / f.acked_bytes if f.acked_bytes else 0.0
        topics = ", ".join(f.under_topics)
        findings.append(
            f"{percent(share)} of acknowledged bytes ({human_bytes(f.under_bytes)}, "
            f"{count(f.under_records, 'record')}) were acknowledged while their in-sync "
            f"replicas spanned fewer than {n} racks, on {count(len(f.under_topics), 'topic')} "
            f"({topics}){_window(f.under_first_ts, f.under_last_ts)}.")
        single = [s for s in f.under_rack_sets if len(s.racks) == 1]
        unplaced = sum(s.records for s in f.under_rack_sets if not s.racks)
        if len(single) == 1 and len(f.under_rack_sets) == 1:
            findings.append(f"If {rack_name(single[0].racks[0])} had been lost in that window "
                            "they were gone.")
        elif single:
            parts = ", ".join(f"{_racks_phrase(s.racks)}: {count(s.records, 'record')}"
                              for s in single[:4])
            findings.append(f"Each depended on a single rack ({parts}): losing that rack in "
                            "that window would have lost them.")
        if unplaced:
            findings.append(f"{count(unplaced, 'record')} were acknowledged while no in-sync "
                            "replica was on a broker the proxy knew the rack of: nothing shows "
                            "where they were.")
        advice.append(f"Enforce the rule: run rackguard with --min-insync-racks {n} (or set "
                      f"it for {topics}). See first what it would refuse: rackguard report "
                      "whatif.")
    else:
        findings.append(
            f"All acknowledged bytes ({human_bytes(f.acked_bytes)}, "
            f"{count(f.acked_records, 'record')}, on {count(f.topics, 'topic')}) were "
            f"acknowledged while their in-sync replicas spanned at least {n} racks: losing "
            "any one rack would have lost none of them.")
    refused = sum(f.rejections.values())
    if refused:
        reasons = ", ".join(f"{r or 'no reason'}: {c:,}" for r, c in
                            sorted(f.rejections.items(), key=lambda kv: (-kv[1], kv[0])))
        findings.append(f"The proxy refused {count(refused, 'partition write')} ({reasons}); "
                        "producers retry these until their delivery timeout.")
        if f.rejections.get("NOT_ENOUGH_RACKS"):
            advice.append("NOT_ENOUGH_RACKS refusals mean racks were out: bring them back; "
                          "meanwhile, " + OUTAGE_PROCEDURE + ".")
        if f.rejections.get("METADATA_STALE"):
            advice.append("METADATA_STALE refusals mean the proxy could not refresh its view "
                          "of the cluster: check its connections to the brokers "
                          "(rackguard_metadata_age_seconds, rackguard_upstream_broker_up).")
    if f.observed_would_reject:
        findings.append(f"Observe mode let through {count(f.observed_would_reject, 'write')} "
                        "that enforcement would have refused.")
    if f.seconds_under > 0:
        findings.append(f"The cluster's snapshots show {human_seconds(f.seconds_under)} of "
                        f"partition-time with in-sync replicas on fewer than {n} racks.")
        advice.append("Partitions whose replicas themselves span too few racks can never meet "
                      "the rule: rackguard report placement lists them.")
    if not advice:
        advice.append("Nothing to do.")
    return Verdict(tuple(findings), tuple(advice), f.under_bytes > 0)


@dataclass(frozen=True)
class WhatIfRow:
    min_racks: int
    acked_writes: int
    acked_bytes: int
    would_reject_writes: int
    would_reject_bytes: int
    would_reject_records: int
    topics: tuple[str, ...] = field(default=())  # topics it would have refused writes on


def whatif(rows: Sequence[WhatIfRow]) -> Verdict:
    findings: list[str] = []
    safe: list[int] = []
    for r in sorted(rows, key=lambda r: r.min_racks):
        if r.acked_writes == 0:
            findings.append(f"min.insync.racks={r.min_racks}: no acknowledged write to judge.")
        elif r.would_reject_writes == 0:
            safe.append(r.min_racks)
            findings.append(f"min.insync.racks={r.min_racks} would have refused none of the "
                            f"{count(r.acked_writes, 'acknowledged write')}.")
        else:
            share = r.would_reject_bytes / r.acked_bytes if r.acked_bytes else 0.0
            findings.append(
                f"min.insync.racks={r.min_racks} would have refused "
                f"{r.would_reject_writes:,} of {count(r.acked_writes, 'acknowledged write')} "
                f"({percent(share)} of bytes: {human_bytes(r.would_reject_bytes)}, "
                f"{count(r.would_reject_records, 'record')}), on "
                f"{', '.join(r.topics) or 'no topic'}.")
    advice: list[str] = []
    if safe:
        advice.append(f"min.insync.racks={max(safe)} can be enforced on this traffic without "
                      "refusing anything that was acknowledged: rackguard serve "
                      f"--min-insync-racks {max(safe)}.")
    risky = [r for r in rows if r.would_reject_writes]
    for r in risky:
        if r.acked_bytes and r.would_reject_bytes >= 0.99 * r.acked_bytes:
            advice.append(f"min.insync.racks={r.min_racks} would refuse nearly every write: "
                          f"the replicas themselves span fewer than {r.min_racks} racks. Fix "
                          "the placement first (rackguard report placement).")
        else:
            advice.append(f"min.insync.racks={r.min_racks} refuses only writes whose in-sync "
                          "replicas had shrunk to too few racks, the ones at risk: enforce it "
                          "once the producers can retry through a rack outage (librdkafka, "
                          "Java and kafka-python retry NOT_ENOUGH_REPLICAS by default).")
    if not advice:
        advice.append("Collect more traffic: run the proxy with --observe and the ledger on.")
    return Verdict(tuple(findings), tuple(advice), bool(risky))


@dataclass(frozen=True)
class PlacementFacts:
    min_racks: int
    partitions: int
    under_now: int
    ever_under: int
    worst: tuple[str, ...]  # "topic-partition (racks)" of some partitions under now


def placement(f: PlacementFacts) -> Verdict:
    n = f.min_racks
    if f.partitions == 0:
        return Verdict(("The ledger holds no cluster snapshot, so placement cannot be judged.",),
                       ("Turn the ledger on (--ledger-dir) for a while, then run this again.",))
    if f.under_now == 0:
        findings = [f"Every partition ({f.partitions:,}) has replicas on at least {n} racks."]
        if f.ever_under:
            findings.append(f"{count(f.ever_under, 'partition')} had fewer earlier in the "
                            "ledger.")
        return Verdict(tuple(findings), ("Nothing to do.",))
    shown = ", ".join(f.worst)
    more = f" and {f.under_now - len(f.worst):,} more" if f.under_now > len(f.worst) else ""
    return Verdict(
        (f"{f.under_now:,} of {count(f.partitions, 'partition')} have replicas on fewer than "
         f"{n} racks now ({shown}{more}): with min.insync.racks={n}, acks=all produces to them "
         "are refused even while every broker is up.",),
        ("Move their replicas so that each partition spans at least "
         f"{n} racks (kafka-reassign-partitions with a plan that puts one replica per rack).",),
        True)


@dataclass(frozen=True)
class MissingRange:
    topic: str
    partition: int
    first: int
    last: int
    records: int
    first_ts: float
    last_ts: float
    isr_racks: tuple[tuple[str, ...], ...]  # the ISR rack sets they were acknowledged on


@dataclass(frozen=True)
class LossFacts:
    topics: tuple[str, ...]
    acked_offsets: int
    missing_offsets: int
    unverifiable: int
    ranges: tuple[MissingRange, ...]  # first offsets first
    shown: int = 3


def _range_phrase(r: MissingRange) -> str:
    offsets = f"offset {r.first}" if r.first == r.last else f"offsets {r.first}-{r.last}"
    if r.last_ts - r.first_ts < 1:
        when = f"acknowledged at {utc_time(r.first_ts, False)}"
    else:
        when = (f"acknowledged between {utc_time(r.first_ts, False)} and "
                f"{utc_time(r.last_ts, False)}")
    racks = " or ".join(_racks_phrase(s) for s in r.isr_racks)
    return (f"topic {r.topic}, partition {r.partition}, {offsets}, {when} UTC while the ISR "
            f"spanned {racks}")


def audit_loss(f: LossFacts) -> Verdict:
    topics = ", ".join(f.topics) or "no topic"
    if f.missing_offsets == 0:
        findings = [f"Every acknowledged record ({count(f.acked_offsets, 'offset')} on "
                    f"{topics}) is in the cluster: none was lost."]
        if f.unverifiable:
            findings.append(f"{count(f.unverifiable, 'acknowledged write')} carried no offset "
                            "in the ledger and could not be checked.")
        return Verdict(tuple(findings), ("Nothing to do.",))
    ranges = "; ".join(_range_phrase(r) for r in f.ranges[:f.shown])
    more = len(f.ranges) - f.shown
    tail = f"; and {count(more, 'more range')} (see the table)" if more > 0 else ""
    verb = "is" if f.missing_offsets == 1 else "are"
    findings = [f"{count(f.missing_offsets, 'acknowledged record')} {verb} missing from the "
                f"cluster: {ranges}{tail}."]
    if f.unverifiable:
        findings.append(f"{count(f.unverifiable, 'acknowledged write')} carried no offset in "
                        "the ledger and could not be checked.")
    advice = ["These records were acknowledged to their producers and are gone: replay them "
              "from their source if it still has them (the table names the client, request "
              "and time of each)."]
    if any(len(s) < 2 for r in f.ranges for s in r.isr_racks):
        advice.append("They were acknowledged on fewer than two racks: enforce "
                      "min.insync.racks=2 (rackguard serve --min-insync-racks 2) so this cannot "
                      "happen again.")
    return Verdict(tuple(findings), tuple(advice), True)
