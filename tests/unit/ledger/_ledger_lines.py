"""Test helper: decision lines (schema v2) read back as one flat dict per partition.

Invariant: only tests import this; the flat dict has the fields the pipeline
gives each row (the line's fields, minus ``partitions``, plus the partition's).
"""

from __future__ import annotations

import json
from typing import Any

from proxy.ledger.schema import PARTITION_FIELDS


def partition_rows(text: str) -> list[dict[str, Any]]:
    """Every partition of every line in ``text``, as its own dict."""
    rows = []
    for line in text.splitlines():
        decoded = json.loads(line)
        partitions = decoded.pop("partitions")
        assert partitions, "a line without partitions"
        rows += [{**decoded, **dict(zip(PARTITION_FIELDS, p, strict=True))} for p in partitions]
    return rows
