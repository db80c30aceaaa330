"""Kafka Streams from Maven Central, and Java programs compiled against it.

The jars are Kafka Streams of the release the tests run and what it needs at run time
(kafka-clients, RocksDB's JNI jar), resolved once by tests/system/kafka_dist.py
(``install_streams``: ``.cache/kafka/<version>/streams-libs``, done by .ci/run and here on
first use). A program in tests/integration/java is compiled with javac into
``.cache/java`` (again when its source or the jars change).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.system import kafka_dist

from .java import CACHE, _tool

JAVA_DIR = Path(__file__).resolve().parents[1] / "java"


def unavailable_reason() -> str | None:
    if _tool("javac") is None or _tool("java") is None:
        return "no JDK: javac/java not found on PATH or in $JAVA_HOME/bin"
    if not kafka_dist.streams_ready() and shutil.which("mvn") is None:
        return ("Kafka Streams is not resolved and Maven is missing: run `.venv/bin/python -m "
                "tests.system.kafka_dist install` where Maven is installed")
    return None


def classpath(program: str) -> str:
    """The classpath that runs ``program`` (a class in tests/integration/java), compiled
    against Kafka Streams, which is resolved first where it is not."""
    libs = kafka_dist.install_streams()
    jars = sorted(libs.glob("*.jar"))
    source = JAVA_DIR / f"{program}.java"
    cp = os.pathsep.join(str(j) for j in jars)
    digest = hashlib.sha256(source.read_bytes() + cp.encode()).hexdigest()[:12]
    classes = CACHE / f"{program}-{digest}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (classes / f"{program}.class").exists():
            javac = _tool("javac")
            assert javac
            tmp = Path(tempfile.mkdtemp(dir=CACHE, prefix=f"{program}-tmp-"))
            done = subprocess.run([javac, "-nowarn", "-cp", cp, "-d", str(tmp), str(source)],
                                  capture_output=True, text=True, timeout=180)
            if done.returncode != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                raise RuntimeError(f"javac {source.name} failed:\n{done.stdout}\n{done.stderr}")
            if classes.exists():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.rename(classes)
    return cp + os.pathsep + str(classes)


def java() -> str:
    path = _tool("java")
    assert path
    return path


ASSIGNOR_LOGGERS = ("org.apache.kafka.streams.processor.internals.assignment",
                    "org.apache.kafka.streams.processor.internals.StreamsPartitionAssignor")


def assignor_log(path: Path) -> tuple[str, list[str]]:
    """For a run that must show why Kafka Streams assigned what it did: a classpath suffix
    (the broker release's log4j2 binding) and JVM options that write the assignor's INFO
    lines (each rebalance's client states: previous tasks, offset sums, lags, tags and
    the assignment decided) to ``path``. ("", []) where the release has no log4j2."""
    jars = sorted(j for j in kafka_dist.libs().glob("*.jar")
                  if j.name.startswith(("log4j-api-", "log4j-core-", "log4j-slf4j")))
    if len(jars) < 3:
        return "", []
    config = path.with_suffix(".log4j2.properties")
    lines = ["appender.f.type = File", "appender.f.name = F", f"appender.f.fileName = {path}",
             "appender.f.layout.type = PatternLayout",
             "appender.f.layout.pattern = %d{HH:mm:ss.SSS} %-5p [%t] %c{1}: %m%n",
             "rootLogger.level = WARN", "rootLogger.appenderRef.f.ref = F"]
    for i, name in enumerate(ASSIGNOR_LOGGERS):
        lines += [f"logger.a{i}.name = {name}", f"logger.a{i}.level = INFO"]
    config.write_text("\n".join(lines) + "\n")
    return (os.pathsep + os.pathsep.join(str(j) for j in jars),
            [f"-Dlog4j2.configurationFile={config}"])


@dataclass(frozen=True)
class Placement:
    """One instance's part of an assignment Kafka Streams' assignor decided."""

    active: frozenset[str]
    standby: frozenset[str]  # standbys and warm-up replicas alike
    lags: dict[str, int]  # task -> the lag the assignor saw (-2: the running active)


_PARTICIPANTS = re.compile(r"^([0-9a-f-]{36}): \[(\S+?)-StreamThread-", re.M)
_CLIENT = re.compile(
    r"([0-9a-f-]{36})=\[activeTasks: \(\[(.*?)\]\) standbyTasks: \(\[(.*?)\]\) .*?"
    r"taskLagTotals: \(\[(.*?)\]\)")


def assignor_decisions(path: Path) -> list[dict[str, Placement]]:
    """Every assignment the group leader's HighAvailabilityTaskAssignor decided, in
    order, by instance (the client id before ``-StreamThread``), read from the log
    :func:`assignor_log` configures (Kafka Streams' "Decided on assignment" line, whose
    client states carry the lags the decision used)."""
    text = path.read_text(errors="replace") if path.exists() else ""
    out: list[dict[str, Placement]] = []
    names: dict[str, str] = {}
    for entry in re.split(r"\n(?=\d\d:\d\d:\d\d\.\d{3} )", text):
        if "participating in this rebalance" in entry:
            names = dict(_PARTICIPANTS.findall(entry))
        elif "Decided on assignment" in entry:
            decided = {}
            for uuid, active, standby, lags in _CLIENT.findall(entry):
                lag = dict(item.split("=") for item in lags.split(", ") if "=" in item)
                decided[names.get(uuid, uuid)] = Placement(
                    frozenset(t for t in active.split(", ") if t),
                    frozenset(t for t in standby.split(", ") if t),
                    {t: int(v) for t, v in lag.items()})
            out.append(decided)
    return out
