"""Rotating JSON Lines files of the ledger directory.

Invariant: a batch is written as whole lines, unbuffered, so a reader sees at
most one torn line (the last, after a crash); a file is rotated by size and by
age, checked before each batch, so it exceeds the size by at most one batch;
file names carry the instance id, so several proxies can share one directory.
Used by the ledger's writer thread only.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

_IOV_MAX = 512  # buffers per writev (Linux allows 1024)


def _writev_all(fd: int, buffers: Sequence[bytes | memoryview]) -> int:
    """Write every byte of ``buffers`` (a short write continues where it stopped)."""
    views = [memoryview(b) for b in buffers]
    total = sum(len(v) for v in views)
    left = total
    while left:
        done = os.writev(fd, views)
        if done <= 0:
            raise OSError(f"writev wrote nothing ({left} bytes left)")
        left -= done
        while done and views:  # drop what was written
            if done >= len(views[0]):
                done -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][done:]
                done = 0
    return total


class RotatingJsonl:
    """Whole-line appends to ``<prefix>-<instance>-<utc time>-<seq>.jsonl``, rotated.

    A new file starts when the current one has reached ``rotate_bytes`` or is
    ``rotate_seconds`` old (checked before each batch, so a file exceeds the
    size by at most one batch). Used by the writer thread only.
    """

    def __init__(
        self,
        directory: Path,
        prefix: str,
        instance_id: str,
        rotate_bytes: int,
        rotate_seconds: float,
        wall_clock: Callable[[], float],
    ) -> None:
        self._directory = directory
        self._prefix = prefix
        self._instance = re.sub(r"[^A-Za-z0-9_.-]", "_", instance_id)
        self._rotate_bytes = rotate_bytes
        self._rotate_seconds = rotate_seconds
        self._wall = wall_clock
        self._file: IO[bytes] | None = None
        self._opened_at = 0.0
        self._size = 0
        self._seq = itertools.count()
        self.paths: list[Path] = []

    def write(self, lines: Sequence[bytes | memoryview]) -> None:
        """Append whole lines (UTF-8, each ending in a newline; an item may hold several),
        in one system call per ``_IOV_MAX`` items, without joining them first."""
        if not lines:
            return
        now = self._wall()
        if (self._file is None or self._size >= self._rotate_bytes
                or now - self._opened_at >= self._rotate_seconds):
            self._open(now)
        assert self._file is not None
        fd = self._file.fileno()
        for i in range(0, len(lines), _IOV_MAX):
            self._size += _writev_all(fd, lines[i:i + _IOV_MAX])

    def _open(self, now: float) -> None:
        self.close()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
        name = f"{self._prefix}-{self._instance}-{stamp}-{os.getpid()}-{next(self._seq):06d}.jsonl"
        path = self._directory / name
        self._file = path.open("ab", buffering=0)
        self._opened_at = now
        self._size = 0
        self.paths.append(path)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
