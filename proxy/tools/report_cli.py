"""``rackguard report``, ``rackguard audit`` and ``rackguard dump-offsets``: thin doors to
pipeline/.

Invariant: this module imports pipeline (and, through it, pyspark) only inside
the functions below, so ``rackguard serve`` and every other proxy path never
load them.
"""

from __future__ import annotations


def report(argv: list[str]) -> int:
    from pipeline.jobs import run
    from pipeline.session import DEFAULT_MASTER

    return run(argv, prog="rackguard report", default_master=DEFAULT_MASTER)


def dump_offsets(argv: list[str]) -> int:
    from pipeline.dump_offsets import main

    return main(argv)


def audit(argv: list[str]) -> int:
    from pipeline.audit import main

    return main(argv)
