"""The ledger's files: an Arrow IPC stream while open, Parquet once closed, bounded in total.

A file is written as an Arrow IPC stream (``.arrows``, LZ4-compressed), one record
batch per flush, each written whole to the kernel before the next begins: a kill -9 loses
only what the writer had not flushed, and a reader takes every complete batch of
the file. A file is closed when it reaches ``rotate_bytes`` or ``rotate_seconds``
(checked before each batch), when the ledger stops, or at the next start after a
crash; closing rewrites it as Parquet (zstd, dictionary-encoded: what Spark reads
natively) under a temporary name, renamed when complete, then deletes the stream.
:class:`Retention` deletes the oldest closed files of this instance while the total
exceeds ``max_bytes`` or they are older than ``max_age_s``.

Invariants: every ``.parquet`` file is complete (written aside, then renamed); file
names carry the instance id and the pid, so several proxies can share a directory
and a restarted one recovers only its own dead streams; used by the writer thread
only (pyarrow is imported here, off the serving path's import).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from proxy.ledger.schema import CLOSED_SUFFIX, OPEN_SUFFIX

# LZ4 on the open stream: a batch's columns repeat a lot (the decisions' strings, the
# topic names), so it costs less CPU to compress them than to write them (at 50
# partitions per request: 1.0 against 1.6 us per request, a tenth of the bytes); in
# this thread, not Arrow's pool. Closed files are Parquet (zstd).
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(
    compression="lz4" if pa.Codec.is_available("lz4") else None, use_threads=False)
_WRITE_BUFFER = 1 << 20
_NAME = re.compile(r"^(?P<prefix>[a-z]+)-(?P<instance>.+)-(?P<stamp>\d{8}T\d{6})-"
                   r"(?P<pid>\d+)-(?P<n>\d+)\.(?P<suffix>arrows|parquet)$")


def safe_instance(instance: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", instance)


def read_stream(path: Path) -> pa.Table | None:
    """The complete batches of an IPC stream file (a torn last batch is left out); None
    when not even the schema is readable."""
    batches = []
    try:
        with pa.OSFile(str(path), "rb") as source:
            reader = pa.ipc.open_stream(source)
            schema = reader.schema
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
                except (pa.ArrowInvalid, OSError):
                    break  # the torn tail of a crashed writer
    except (pa.ArrowInvalid, OSError):
        return None
    return pa.Table.from_batches(batches, schema=schema)


def close_stream(path: Path) -> Path | None:
    """Rewrite a closed IPC stream as Parquet beside it and delete the stream; returns the
    Parquet file (None when the stream held no row)."""
    table = read_stream(path)
    target = path.with_suffix(CLOSED_SUFFIX)
    if table is not None and table.num_rows:
        aside = target.with_name(target.name + ".tmp")
        pq.write_table(table, str(aside), compression="zstd", row_group_size=1 << 20)
        os.replace(aside, target)
    path.unlink(missing_ok=True)
    return target if table is not None and table.num_rows else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(directory: Path, instance: str) -> list[Path]:
    """Close the streams this instance's dead processes left open (after a kill -9). Called
    before this process opens any: a stream named with its own pid is a previous
    incarnation's (a container restarts with the same pid)."""
    closed: list[Path] = []
    own = safe_instance(instance)
    for path in sorted(directory.glob(f"*{OPEN_SUFFIX}")):
        m = _NAME.match(path.name)
        pid = int(m["pid"]) if m else -1
        if m and m["instance"] == own and (pid == os.getpid() or not _alive(pid)):
            done = close_stream(path)
            if done is not None:
                closed.append(done)
    return closed


class StreamFiles:
    """Record batches appended to ``<prefix>-<instance>-<utc time>-<pid>-<n>.arrows``,
    rotated and closed into Parquet."""

    def __init__(self, directory: Path, prefix: str, instance: str, schema: pa.Schema,
                 rotate_bytes: int, rotate_seconds: float,
                 wall_clock: Callable[[], float]) -> None:
        self._directory = directory
        self._prefix = prefix
        self._instance = safe_instance(instance)
        self._schema = schema
        self._rotate_bytes = rotate_bytes
        self._rotate_seconds = rotate_seconds
        self._wall = wall_clock
        self._sink: pa.NativeFile | None = None
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None
        self._path: Path | None = None
        self._opened_at = 0.0
        self._n = itertools.count()
        self.closed: list[Path] = []

    @property
    def path(self) -> Path | None:
        """The file being written, if any."""
        return self._path

    def opens_next(self) -> bool:
        """True when the next :meth:`write` starts a new file."""
        if self._writer is None or self._sink is None:
            return True
        return (self._sink.tell() >= self._rotate_bytes
                or self._wall() - self._opened_at >= self._rotate_seconds)

    def roll(self) -> bool:
        """Close the current file when it is due; True when the next write opens a file."""
        if self.opens_next():
            self.close()
            return True
        return False

    def write(self, batch: pa.RecordBatch) -> None:
        """Append one batch (rotating first when due). On an error the file is closed (what
        it holds stays readable) and the error raised: the batch is lost."""
        if self.opens_next():
            self.close()
            self._open()
        assert self._writer is not None and self._sink is not None
        try:
            self._writer.write_batch(batch)
            self._sink.flush()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        now = self._wall()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
        name = (f"{self._prefix}-{self._instance}-{stamp}-{os.getpid()}-"
                f"{next(self._n):06d}{OPEN_SUFFIX}")
        path = self._directory / name
        # buffered: a batch goes to the kernel in one write when it is flushed, instead of
        # one per Arrow buffer (about 90 a decisions batch: 0.21 against 0.14 ms a flush of
        # 300 50-partition requests, one thread)
        sink = pa.BufferedOutputStream(pa.OSFile(str(path), "wb"), _WRITE_BUFFER)
        try:
            self._writer = pa.ipc.new_stream(sink, self._schema, options=_IPC_OPTIONS)
        except BaseException:
            sink.close()
            path.unlink(missing_ok=True)
            raise
        self._sink = sink
        self._path = path
        self._opened_at = now

    def close(self) -> None:
        """Close the current file into Parquet (errors leave the stream for recovery)."""
        writer, sink, path = self._writer, self._sink, self._path
        self._writer = self._sink = self._path = None
        if writer is None or sink is None or path is None:
            return
        with contextlib.suppress(Exception):
            writer.close()
        with contextlib.suppress(Exception):
            sink.close()
        done = close_stream(path)
        if done is not None:
            self.closed.append(done)


class Retention:
    """Deletes this instance's oldest closed files beyond ``max_bytes`` in total (open
    files included) or older than ``max_age_s``; reports the total."""

    def __init__(self, directory: Path, instance: str, max_bytes: int | None,
                 max_age_s: float | None, wall_clock: Callable[[], float]) -> None:
        self._directory = directory
        self._instance = safe_instance(instance)
        self._max_bytes = max_bytes
        self._max_age_s = max_age_s
        self._wall = wall_clock

    def enforce(self) -> tuple[int, int]:
        """(bytes of this instance's files after deleting, files deleted)."""
        files: list[tuple[float, Path, int, bool]] = []
        for path in self._directory.iterdir():
            m = _NAME.match(path.name)
            if m is None or m["instance"] != self._instance:
                continue
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            files.append((st.st_mtime, path, st.st_size, m["suffix"] == "parquet"))
        files.sort()
        total = sum(f[2] for f in files)
        deleted = 0
        now = self._wall()
        for mtime, path, size, closed in files:
            too_big = self._max_bytes is not None and total > self._max_bytes
            too_old = self._max_age_s is not None and now - mtime > self._max_age_s
            if not closed or not (too_big or too_old):
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                total -= size
                deleted += 1
        return total, deleted
