"""Fuzzing every decoder the proxy has, with seeded mutations of valid frames.

    .venv/bin/python -m benchmarks.fuzz --inputs 10000000   # the documented run
    .venv/bin/python -m benchmarks.fuzz --inputs 20000      # a smoke run (CI)

The valid frames (the seeds) are the simulator's answers to kafka-python's requests, for
every version both support, and kafka-python's own requests (and responses, where the
simulator does not answer a version): so each decoder starts from Kafka's own message
schemas. The config, topic-creation and rack-locality decoders' targets are in
benchmarks/fuzz_admin.py and benchmarks/fuzz_locality.py.

Each input is a seed mutated a few times (bytes flipped or set to edge values, an
int16/int32 overwritten with a boundary value, cut, extended, a slice repeated, spliced
with another seed) and, half of the time, given a size prefix that matches its new
length, so decoders get past the first check.

Checked for every input: the decoder returns or raises ProtocolError, nothing else;
on every ``--alloc-every``-th input, the peak memory the call allocated (tracemalloc)
stays under ``ALLOC_FACTOR`` times the input's size plus ``ALLOC_SLACK`` (for framing,
plus the 2 MiB a size prefix may claim at once, by design). Prints, per
decoder, the inputs, the share rejected with ProtocolError, the largest peak allocation
of one call seen, and the rate; exits 1 after a finding (with the input, hex).

Not atheris (coverage-guided): it does not install on this machine's Python; the
mutations here are blind but seeded, so a run is repeatable (``--seed``).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import struct
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.fuzz_admin import admin_targets  # noqa: E402
from benchmarks.fuzz_locality import locality_targets  # noqa: E402
from benchmarks.fuzz_streams import streams_targets  # noqa: E402
from protocol.api_versions import (  # noqa: E402
    PROXY_VERSION_CAPS,
    cap_api_versions,
    read_api_versions,
)
from protocol.apis import API_NAMES  # noqa: E402
from protocol.describe_cluster import rewrite_describe_cluster  # noqa: E402
from protocol.describe_configs import read_min_insync_replicas  # noqa: E402
from protocol.find_coordinator import rewrite_find_coordinator  # noqa: E402
from protocol.framing import EAGER_MAX, FrameSplitter  # noqa: E402
from protocol.headers import parse_request_header  # noqa: E402
from protocol.metadata import read_metadata, rewrite_metadata_brokers  # noqa: E402
from protocol.primitives import ProtocolError  # noqa: E402
from protocol.produce_endpoints import (  # noqa: E402
    rewrite_produce_response_endpoints,
)
from protocol.produce_request import walk_produce_request  # noqa: E402
from protocol.produce_response import parse_produce_response  # noqa: E402
from protocol.sasl import (  # noqa: E402
    read_authenticate_outcome,
    read_handshake_mechanism,
    read_handshake_response,
)

ALLOC_FACTOR = 64
ALLOC_SLACK = 64 * 1024
EDGE_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
EDGE_INTS = (0, 1, -1, 2, 127, 128, 255, 0x7FFF, -0x8000, 0x7FFFFFFF, -0x80000000, 1 << 20)


def _mapper(node_id: int, host: str, port: int) -> tuple[str, int]:
    return f"proxy-{node_id}.local", 30000 + node_id % 1000


@dataclass
class Target:
    """One decoder: ``run(data)`` must return or raise ProtocolError."""

    name: str
    run: Callable[[bytes], object]
    seeds: list[bytes]
    slack: int = ALLOC_SLACK  # the constant part of the allocation bound
    inputs: int = 0
    rejected: int = 0
    worst_peak: int = 0  # bytes, the largest peak allocation of one call measured
    seconds: float = 0.0
    findings: list[str] = field(default_factory=list)


def _versioned(fn: Callable[[bytes, int], object], version: int) -> Callable[[bytes], object]:
    return lambda data: fn(data, version)


def _split(data: bytes) -> object:
    splitter = FrameSplitter(1 << 20)
    out = splitter.feed(data[: len(data) // 2])
    return out + splitter.feed(data[len(data) // 2:])


def _walk(data: bytes) -> object:
    return walk_produce_request(data, parse_request_header(data))


def _simulator() -> Callable[[Any, int], bytes]:
    """``ask(request, version)``: the simulator's answer to a kafka-python request."""
    from simulator.config import SimulatorConfig, TopicSpec, racked_brokers
    from simulator.core import SimCore
    from simulator.dispatch import dispatch

    core = SimCore(SimulatorConfig(brokers=racked_brokers(3, ["a", "b", "c"]),
                                   topics=[TopicSpec("orders", 3, 3)]))
    for name, parts in (("orders", 3), ("events", 2)):
        core.state.create_topic(name, parts, 3)

    def ask(request: Any, version: int) -> bytes:
        request.with_header(correlation_id=7, client_id="fuzz")
        frame = bytes(request.encode(version=version, header=True, framed=True))
        answer = asyncio.run(dispatch(core, 1, frame[4:]))  # the simulator takes no prefix
        assert answer is not None
        return answer

    return ask


def _seed_frames(ask: Callable[[Any, int], bytes]) -> dict[str, list[tuple[int, bytes]]]:
    """(version, frame) per kind, from the simulator answering kafka-python's requests."""
    from kafka.protocol.admin import DescribeClusterRequest, DescribeConfigsRequest
    from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest
    from kafka.protocol.metadata import MetadataRequest as KPMetadata
    from kafka.protocol.sasl import (
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

    from benchmarks.produce_frames import kp_request, kp_response, make_batch, tid
    from protocol.headers import response_frame

    seeds: dict[str, list[tuple[int, bytes]]] = {}
    seeds["metadata"] = [(v, ask(KPMetadata(version=v, topics=[] if v == 0 else None,
                                            **({"allow_auto_topic_creation": False}
                                               if v >= 4 else {})), v))
                         for v in range(0, 13)]
    seeds["find_coordinator"] = [
        (v, ask(FindCoordinatorRequest(version=v, **({"coordinator_keys": ["g"], "key_type": 0}
                                                     if v >= 4 else {"key": "g"})), v))
        for v in range(0, 6)]
    seeds["describe_cluster"] = [(v, ask(DescribeClusterRequest(
        version=v, include_cluster_authorized_operations=False), v)) for v in range(0, 2)]
    seeds["api_versions"] = [(v, ask(ApiVersionsRequest(
        version=v, client_software_name="f", client_software_version="1"), v))
        for v in range(0, 5)]
    res = DescribeConfigsRequest.DescribeConfigsResource
    seeds["describe_configs"] = [(v, ask(DescribeConfigsRequest(
        version=v, resources=[res(resource_type=2, resource_name=t, configuration_keys=None)
                              for t in ("orders", "events")],
        include_synonyms=False, include_documentation=False), v)) for v in range(1, 5)]
    seeds["produce_request"] = [
        (v, kp_request(v, [(tid(1) if v >= 13 else "orders",
                            [(0, make_batch(3)), (1, make_batch(1)), (2, None)])]))
        for v in range(3, 14)]
    seeds["produce_response"] = [
        (v, kp_response(v, [(tid(1) if v >= 13 else "orders",
                             [{"index": 0, "error_code": 0, "base_offset": 5,
                               "log_append_time_ms": -1, "log_start_offset": 0,
                               **({"record_errors": [(0, "bad")], "error_message": "m"}
                                  if v >= 8 else {}),
                               **({"current_leader": (2, 3)} if v >= 10 else {})}])],
                        node_endpoints=[{"node_id": 2, "host": "b2", "port": 9092,
                                         "rack": "b"}] if v >= 10 else None))
        for v in range(3, 14)]
    hs = SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-512")
    hs.with_header(correlation_id=3, client_id="fuzz")
    seeds["sasl_handshake_request"] = [(1, bytes(hs.encode(header=True, framed=True)))]
    seeds["sasl_handshake_response"] = [(v, response_frame(3, 17, v, bytes(
        SaslHandshakeResponse(version=v, error_code=33, mechanisms=["PLAIN", "SCRAM-SHA-512"])
        .encode(version=v)))) for v in (0, 1)]
    seeds["sasl_authenticate_response"] = [(v, response_frame(3, 36, v, bytes(
        SaslAuthenticateResponse(version=v, error_code=0, error_message=None,
                                 auth_bytes=b"r=abc,s=c2FsdA==,i=4096",
                                 **({"session_lifetime_ms": 60000} if v >= 1 else {}))
        .encode(version=v)))) for v in (0, 1, 2)]
    return seeds


def targets() -> list[Target]:
    ask = _simulator()
    seeds = _seed_frames(ask)
    known = set(API_NAMES)
    out: list[Target] = []

    def add(name: str, kind: str, fn: Callable[[bytes, int], object], first: int = 0) -> None:
        for version, frame in seeds[kind]:
            if version >= first:
                out.append(Target(f"{name} v{version}", _versioned(fn, version), [frame]))

    every_frame = [frame for frames in seeds.values() for _, frame in frames]
    # by design a size prefix gets its frame's memory at once up to EAGER_MAX (2 MiB),
    # and beyond that only as bytes arrive (protocol/framing.py): that is its bound
    out.append(Target("framing", _split, every_frame, EAGER_MAX + ALLOC_SLACK))
    requests = [f for _, f in seeds["produce_request"] + seeds["sasl_handshake_request"]]
    out.append(Target("request header", parse_request_header, requests))
    out.append(Target("produce request", _walk, [f for _, f in seeds["produce_request"]]))
    add("produce response", "produce_response", parse_produce_response)
    add("produce response endpoints", "produce_response",  # (none before v10)
        lambda f, v: rewrite_produce_response_endpoints(f, v, _mapper), first=10)
    add("metadata", "metadata", read_metadata)
    add("metadata rewrite", "metadata", lambda f, v: rewrite_metadata_brokers(f, v, _mapper))
    add("find coordinator", "find_coordinator",
        lambda f, v: rewrite_find_coordinator(f, v, _mapper))
    add("describe cluster", "describe_cluster",
        lambda f, v: rewrite_describe_cluster(f, v, _mapper))
    add("api versions", "api_versions", read_api_versions)
    add("api versions cap", "api_versions",
        lambda f, v: cap_api_versions(f, v, PROXY_VERSION_CAPS, known))
    add("describe configs", "describe_configs", read_min_insync_replicas)
    out.append(Target("sasl handshake request", read_handshake_mechanism,
                      [f for _, f in seeds["sasl_handshake_request"]]))
    add("sasl handshake response", "sasl_handshake_response", read_handshake_response)
    add("sasl authenticate response", "sasl_authenticate_response", read_authenticate_outcome)
    later = admin_targets(ask) + locality_targets() + streams_targets()  # issues 16-19, 31
    out.extend(Target(name, run, frames) for name, run, frames in later)
    return out


def mutate(rng: random.Random, seed: bytes, others: list[bytes]) -> bytes:
    data = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        n = len(data)
        if op == 0 and n:
            data[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            data[rng.randrange(n)] = rng.choice(EDGE_BYTES)
        elif op == 2 and n >= 4:
            pos = rng.randrange(n - 3)
            data[pos:pos + 4] = struct.pack(">i", rng.choice(EDGE_INTS))
        elif op == 3 and n >= 2:
            pos = rng.randrange(n - 1)
            data[pos:pos + 2] = struct.pack(">h", rng.choice((-1, 0, 1, 0x7FFF, -0x8000)))
        elif op == 4 and n:
            del data[rng.randrange(n):]
        elif op == 5:
            data += rng.randbytes(rng.randint(1, 16))
        elif op == 6 and n:
            start = rng.randrange(n)
            end = min(n, start + rng.randint(1, 32))
            data[start:start] = data[start:end] * rng.randint(1, 4)
        elif op == 7 and others:
            other = rng.choice(others)
            cut = rng.randrange(len(data) + 1)
            data = data[:cut] + other[rng.randrange(len(other) + 1):]
    if rng.random() < 0.5 and len(data) >= 4:
        data[0:4] = struct.pack(">i", len(data) - 4)
    return bytes(data)


def _one(target: Target, data: bytes, measure: bool) -> None:
    if measure:
        tracemalloc.start()
        tracemalloc.reset_peak()
    try:
        target.run(data)
    except ProtocolError:
        target.rejected += 1
    except Exception as exc:  # noqa: BLE001 - any other exception is the finding
        target.findings.append(f"{type(exc).__name__}: {exc} on {data.hex()}")
    finally:
        if measure:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            target.worst_peak = max(target.worst_peak, peak)
            if peak > ALLOC_FACTOR * len(data) + target.slack:
                target.findings.append(f"allocated {peak} bytes for {len(data)}: {data.hex()}")
        target.inputs += 1


def fuzz(all_targets: list[Target], inputs: int, seed: int = 1, alloc_every: int = 97
         ) -> list[Target]:
    """``inputs`` mutated inputs spread evenly over the targets; returns them, with counts."""
    rng = random.Random(seed)
    per = max(1, -(-inputs // len(all_targets)))
    for target in all_targets:
        others = target.seeds
        began = time.perf_counter()
        for i in range(per):
            data = mutate(rng, rng.choice(target.seeds), others)
            _one(target, data, i % alloc_every == 0)
            if target.findings:
                break
        target.seconds = time.perf_counter() - began
    return all_targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--alloc-every", type=int, default=97)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    done = fuzz(targets(), args.inputs, args.seed, args.alloc_every)
    total = sum(t.inputs for t in done)
    print(f"{'decoder':<41} {'inputs':>10} {'rejected':>9} {'peak alloc':>11} {'/s':>9}")
    for t in done:
        rate = t.inputs / t.seconds if t.seconds else 0.0
        print(f"{t.name:<41} {t.inputs:>10} {t.rejected / max(t.inputs, 1):>8.0%} "
              f"{t.worst_peak:>11} {rate:>9.0f}")
    print(f"{total} inputs over {len(done)} decoders in {time.perf_counter() - began:.0f} s "
          f"(seed {args.seed}); allocation checked on every {args.alloc_every}th input, "
          f"bound {ALLOC_FACTOR} x size + {ALLOC_SLACK // 1024} KiB")
    findings = [f"{t.name}: {f}" for t in done for f in t.findings]
    for finding in findings:
        print("FINDING", finding)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
