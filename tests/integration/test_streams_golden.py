"""The golden bytes the Streams decoders are tested on (tests/unit/protocol/
streams_golden.json) are what Kafka Streams' own classes write: the Java program that
made them runs against the kafka-streams jar of the release the tests use, and its
output must be the file, byte for byte."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.harness import streams_java

GOLDEN = Path(__file__).resolve().parents[1] / "unit" / "protocol" / "streams_golden.json"


def test_the_golden_file_is_what_kafka_streams_writes() -> None:
    reason = streams_java.unavailable_reason()
    if reason:
        pytest.skip(reason)
    cp = streams_java.classpath("StreamsWireGolden")
    done = subprocess.run([streams_java.java(), "-cp", cp, "StreamsWireGolden"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    assert written == json.loads(GOLDEN.read_text())
    assert int(written["latest"]) == 11  # the newest version the decoders know
