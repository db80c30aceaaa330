"""Apache Kafka from Maven Central: the broker, its tools and the Java client, as jars.

The test run resolves each pinned release (every one in ``VERSIONS``) by itself,
before its first real-Kafka or Java-client test (tests/conftest.py calls
:func:`prepare`), with Maven (``tests/system/kafka/pom.xml``,
``dependency:copy-dependencies``) into ``.cache/kafka/<version>/libs``
(``RGTEST_KAFKA_CACHE`` moves it), once per machine: a ``READY`` file marks a
complete folder, so the second run costs nothing. By hand, the same:

    .venv/bin/python -m tests.system.kafka_dist install [VERSION ...]

The system tests run the broker, ``kafka.tools.StorageTool`` and the
command-line tools from these jars; the Java-client tests take kafka-clients
from them too. ``RGTEST_KAFKA_VERSION`` picks the release the tests run
(default ``DEFAULT_VERSION``).

Invariant: a version's folder is either complete (``READY`` written last,
after Maven succeeded) or ignored; parallel installs take a lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
POM = Path(__file__).resolve().parent / "kafka" / "pom.xml"
STREAMS_POM = Path(__file__).resolve().parent / "kafka_streams" / "pom.xml"
CACHE = Path(os.environ.get("RGTEST_KAFKA_CACHE", REPO / ".cache" / "kafka"))
DEFAULT_VERSION = "4.4.0"  # the latest 4.x release on Maven Central: the one default
SECOND_LINE = "3.9.2"  # the 3.x line: the Java client against Tansu, RGTEST_KAFKA_VERSION
VERSIONS = (DEFAULT_VERSION, SECOND_LINE)
LOG4J2 = "2.25.5"  # the log4j2 Kafka 4 ships with; its slf4j bridge is added


def version() -> str:
    return os.environ.get("RGTEST_KAFKA_VERSION", DEFAULT_VERSION)


def libs(kafka_version: str | None = None) -> Path:
    return CACHE / (kafka_version or version()) / "libs"


def ready(kafka_version: str | None = None) -> bool:
    return (libs(kafka_version).parent / "READY").exists()


def classpath(kafka_version: str | None = None) -> str:
    return str(libs(kafka_version)) + os.sep + "*"


_failed: dict[str, str] = {}  # version -> why resolving it failed in this process


def missing_tool(versions: Iterable[str] = VERSIONS) -> str | None:
    """What this machine lacks to run real Kafka (Java; Maven while a version is not
    resolved yet), as one sentence, or None. Cheap: no network, no Maven run."""
    if shutil.which("java") is None:
        return ("no Java: java not found on PATH (Kafka needs Java 17: "
                "apt-get install -y openjdk-17-jre-headless)")
    todo = [v for v in versions if not ready(v)]
    if todo and shutil.which("mvn") is None:
        return (f"no Maven: mvn not found on PATH, needed once to resolve Apache Kafka "
                f"{', '.join(todo)} from Maven Central (apt-get install -y maven)")
    return None


def unavailable_reason(kafka_version: str | None = None) -> str | None:
    """Why real Kafka cannot run here, or None."""
    v = kafka_version or version()
    problem = missing_tool([v])
    if problem:
        return problem
    if v in _failed:
        return _failed[v]
    if not ready(v):
        return (f"Apache Kafka {v} is not resolved (the test run resolves it before its "
                f"first real-Kafka test; by hand: `.venv/bin/python -m tests.system.kafka_dist "
                f"install {v}`)")
    return None


def prepare(versions: Iterable[str] = VERSIONS,
            say: Callable[[str], None] = print) -> str | None:
    """Resolves every version not resolved yet, saying what it does in one line each;
    returns why real Kafka cannot run here (what is missing or what failed), or None.
    A failure is remembered, so the tests skip with it instead of retrying."""
    versions = list(dict.fromkeys(versions))
    problem = missing_tool(versions)
    if problem:
        return problem
    for v in versions:
        if ready(v) or v in _failed:
            continue
        try:
            install(v, say)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            _failed[v] = f"resolving Apache Kafka {v} failed: {str(exc).strip()[-600:]}"
            say(_failed[v])
    return next((_failed[v] for v in versions if v in _failed), None)


def install(kafka_version: str, say: Callable[[str], None] = print) -> Path:
    """Resolves ``kafka_version`` into its libs folder unless it is there already."""
    folder = libs(kafka_version)
    extra = [f"-Dkafka.log4j2={LOG4J2}"] if int(kafka_version.split(".")[0]) >= 4 else []
    return _resolve(f"Apache Kafka {kafka_version}", POM, kafka_version, folder,
                    folder.parent / "READY", "kafka_2.13-", extra, say)


def streams_libs(kafka_version: str | None = None) -> Path:
    return CACHE / (kafka_version or version()) / "streams-libs"


def streams_ready(kafka_version: str | None = None) -> bool:
    return (streams_libs(kafka_version) / "READY").exists()


def streams_classpath(kafka_version: str | None = None) -> str:
    return str(streams_libs(kafka_version)) + os.sep + "*"


def install_streams(kafka_version: str | None = None,
                    say: Callable[[str], None] = print) -> Path:
    """Resolves Kafka Streams of ``kafka_version`` (with kafka-clients and RocksDB's JNI
    jar, what a Streams application needs at run time) into ``streams-libs`` beside the
    release's ``libs``, once: a ``READY`` file inside marks it complete."""
    v = kafka_version or version()
    folder = streams_libs(v)
    return _resolve(f"Kafka Streams {v}", STREAMS_POM, v, folder, folder / "READY",
                    "kafka-streams-", [], say)


def _resolve(what: str, pom: Path, kafka_version: str, folder: Path, marker: Path,
             jar_prefix: str, extra: list[str], say: Callable[[str], None]) -> Path:
    """Copies ``pom``'s dependencies into ``folder`` with Maven, once per machine: under a
    lock (parallel runs wait for the first), and ``marker`` (the jar list) written last,
    only after a jar named ``jar_prefix...`` arrived."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return folder
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("Maven (mvn) is not installed: apt-get install -y maven")
        say(f"resolving {what} from Maven Central into {folder} "
            "(once per machine; minutes the first time, seconds from Maven's ~/.m2) ...")
        started = time.monotonic()
        shutil.rmtree(folder, ignore_errors=True)
        argv = [mvn, "-q", "-B", "-f", str(pom), f"-Dkafka.version={kafka_version}",
                f"-Dlibs={folder}", *extra, "dependency:copy-dependencies"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1800,
                              cwd=pom.parent)
        shutil.rmtree(pom.parent / "target", ignore_errors=True)
        if done.returncode != 0:
            raise RuntimeError(f"resolving {what} failed:\n"
                               f"{(done.stdout + done.stderr)[-4000:]}")
        jars = sorted(p.name for p in folder.glob("*.jar"))
        if not any(j.startswith(jar_prefix) for j in jars):
            raise RuntimeError(f"resolving {what}: no {jar_prefix}* jar in {folder}")
        marker.write_text("\n".join(jars) + "\n")
        say(f"resolved {what}: {len(jars)} jars in {time.monotonic() - started:.0f} s")
        return folder


def main(argv: list[str]) -> int:
    if argv[:1] != ["install"]:
        print("usage: python -m tests.system.kafka_dist install [VERSION ...]", file=sys.stderr)
        return 2
    for v in argv[1:] or list(VERSIONS):
        already = ready(v)
        folder = install(v, lambda line: print(line, file=sys.stderr))
        print(f"Apache Kafka {v}: {'already in' if already else 'resolved into'} {folder} "
              f"({len(list(folder.glob('*.jar')))} jars)")
    # Kafka Streams of the release the tests run (the KIP-708 proof and golden bytes)
    streams = install_streams(DEFAULT_VERSION, lambda line: print(line, file=sys.stderr))
    print(f"Kafka Streams {DEFAULT_VERSION}: in {streams} "
          f"({len(list(streams.glob('*.jar')))} jars)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
