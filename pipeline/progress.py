"""Progress on long jobs: a line per step, and Spark's running stage while a step waits.

On a terminal the Spark line is rewritten in place; otherwise (CI logs, pipes)
it is printed at most every ``quiet_s`` seconds, so a log stays readable.

Invariant: progress goes to stderr, never stdout (stdout carries the summary,
the verdict and the report's path, last); the watcher thread only reads
Spark's status tracker and stops with its step.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any


class Progress:
    def __init__(self, prog: str, stream: IO[str] | None = None,
                 clock: Callable[[], float] = time.monotonic, poll_s: float = 1.0,
                 quiet_s: float = 10.0) -> None:
        self.prog = prog
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.poll_s = poll_s
        self.quiet_s = quiet_s
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def _write(self, text: str, *, transient: bool = False) -> None:
        if self.tty:
            end = "" if transient else "\n"
            self.stream.write("\r\x1b[K" + text + end)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _stamped(self, text: str) -> str:
        return f"{self.prog}: [{self.clock() - self.started:6.1f} s] {text}"

    def say(self, text: str) -> None:
        self._write(self._stamped(text))

    @contextmanager
    def step(self, text: str, spark: Any = None) -> Iterator[None]:
        """Announce a step; while it runs, show Spark's active stage (when ``spark``)."""
        self.say(text + " ...")
        stop = threading.Event()
        watcher = None
        if spark is not None:
            watcher = threading.Thread(target=self._watch, args=(spark, text, stop),
                                       name="rackguard-progress", daemon=True)
            watcher.start()
        try:
            yield
        finally:
            stop.set()
            if watcher is not None:
                watcher.join()
            if self.tty:
                self.stream.write("\r\x1b[K")

    def _watch(self, spark: Any, text: str, stop: threading.Event) -> None:
        tracker = spark.sparkContext.statusTracker()
        last_print = self.clock()
        while not stop.wait(self.poll_s):
            try:
                stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            except Exception:  # noqa: BLE001 - progress must never fail a report
                return
            running = [s for s in stages if s is not None]
            if not running:
                continue
            done = sum(s.numCompletedTasks for s in running)
            total = sum(s.numTasks for s in running)
            line = self._stamped(f"{text}: Spark stage "
                                 f"{', '.join(str(s.stageId) for s in running)}, "
                                 f"{done}/{total} tasks")
            if self.tty:
                self._write(line, transient=True)
            elif self.clock() - last_print >= self.quiet_s:
                self._write(line)
                last_print = self.clock()
