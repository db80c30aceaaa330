"""The official Java client: kafka-clients from Maven Central, and the compiled driver.

The jars come from the Apache Kafka release the system tests resolve with
Maven (tests/system/kafka_dist.py: ``.cache/kafka/<version>/libs``, resolved by
the test run before its first test that needs it, or here on first use). Only
kafka-clients and the jars it needs at run time go on the classpath.
``RackguardClient.java`` is compiled with javac into ``.cache/java``
(recompiled when the source or the jars change).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.system import kafka_dist

from .procs import REPO

CACHE = Path(os.environ.get("RGTEST_JAVA_CACHE", REPO / ".cache" / "java"))
SOURCE = Path(__file__).resolve().parents[1] / "java" / "RackguardClient.java"
# kafka-clients' runtime dependencies (compression codecs are loaded lazily but
# the classes are referenced; slf4j-api is required, a provider is optional).
NEEDED = ("kafka-clients", "slf4j-api", "lz4-java", "snappy-java", "zstd-jni")
_JAR_RE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9\-]*?)-(?P<ver>\d[\w.\-]*)\.jar$")


def _tool(name: str) -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).exists():
        return str(Path(java_home) / "bin" / name)
    return shutil.which(name)


def unavailable_reason() -> str | None:
    if _tool("javac") is None:
        return "no JDK: javac not found on PATH or in $JAVA_HOME/bin"
    if _tool("java") is None:
        return "no JDK: java not found on PATH or in $JAVA_HOME/bin"
    return kafka_dist.missing_tool()


def ensure_jars(kafka_version: str | None = None) -> list[Path]:
    """The jars kafka-clients needs, resolving the Kafka release once where it is not."""
    libs = kafka_dist.install(kafka_version or kafka_dist.version())
    found: dict[str, Path] = {}
    for jar in libs.glob("*.jar"):
        m = _JAR_RE.match(jar.name)
        if m and m["name"] in NEEDED:
            found[m["name"]] = jar
    missing = set(NEEDED) - set(found)
    if missing:
        raise RuntimeError(f"{libs} lacks jars {sorted(missing)}")
    return [found[n] for n in NEEDED]


@dataclass
class JavaResult:
    returncode: int
    result: dict | None
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (
            f"java rc={self.returncode} result={self.result}\n"
            f"--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        )


@dataclass
class JavaClient:
    java: str
    classpath: str
    kafka_clients_jar: Path

    def argv(self, mode: str, **kw: object) -> list[str]:
        args = [f"{k}={v}" for k, v in kw.items() if v is not None]
        return [
            self.java,
            "-Xshare:auto",
            "-XX:TieredStopAtLevel=1",
            "-Xmx256m",
            "-cp",
            self.classpath,
            "RackguardClient",
            mode,
            *args,
        ]

    def run(self, mode: str, timeout: float = 60, **kw: object) -> JavaResult:
        r = subprocess.run(self.argv(mode, **kw), capture_output=True, text=True, timeout=timeout)
        return JavaResult(r.returncode, parse_result(r.stdout), r.stdout, r.stderr)

    def start(self, mode: str, **kw: object) -> subprocess.Popen:
        """Start with hold=1: read the RESULT line, then write a newline to finish."""
        return subprocess.Popen(
            self.argv(mode, hold=1, **kw),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )


def parse_result(stdout: str) -> dict | None:
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return None


def build_client(kafka_version: str | None = None) -> JavaClient:
    """The driver compiled against kafka-clients of ``kafka_version`` (default: the
    release the system tests run, RGTEST_KAFKA_VERSION)."""
    jars = ensure_jars(kafka_version)
    CACHE.mkdir(parents=True, exist_ok=True)
    javac, java = _tool("javac"), _tool("java")
    assert javac and java
    cp_jars = os.pathsep.join(str(j) for j in jars)
    digest = hashlib.sha256(SOURCE.read_bytes() + cp_jars.encode()).hexdigest()[:12]
    classes = CACHE / f"classes-{digest}"
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (classes / "RackguardClient.class").exists():
            tmp = Path(tempfile.mkdtemp(dir=CACHE, prefix="classes-tmp-"))
            r = subprocess.run(
                [javac, "-nowarn", "-cp", cp_jars, "-d", str(tmp), str(SOURCE)],
                capture_output=True,
                text=True,
                timeout=180,
            )
            if r.returncode != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                raise RuntimeError(f"javac failed:\n{r.stdout}\n{r.stderr}")
            if classes.exists():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.rename(classes)
    return JavaClient(java, cp_jars + os.pathsep + str(classes), jars[0])
