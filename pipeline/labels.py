"""What a person reads instead of column names: labels, and values with their units.

The Parquet/CSV outputs and summary.json keep the column names (they are the
documented interface for other tools); the HTML page and the terminal show
these labels. Pure Python: no Spark, no I/O.

Invariant: every value formatted here is plain text (no JSON): lists are
joined with commas, mappings become "key: value" pairs, times are UTC.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

# column or summary key -> (label, unit); unit is one of "", "id" (a number without
# thousands separators), "bytes", "share", "s", "time"
_LABELS: dict[str, tuple[str, str]] = {
    "topic": ("Topic", ""),
    "partition": ("Partition", "id"),
    "hour": ("Hour (UTC)", "time"),
    "instance": ("Proxy instance", ""),
    "instances": ("Proxy instances", ""),
    "req": ("Request no.", "id"),
    "client_id": ("Client id", ""),
    "offset": ("Offset", "id"),
    "first_offset": ("First offset", "id"),
    "last_offset": ("Last offset", "id"),
    "records": ("Records", ""),
    "first_acked_at": ("First acknowledged at", "time"),
    "last_acked_at": ("Last acknowledged at", "time"),
    "isr_racks": ("ISR racks", ""),
    "acked_at": ("Acknowledged at", "time"),
    "min_racks": ("Racks required (N)", ""),
    "produce_requests": ("Produce requests", ""),
    "partition_writes": ("Partition writes", ""),
    "acked_writes": ("Acknowledged writes", ""),
    "acked_bytes": ("Acknowledged bytes", "bytes"),
    "acked_records": ("Acknowledged records", ""),
    "acked_requests": ("Acknowledged requests", ""),
    "acked_bytes_ge_n": ("Acknowledged bytes on >= N racks", "bytes"),
    "share_bytes_ge_n": ("Share of acknowledged bytes on >= N racks", "share"),
    "rejected_writes": ("Writes refused by the proxy", ""),
    "observed_would_reject": ("Writes observe mode would have refused", ""),
    "broker_errors": ("Writes the broker answered with an error", ""),
    "no_broker_answer": ("Writes with no broker answer", ""),
    "rejections_by_reason": ("Refusals by decision and reason", ""),
    "decision": ("Decision", ""),
    "reason": ("Reason", ""),
    "bytes": ("Bytes", "bytes"),
    "seconds_observed": ("Partition-time observed", "s"),
    "seconds_under": ("Partition-time under N racks", "s"),
    "seconds_at": ("Partition-time at N racks", "s"),
    "seconds_above": ("Partition-time above N racks", "s"),
    "partitions_under": ("Partitions under N racks", ""),
    "would_reject_requests": ("Requests it would refuse", ""),
    "would_reject_writes": ("Writes it would refuse", ""),
    "would_reject_bytes": ("Bytes it would refuse", "bytes"),
    "would_reject_records": ("Records it would refuse", ""),
    "share_bytes_rejected": ("Share of acknowledged bytes it would refuse", "share"),
    "by_min_racks": ("By N", ""),
    "replicas": ("Replicas", ""),
    "replica_racks": ("Replica racks", ""),
    "rack_count": ("Racks", ""),
    "since": ("Under since", "time"),
    "last_seen": ("Last seen", "time"),
    "seconds_since": ("For", "s"),
    "partitions": ("Partitions", ""),
    "under_now": ("Partitions under N racks now", ""),
    "ever_under": ("Partitions ever under N racks", ""),
    "topics": ("Topics", ""),
    "acked_offsets": ("Acknowledged offsets", ""),
    "missing_offsets": ("Acknowledged offsets missing", ""),
    "dump_offsets": ("Offsets in the topic dump", ""),
    "unverifiable_acked_writes": ("Acknowledged writes without an offset", ""),
    "decision_files": ("Decision files read", ""),
    "snapshot_files": ("Snapshot files read", ""),
    "malformed_decision_rows": ("Malformed decision rows (excluded)", ""),
    "malformed_snapshot_rows": ("Malformed snapshot rows (excluded)", ""),
}

_TABLE_TITLES = {
    "by_topic_hour": "By topic and hour",
    "rejections": "Refusals by topic, hour and reason",
    "rack_time_by_topic_hour": "Time under, at and above N racks, by topic and hour",
    "rack_time_by_partition": "Time under, at and above N racks, by partition",
    "under_replicated_racks": "Partitions whose replicas span fewer than N racks",
    "missing": "Acknowledged offsets missing from the topic",
    "by_partition": "Acknowledged and missing offsets by partition",
    "missing_ranges": "Missing offsets, as ranges",
}


def label(key: str) -> str:
    """The human label of a column or summary key (the key itself, de-snaked, if unknown)."""
    found = _LABELS.get(key)
    return found[0] if found else key.replace("_", " ").capitalize()


def table_title(name: str) -> str:
    return _TABLE_TITLES.get(name, name.replace("_", " ").capitalize())


def unit_of(key: str) -> str:
    found = _LABELS.get(key)
    return found[1] if found else ""


def human_bytes(n: float) -> str:
    """1234567 -> '1.2 MB' (decimal units, as disks and clouds bill)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def human_seconds(s: float) -> str:
    if s < 120:
        return f"{s:.3g} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    if s < 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def percent(share: float) -> str:
    value = share * 100
    if value == 0 or value == 100 or value >= 10:
        return f"{value:.0f} %"
    return f"{value:.2g} %"


def utc_time(t: float, with_date: bool = True) -> str:
    fmt = "%Y-%m-%d %H:%M:%S UTC" if with_date else "%H:%M:%S"
    return time.strftime(fmt, time.gmtime(t))


def count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n:,} {singular if n == 1 else (plural or singular + 's')}"


def value_text(key: str, v: Any) -> str:
    """A value as a person reads it, by the unit its key has."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    unit = unit_of(key)
    if isinstance(v, datetime):
        return utc_time(v.timestamp())  # PySpark's naive datetimes are local time
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        if unit == "bytes":
            return human_bytes(v)
        if unit == "share":
            return percent(float(v))
        if unit == "s":
            return human_seconds(float(v))
        if unit == "time":
            return utc_time(float(v))
        if unit == "id":
            return str(v)
        return f"{v:,}" if isinstance(v, int) else f"{v:.4g}"
    if isinstance(v, Mapping):
        return "; ".join(f"{k}: {value_text('', x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(value_text("", x) for x in v) or "(none)"
    return str(v)
