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
import shutil
import subprocess
import tempfile
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
