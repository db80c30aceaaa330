"""The ledger's schema: what the proxy writes and the pipeline reads, and nothing else.

Both sides import this module (and the pipeline nothing else of the proxy), so a
column or decision renamed here is renamed for both. It imports no pyarrow: the
types are named here as Arrow type strings and built by the writer thread
(:mod:`proxy.ledger.tables`) and the pipeline.

Files, schema 3 (the JSON Lines of schemas 1 and 2 are not read any more):

- ``decisions-<instance>-<utc>-<pid>-<n>.parquet``: one row per rack-checked
  produce *request*: its time, number, client, the view and rule sequence numbers
  it was decided on, and its partitions as parallel arrays (topic number into
  ``topics``, partition, records, bytes) and the broker's answer as it came (its
  bytes: the pipeline reads each partition's error code and base offset from it,
  :mod:`pipeline.answers`, so the proxy spends no time on it). Partitions that
  did not simply pass are listed once more, sparsely
  (``np_*``: their position, decision, reason and the proxy's own error code).
  Nothing the view holds (leader, ISR, racks, min.insync.replicas) is repeated.
- ``snapshots-<instance>-<utc>-<pid>-<n>.parquet``: the view and the rule as they
  change: a ``topic`` row when a topic's partitions change (and every topic when a
  file opens), a ``brokers`` row when the racks change, a ``rule`` row when the
  rule changes, a ``gone`` row when a topic leaves the view, a ``tick`` row
  every snapshot interval (the proxy was up and on this view and rule), and a
  ``loss`` row when the loss watch confirms acknowledged records lost (the topic,
  the partition, the leader and epoch that no longer has them, each lost offset
  range with its acks level, the cause and the client ids that wrote there).

A row is joined to the state it was decided on by ``(instance, run, view_seq)``:
the topic's latest ``topic`` row with ``seq <= view_seq``. ``run`` tells two runs of
one instance apart (sequence numbers restart at 1).

The file being written is an Arrow IPC stream (``.arrows``, one record batch per
flush); it becomes Parquet when it is closed (rotation, stop, or the next start
after a crash). A reader takes the complete batches of an ``.arrows`` file.
"""

from __future__ import annotations

LEDGER_SCHEMA_VERSION = 3
FORWARDED = "forwarded"
REJECTED = "rejected"
OBSERVED = "observed-would-reject"
DECISIONS = (FORWARDED, REJECTED, OBSERVED)
DECISION_FILE_PREFIX = "decisions"
SNAPSHOT_FILE_PREFIX = "snapshots"
OPEN_SUFFIX = ".arrows"  # the file being written: an Arrow IPC stream
CLOSED_SUFFIX = ".parquet"

DECISION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ts", "float64"),  # wall-clock seconds when the request was decided
    ("instance", "string"),
    ("run", "int64"),
    ("req", "int64"),
    ("client_id", "string"),
    ("client_addr", "string"),
    ("api_version", "int16"),
    ("view_seq", "int64"),
    ("rule_seq", "int64"),
    ("latency_ms", "float32"),  # null: no broker answer (every partition refused, or none)
    ("topics", "list<string>"),
    ("topic_no", "list<int8>"),  # per partition, into topics (a request names <= 127 topics)
    ("partition", "list<int32>"),
    ("records", "list<int32>"),  # from the batch headers; -1 when unreadable
    ("bytes", "list<int32>"),
    ("topic_ids", "list<binary>"),  # v13+: the request's topic ids (its answer names them)
    ("answer", "binary"),  # the broker's Produce response frame as received; null: none
    ("error", "list<int16>"),  # the broker's code, read from answer by the pipeline
    ("base_offset", "list<int64>"),  # (pipeline.answers; the proxy writes them null)
    ("np_index", "list<int32>"),  # the partitions that did not simply pass: their position,
    ("np_decision", "list<string>"),  # one of DECISIONS
    ("np_reason", "list<string>"),  # the policy's verdict
    ("np_code", "list<int16>"),  # the proxy's error code when it refused the partition
)

SNAPSHOT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kind", "string"),  # topic, gone, brokers, rule, tick
    ("ts", "float64"),
    ("instance", "string"),
    ("run", "int64"),
    ("seq", "int64"),  # the view's sequence number (the rule's, for kind=rule)
    ("rule_seq", "int64"),  # kind=tick: the rule in force
    ("interval_s", "float64"),  # kind=tick: the snapshot interval
    ("topic", "string"),  # kind=topic, gone
    ("min_isr", "int32"),
    ("partitions", "list<int32>"),  # kind=topic: parallel arrays, one element per partition
    ("leaders", "list<int32>"),
    ("replicas", "list<list<int32>>"),
    ("isr", "list<list<int32>>"),
    ("nodes", "list<int32>"),  # kind=brokers: every broker with a known rack entry,
    ("racks", "list<string>"),  # its rack ("" for a broker without one)
    ("live", "list<bool>"),  # in the current broker list
    ("default_min_racks", "int32"),  # kind=rule
    ("rule_topics", "list<string>"),
    ("rule_topic_racks", "list<int32>"),
    ("rule_prefixes", "list<string>"),  # longest first
    ("rule_prefix_racks", "list<int32>"),
    ("observe", "bool"),
    ("dedicated_code", "int16"),
    ("epoch", "int32"),  # kind=loss: the leader epoch (partitions: [p], leaders: [leader])
    ("lost_first", "list<int64>"),  # kind=loss: each lost offset range, first..last,
    ("lost_last", "list<int64>"),
    ("lost_acks", "list<string>"),  # its acks level ("all" or "1")
    ("cause", "string"),  # kind=loss: the election that caused it
    ("clients", "list<string>"),  # kind=loss: the client ids that wrote the partition
)

TOPIC, GONE, BROKERS, RULE, TICK, LOSS = "topic", "gone", "brokers", "rule", "tick", "loss"
