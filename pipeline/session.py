"""Building the SparkSession: local mode by default, spark-submit's when there is one.

Invariant: a missing Java or pyspark is found before Spark is started and is
reported in one line; no global session is kept here (callers own theirs).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.progress import Progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def missing_requirement() -> str | None:
    """One line naming what is missing to run Spark here, or None."""
    if importlib.util.find_spec("pyspark") is None:
        return ("pyspark is not installed: pip install 'rackguard[pipeline]' "
                "(pyspark>=3.5, pyarrow)")
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return None
    if shutil.which("java") is None:
        return ("Java not found: Spark needs Java 17+ (apt-get install -y "
                "openjdk-17-jre-headless, or set JAVA_HOME)")
    return None


def build_session(master: str | None, app_name: str = "rackguard-report",
                  shuffle_partitions: int | None = None) -> SparkSession:
    """A session on ``master`` (None: whatever spark-submit configured, else local)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    local = master is None or master.startswith("local")
    builder = (builder.config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    if local:
        builder = (builder.config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", str(shuffle_partitions or 8))
                   .config("spark.driver.memory", os.environ.get(
                       "RACKGUARD_SPARK_DRIVER_MEMORY", "2g")))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def session_for(spark: SparkSession | None, master: str | None, progress: Progress
                ) -> Iterator[SparkSession]:
    """``spark`` as given, or one built here (announced on ``progress``) and stopped when
    the block ends, however it ends."""
    if spark is not None:
        yield spark
        return
    with progress.step("starting Spark"):
        built = build_session(master)
    try:
        yield built
    finally:
        built.stop()
