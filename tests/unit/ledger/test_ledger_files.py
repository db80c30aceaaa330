"""proxy.ledger.files: streams closed into Parquet, the disk bound, a kill -9.

Invariants under test: a file rotates by size and by age and is closed into a
Parquet file holding every batch; the oldest closed files are deleted while the
instance's files exceed ``max_bytes`` or are older than ``max_age_s``, never the
open one nor another instance's; a proxy killed with SIGKILL loses at most the rows
of its last flush interval, every closed file stays readable, and the next start
closes the stream it left open into Parquet.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from proxy.ledger.files import Retention, StreamFiles, read_stream, recover

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = pa.schema([pa.field("n", pa.int64())])


class Wall:
    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        return self.t


def batch(start: int, n: int = 100) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"n": i} for i in range(start, start + n)],
                                      schema=SCHEMA)


def test_rotation_by_size_and_age_closes_into_parquet(tmp_path: Path) -> None:
    wall = Wall()
    files = StreamFiles(tmp_path, "decisions", "proxy/a b", SCHEMA, 1, 60.0, wall)
    files.write(batch(0))
    first = files.path
    assert first is not None and first.suffix == ".arrows"
    files.write(batch(100))  # over 1 byte: a new file; the first is closed
    assert not first.exists() and files.closed == [first.with_suffix(".parquet")]
    big = StreamFiles(tmp_path / "age", "decisions", "a", SCHEMA, 1 << 30, 60.0, wall)
    (tmp_path / "age").mkdir()
    big.write(batch(0))
    big.write(batch(100))
    assert not big.closed
    wall.t += 61
    big.write(batch(200))  # too old: rotated
    big.close()
    assert [pq.read_table(p).num_rows for p in big.closed] == [200, 100]
    files.close()
    assert all(p.name.startswith("decisions-proxy_a_b-") for p in files.closed)
    assert sorted(pq.read_table(p).column("n").to_pylist()[0] for p in files.closed) == [0, 100]


def test_the_oldest_closed_files_go_first_and_never_the_open_one(tmp_path: Path) -> None:
    wall = Wall()
    files = StreamFiles(tmp_path, "decisions", "a", SCHEMA, 1, 3600.0, wall)
    for i in range(6):
        files.write(batch(100 * i, 1000))
        wall.t += 1
        os.utime(files.path, (wall.t, wall.t))  # type: ignore[arg-type]
    for n, p in enumerate(files.closed):
        os.utime(p, (wall.t - 100 + n, wall.t - 100 + n))
    other = tmp_path / "decisions-b-20231114T221320-1-000000.parquet"  # another instance
    other.write_bytes(b"x" * 100_000)
    sizes = [p.stat().st_size for p in files.closed]
    open_size = files.path.stat().st_size  # type: ignore[union-attr]
    bound = Retention(tmp_path, "a", sum(sizes[-2:]) + open_size, None, wall)
    total, deleted = bound.enforce()
    assert deleted == 3 and total == sum(sizes[-2:]) + open_size
    assert [p.exists() for p in files.closed] == [False, False, False, True, True]
    assert files.path.exists() and other.exists()  # type: ignore[union-attr]
    aged = Retention(tmp_path, "a", None, 96.5, wall)
    assert aged.enforce()[1] == 1  # only the closed file older than 96.5 s
    assert files.closed[4].exists() and not files.closed[3].exists()


CHILD = """
import sys, time
from pathlib import Path
from tests.unit.enforce.test_enforcement_hook import Playbook, produce
from tests.unit.ledger.test_ledger import ledger_for

play = Playbook()
ledger, registry = ledger_for(play, Path(sys.argv[1]), flush_interval_s=0.05,
                              rotate_bytes=20_000)
ledger.clock = time.monotonic
ledger.start()
frame = produce(9, [("audit", [0, 1])])  # refused: recorded at once
for _ in range(2000):
    play(frame, 9)
while registry.get_sample_value("rackguard_ledger_rows_written_total") < 4000:
    time.sleep(0.01)
print("written", flush=True)
while True:
    play(frame, 9)
    time.sleep(0.0005)
"""


def test_kill_9_loses_at_most_the_last_flush_and_closed_files_stay_readable(
        tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "written"
        time.sleep(0.5)  # more rows, more flushes, maybe a file rotating
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    closed = sorted(tmp_path.glob("decisions-*.parquet"))
    left_open = sorted(tmp_path.glob("decisions-*.arrows"))
    assert closed, "rotation should have closed files"
    assert len(left_open) == 1
    reqs = [r for p in closed for r in pq.read_table(p).column("req").to_pylist()]
    stream = read_stream(left_open[0])
    assert stream is not None
    reqs += stream.column("req").to_pylist()
    # every request written before the kill is there, in order, without a gap; only what
    # came after the last flush may be missing
    assert sorted(reqs) == list(range(1, len(reqs) + 1))
    assert len(reqs) >= 2000
    # the next start closes the dead process's stream into Parquet, losing nothing more
    done = [p for p in recover(tmp_path, "proxy-a") if p.name.startswith("decisions-")]
    assert [p.suffix for p in done] == [".parquet"] and not left_open[0].exists()
    assert not list(tmp_path.glob("*.arrows"))  # the snapshot stream too
    after = [r for p in sorted(tmp_path.glob("decisions-*.parquet"))
             for r in pq.read_table(p).column("req").to_pylist()]
    assert sorted(after) == sorted(reqs)
