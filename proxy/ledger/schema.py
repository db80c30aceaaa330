"""The ledger's schema: what the proxy writes and the pipeline reads, and nothing else.

Both sides import this module (and the pipeline nothing else of the proxy), so a
field or decision renamed here is renamed for both.

Decision files (``decisions-*.jsonl``), schema 2: one JSON line per recorded request,
its fields once (``v``, ``kind``, ``instance``, ``ts``, ``req``, ``client_id``,
``client_addr``, ``latency_ms``) and ``partitions``, one array per partition holding
``PARTITION_FIELDS`` in order. Schema 1 (still read) wrote one line per partition with
every field named. Snapshot files (``snapshots-*.jsonl``), schema 1: a line per broker
and per partition of the cluster view.
"""

from __future__ import annotations

DECISION_SCHEMA_VERSION = 2
SNAPSHOT_SCHEMA_VERSION = 1
PARTITION_FIELDS = ("topic", "partition", "leader", "isr", "isr_racks", "required_racks",
                    "min_isr", "decision", "reason", "wire_error", "broker_error", "base_offset",
                    "records", "bytes", "metadata_age_ms")
"""The elements of each array in a decision line's ``partitions``, in order (schema 2)."""
FORWARDED = "forwarded"
REJECTED = "rejected"
OBSERVED = "observed-would-reject"
DECISIONS = (FORWARDED, REJECTED, OBSERVED)
DECISION_FILE_PREFIX = "decisions"
SNAPSHOT_FILE_PREFIX = "snapshots"
