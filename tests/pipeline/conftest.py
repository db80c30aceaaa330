"""One SparkSession for the whole tests/pipeline run (Spark start-up costs seconds).

Invariant: every Spark test is marked ``spark`` and skips with the one-line
reason when pyspark or Java is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.session import build_session, missing_requirement


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    problem = missing_requirement()
    if problem is not None:
        pytest.skip(problem)
    session = build_session("local[2]", "rackguard-tests", shuffle_partitions=2)
    yield session
    session.stop()
