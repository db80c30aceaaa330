"""A systematic sweep next to the random fuzzer (benchmarks/fuzz.py): for every decoder and
every seed, every byte set to each of its 256 values, every position given each boundary
int16/int32, every prefix and every one-byte deletion, each with and without a size prefix
matching its length. Same check: the decoder returns or raises ProtocolError.

    .venv/bin/python -m benchmarks.fuzz_sweep   # prints the inputs and any finding
"""

from __future__ import annotations

import struct
import sys
import time
from collections.abc import Iterator

from benchmarks.fuzz import EDGE_INTS, Target, targets
from protocol.primitives import ProtocolError

EDGE_SHORTS = (-1, 0, 1, 0x7FFF, -0x8000)


def variants(seed: bytes) -> Iterator[bytes]:
    """Every single-point change of ``seed``, each also with its size prefix fixed."""
    for pos in range(len(seed)):
        head, tail = seed[:pos], seed[pos + 1:]
        changed = [head + bytes((b,)) + tail for b in range(256)]
        changed += [head + struct.pack(">i", v) + seed[pos + 4:] for v in EDGE_INTS]
        changed += [head + struct.pack(">h", v) + seed[pos + 2:] for v in EDGE_SHORTS]
        changed += [head, head + tail]
        for data in changed:
            yield data
            if len(data) >= 4:
                yield struct.pack(">i", len(data) - 4) + data[4:]


def sweep(target: Target) -> tuple[int, list[str]]:
    """(inputs, findings: one per exception type and message start)."""
    inputs, seen, findings = 0, set(), []
    for seed in target.seeds:
        for data in variants(seed):
            inputs += 1
            try:
                target.run(data)
            except ProtocolError:
                pass
            except Exception as exc:  # noqa: BLE001 - any other exception is the finding
                key = (type(exc).__name__, str(exc)[:40])
                if key not in seen:
                    seen.add(key)
                    findings.append(f"{type(exc).__name__}: {exc} on {data.hex()}")
    return inputs, findings


def main() -> int:
    began = time.perf_counter()
    total, findings = 0, []
    for target in targets():
        inputs, found = sweep(target)
        total += inputs
        findings += [f"{target.name}: {f}" for f in found]
    print(f"{total} inputs in {time.perf_counter() - began:.0f} s, {len(findings)} findings")
    for finding in findings:
        print("FINDING", finding)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
