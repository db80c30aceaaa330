"""Imports run one way.

- ``rackguard serve`` loads no tool: not the benchmarks, the demo, the simulator, the
  pipeline or pyspark (checked in a fresh interpreter, as the command runs);
- the pipeline imports nothing of the proxy but the ledger's schema module;
- the benchmarks import nothing of the tests; the product (protocol, proxy, config)
  imports neither tests nor benchmarks.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SERVE = """
import sys
from proxy import cli
args = cli.build_parser().parse_args(["serve", "--upstream", "127.0.0.1:1"])
cli.settings_from_args(args)
import proxy.app
tools = ("simulator", "pipeline", "pyspark", "benchmarks", "tests", "matplotlib")
print(sorted(m for m in sys.modules if m.split(".")[0] in tools
             or m in ("proxy.bench", "proxy.bench_ledger", "proxy.demo", "proxy.report_cli")))
"""


def imported(package: str) -> dict[str, set[str]]:
    """Module path -> the absolute module names it imports anywhere (functions too)."""
    out: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
        out[str(path.relative_to(ROOT))] = names
    return out


def test_serve_loads_no_tool() -> None:
    done = subprocess.run([sys.executable, "-c", SERVE], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_pipeline_imports_only_the_ledger_schema_of_the_proxy() -> None:
    ties = {path: {n for n in names if n.split(".")[0] in ("proxy", "protocol", "config")}
            for path, names in imported("pipeline").items()}
    assert {n for names in ties.values() for n in names} == {"proxy.ledger_schema"}


def test_benchmarks_and_the_product_do_not_import_tests() -> None:
    for package, banned in (("benchmarks", {"tests"}), ("protocol", {"tests", "benchmarks"}),
                            ("config", {"tests", "benchmarks"}),
                            ("proxy", {"tests", "benchmarks"})):
        for path, names in imported(package).items():
            assert not {n for n in names if n.split(".")[0] in banned}, path
