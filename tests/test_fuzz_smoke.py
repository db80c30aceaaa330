"""A short run of the decoder fuzzer (benchmarks/fuzz.py; the long run's figures are in
docs/security.md): every decoder gets mutated inputs, and none raises anything but
ProtocolError or allocates beyond its bound."""

from __future__ import annotations

from benchmarks.fuzz import fuzz, targets

DECODERS = ("framing", "request header", "produce request", "produce response v",
            "produce response endpoints v13", "metadata v12", "metadata rewrite v12",
            "find coordinator v", "describe cluster v", "api versions v", "api versions cap v",
            "describe configs v", "sasl handshake request", "sasl handshake response v",
            "sasl authenticate response v",
            # the config APIs (issue 16), topic creation (18), rack locality (19)
            "describe configs request v", "describe configs response v",
            "alter configs request v", "alter configs response v",
            "incremental alter configs request v", "incremental alter configs response v",
            "create topics request v", "create topics response v",
            "create partitions request v", "create partitions response v",
            "fetch rack fill v", "fetch rack read v", "fetch response v", "join group v",
            "consumer subscription parse", "consumer subscription rack",
            "consumer group heartbeat v",
            # Kafka Streams (issue 31)
            "streams subscription info", "streams assignment info",
            "streams subscription envelope", "streams assignment envelope",
            "streams group describe v0", "streams group heartbeat v", "join group request v",
            "join group response v", "sync group request v",
            "describe groups response v")


def test_a_short_fuzz_run_finds_nothing() -> None:
    done = fuzz(targets(), inputs=40_000, seed=7, alloc_every=13)
    names = [t.name for t in done]
    for decoder in DECODERS:
        assert any(n.startswith(decoder) for n in names), decoder
    assert [f"{t.name}: {f}" for t in done for f in t.findings] == []
    assert all(t.inputs > 0 for t in done)
    assert sum(t.rejected for t in done) > sum(t.inputs for t in done) // 2  # they go deep
