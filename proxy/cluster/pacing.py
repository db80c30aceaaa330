"""Pacing a CPU-bound worker thread so the event loop keeps its latency.

Invariant: a thread that calls its :class:`Pacer` between small steps never runs
Python for much more than ``work`` seconds without sleeping ``nap`` seconds, and
so never holds the GIL, or the CPU the loop thread wakes on, for longer. Used by
the metadata feeder's worker and the ledger's writer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

_WORK_S = 0.001  # worker time between two naps
_NAP_S = 0.00005


class Pacer:
    """``pause()``: sleep ``nap`` seconds if ``work`` seconds have passed since the last nap.

    A CPU-bound worker thread otherwise delays the event loop thread twice over: the
    loop waits for the GIL (the switch interval), and, woken on a CPU the worker is
    running on, for the scheduler to preempt the worker (up to a tick: 4 ms on the
    project's machine). A sleep hands over both at once.
    """

    def __init__(self, work: float = _WORK_S, nap: float = _NAP_S,
                 clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._work = work
        self._nap = nap
        self._clock = clock
        self._sleep = sleep
        self._last = clock()

    def __call__(self) -> None:
        if self._clock() - self._last >= self._work:
            self._sleep(self._nap)
            self._last = self._clock()
